//! Writes the seed inputs of the store targets into fuzz/corpus (run by
//! hand after a format change: `cargo test --release -p
//! solidgraph-fuzzcheck --test seeds -- --ignored`): every written page of
//! the fixture for `page`, a header-sized window of each for `store_bytes`, and
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
        // Free (zero) pages: nothing points at them, so damage there leaves
        // the store as it was.
        if pg.iter().all(|&b| b == 0) {
            continue;
        }
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

/// Seeds of the RDF, server and model targets (`--ignored` as above):
/// windows of each RDF file, the RDF log's records, one valid request per
/// server method, and each built-in model's two files.
#[test]
#[ignore = "regenerates the seed corpora"]
fn write_seeds_rdf_server_model() {
    use prost::Message;
    use solidgraph_fuzzcheck::{model, rdf, server};
    use solidgraph_server::proto::*;

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    for t in ["rdf_bytes", "rdf_wal", "server", "model"] {
        std::fs::create_dir_all(root.join(t)).unwrap();
    }
    let files = &rdf::rdf_fixture().files;
    for (i, (rel, bytes)) in files.iter().enumerate() {
        let name = rel.to_string_lossy().replace('/', "_");
        for at in (0..bytes.len()).step_by(4096).chain([8, 16, 24]).filter(|&a| a < bytes.len()) {
            // Windows of free (zero) pages add nothing the others lack.
            if bytes[at..(at + 64).min(bytes.len())].iter().all(|&b| b == 0) {
                continue;
            }
            let mut seed = vec![i as u8];
            seed.extend_from_slice(&(at as u32).to_le_bytes());
            seed.extend_from_slice(&bytes[at..(at + 64).min(bytes.len())]);
            std::fs::write(root.join("rdf_bytes").join(format!("seed-{name}-{at}")), &seed).unwrap();
        }
        if rel == Path::new("rdf.wal") {
            let (mut pos, mut all) = (0, Vec::new());
            while pos + 20 <= bytes.len() {
                let len = u32::from_le_bytes(bytes[pos + 4..pos + 8].try_into().unwrap()) as usize;
                let mut one = (len as u16).to_le_bytes().to_vec();
                one.extend_from_slice(&bytes[pos + 20..pos + 20 + len]);
                std::fs::write(root.join("rdf_wal").join(format!("seed-record-{pos}")), &one).unwrap();
                all.extend_from_slice(&one);
                pos += 20 + len;
            }
            assert!(!all.is_empty(), "the fixture's log has records");
            std::fs::write(root.join("rdf_wal").join("seed-all-records"), &all).unwrap();
        }
    }
    let ids = |v: &[i64]| Some(Array { dtype: "int64".into(), shape: vec![v.len() as u64], data: v.iter().flat_map(|x| x.to_le_bytes()).collect() });
    let f32s = |v: &[f32]| Some(Array { dtype: "float32".into(), shape: vec![v.len() as u64], data: v.iter().flat_map(|x| x.to_le_bytes()).collect() });
    let rows = Some(Array { dtype: "float32".into(), shape: vec![2, 3], data: [1f32, 2., 3., 4., 5., 6.].iter().flat_map(|x| x.to_le_bytes()).collect() });
    let s = || server::STORE.to_string();
    let msgs: Vec<Vec<Vec<u8>>> = vec![
        vec![ListStoresRequest {}.encode_to_vec()],
        vec![InfoRequest { store: s() }.encode_to_vec()],
        vec![NeighborsRequest { store: s(), ids: ids(&[0, 7, 9]), direction: "in".into(), with_weights: true, with_labels: true }.encode_to_vec()],
        vec![DegreeRequest { store: s(), ids: ids(&[1, 2]), direction: "out".into() }.encode_to_vec()],
        vec![EdgeWeightsRequest { store: s(), src: ids(&[7, 7]), dst: ids(&[1, 2]) }.encode_to_vec()],
        vec![TensorRequest { store: s(), name: "x".into(), ids: ids(&[0, 299]) }.encode_to_vec()],
        vec![
            SampleNeighborsRequest { store: s(), seeds: ids(&[7, 3]), fanouts: vec![3, 2], tensors: vec!["x".into()], seed: 5, ..Default::default() }
                .encode_to_vec(),
        ],
        vec![RandomWalksRequest { store: s(), starts: ids(&[7, 1]), length: 4, p: 1.0, q: 0.5, seed: 3, direction: String::new() }.encode_to_vec()],
        vec![AnalyticsRequest { store: s(), algorithm: "bfs".into(), source: 7, ..Default::default() }.encode_to_vec()],
        vec![ShardInfoRequest {}.encode_to_vec()],
        vec![ShardSampleRequest::default().encode_to_vec()],
        vec![AddVerticesRequest { store: s(), count: 2, tensors: [("x".to_string(), rows.clone().unwrap())].into(), nosync: false }.encode_to_vec()],
        vec![DeleteVerticesRequest { store: s(), ids: ids(&[4]), nosync: true }.encode_to_vec()],
        vec![AddEdgesRequest { store: s(), src: ids(&[1, 2]), dst: ids(&[3, 4]), weights: f32s(&[0.5, 1.5]), labels: None, nosync: false }.encode_to_vec()],
        vec![DeleteEdgesRequest { store: s(), src: ids(&[7]), dst: ids(&[1]), nosync: false }.encode_to_vec()],
        vec![UpdateEdgeWeightsRequest { store: s(), src: ids(&[7]), dst: ids(&[2]), weights: f32s(&[9.0]), nosync: false }.encode_to_vec()],
        vec![UpdateTensorRequest { store: s(), name: "x".into(), ids: ids(&[0, 2]), rows: rows.clone(), nosync: false }.encode_to_vec()],
        vec![FlushRequest { store: s() }.encode_to_vec()],
        vec![MergeRequest { store: s() }.encode_to_vec()],
        vec![
            UpdateGraphRequest { name: "new".into(), options: Some(UpdateGraphOptions { num_nodes: Some(5), ..Default::default() }), ..Default::default() }
                .encode_to_vec(),
            UpdateGraphRequest { src: ids(&[0, 1, 2]), dst: ids(&[1, 2, 4]), ..Default::default() }.encode_to_vec(),
        ],
    ];
    assert_eq!(msgs.len(), server::METHODS.len());
    for (i, m) in msgs.iter().enumerate() {
        let mut seed = vec![i as u8];
        for one in m {
            seed.extend_from_slice(&(one.len() as u16).to_le_bytes());
            seed.extend_from_slice(one);
        }
        let name = server::METHODS[i].rsplit('/').next().unwrap();
        std::fs::write(root.join("server").join(format!("seed-{name}")), &seed).unwrap();
    }
    for i in 0..model::MODELS {
        let (dfg, w) = model::builtin(i);
        let d = tempfile::tempdir().unwrap();
        solidgraph_runner::save_model(d.path(), &dfg, &w).unwrap();
        let mut seed = vec![i as u8];
        seed.extend_from_slice(dfg.to_json().as_bytes());
        std::fs::write(root.join("model").join(format!("seed-json-{i}")), &seed).unwrap();
        let mut seed = vec![i as u8 | 0x80];
        seed.extend_from_slice(&std::fs::read(d.path().join("weights.safetensors")).unwrap());
        std::fs::write(root.join("model").join(format!("seed-weights-{i}")), &seed).unwrap();
    }
}
