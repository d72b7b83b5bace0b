//! Writes the seed inputs of the store targets into fuzz/corpus (run by
//! hand after a format change: `cargo test --release -p
//! solidgraph-fuzzcheck --test seeds -- --ignored`): every page of the
//! fixture for `page`, a header-sized window of each for `store_bytes`, and
//! the payloads of real update records for `wal`.

use std::path::Path;

use solidgraph_fuzzcheck::fixture;
use solidgraph_store::*;

#[test]
#[ignore = "regenerates the seed corpora"]
fn write_seeds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let f = fixture();
    let pages = f.image.len() / f.page_size;
    for p in 0..pages {
        let pg = &f.image[p * f.page_size..(p + 1) * f.page_size];
        let mut seed = (p as u16).to_le_bytes().to_vec();
        seed.extend_from_slice(&pg[5..]);
        std::fs::write(root.join("page").join(format!("seed-page-{p}")), &seed).unwrap();
        let at = (p * f.page_size + 8) as u32;
        let mut seed = at.to_le_bytes().to_vec();
        seed.extend_from_slice(&pg[8..64]);
        std::fs::write(root.join("store_bytes").join(format!("seed-page-{p}")), &seed).unwrap();
    }
    // Real records: a copy of the fixture updated once by each operation.
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("g.sg");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::copy(member_path(&f.dir, 0), member_path(&d, 0)).unwrap();
    let s = Store::open(&d, &OpenOptions { writable: true, cache_bytes: 1 << 20, delta_budget: 0, ..Default::default() }).unwrap();
    s.add_edges(&[1, 2], &[3, 4], Some(&[0.5, 1.5]), Some(&[1, 2]), true).unwrap();
    s.delete_edges(&[1], &[3], true).unwrap();
    s.update_edge_weights(&[2], &[4], &[9.0], true).unwrap();
    s.update_tensor("x", &[0, 2], &[0u8; 24], true).unwrap();
    s.add_vertices(2, &[("x".into(), vec![1u8; 24])], true).unwrap();
    s.delete_vertices(&[9], true).unwrap();
    drop(s);
    let log = std::fs::read(d.join("wal.log")).unwrap();
    let recs = wal::recover(&log, &d).unwrap().records;
    let mut all = Vec::new();
    for (i, (_, payload)) in recs.iter().enumerate() {
        let mut one = (payload.len() as u16).to_le_bytes().to_vec();
        one.extend_from_slice(payload);
        std::fs::write(root.join("wal").join(format!("seed-record-{i}")), &one).unwrap();
        all.extend_from_slice(&one);
    }
    std::fs::write(root.join("wal").join("seed-all-records"), &all).unwrap();
}
