//! Adding a tensor to an existing store (`Store::add_tensor`): the rows
//! read back exactly after reopening; a power cut at every I/O of the add on
//! a simulated disk (unsynced writes lost, or torn) recovers either the store
//! as it was or the store with the whole tensor, `verify` passes, and the
//! add can be repeated; bad input changes nothing.

// The crash workload's helpers; this test uses only its base import.
#[allow(dead_code)]
mod common;
mod harness;

use common::*;
use harness::PowerCuts;
use solidgraph_store::superblock::TensorMeta;
use solidgraph_store::*;

const WIDTH: u64 = 37;

/// Row v of the added tensor: i32s that name the vertex and column.
fn row(v: u64) -> Vec<u8> {
    (0..WIDTH).flat_map(|j| ((v * 1000 + j) as i32).to_le_bytes()).collect()
}

fn add(s: &Store, name: &str) -> Result<TensorMeta> {
    s.add_tensor(name, DType::I32, WIDTH, |first, buf: &mut [u8]| {
        let rb = (WIDTH * 4) as usize;
        for (i, out) in buf.chunks_exact_mut(rb).enumerate() {
            out.copy_from_slice(&row(first + i as u64));
        }
        Ok::<(), StoreError>(())
    })
}

fn check_added(s: &Store, name: &str) {
    let ids: Vec<u64> = (0..s.num_nodes()).rev().collect();
    let rows = s.tensor(name, &ids).unwrap();
    let want: Vec<u8> = ids.iter().flat_map(|&v| row(v)).collect();
    assert_eq!(rows.data, want, "tensor {name} reads back as written");
}

#[test]
fn round_trip_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    import_base(&path, 3);
    {
        let s = Store::open(&path, &OpenOptions { writable: true, ..Default::default() }).unwrap();
        let m = add(&s, "t").unwrap();
        assert_eq!((m.rows, m.dim, m.dtype), (s.num_nodes(), WIDTH, DType::I32));
        check_added(&s, "t");
        let epoch = s.superblock().epoch;
        // A name in use, a width of 0, a long name, a failing source: refused, nothing changes.
        assert!(add(&s, "t").unwrap_err().to_string().contains("already has a tensor named \"t\""));
        assert!(add(&s, "x").is_err());
        assert!(s.add_tensor("z", DType::F32, 0, |_, _: &mut [u8]| Ok::<(), StoreError>(())).is_err());
        assert!(add(&s, &"n".repeat(64)).is_err());
        let failed = s.add_tensor("f", DType::U8, 1, |_, _: &mut [u8]| Err(StoreError::Invalid("the source failed".into())));
        assert!(failed.unwrap_err().to_string().contains("the source failed"));
        assert_eq!(s.superblock().epoch, epoch);
        assert!(s.tensor_meta("f").is_err());
        // The store takes a tensor again after a failed add.
        add(&s, "u").unwrap();
        check_added(&s, "u");
    }
    let s = Store::open(&path, &OpenOptions::default()).unwrap();
    check_added(&s, "t");
    check_added(&s, "u");
    s.verify(&mut |_, _| {}).unwrap();
    assert!(matches!(add(&s, "v"), Err(StoreError::ReadOnly)));
}

#[test]
fn power_cut_at_every_io_of_an_add() {
    let dir = tempfile::tempdir().unwrap();
    let base_path = dir.path().join("base");
    import_base(&base_path, 5);
    let cuts = PowerCuts { dir: dir.path(), image: std::fs::read(member_path(&base_path, 0)).unwrap(), delta_budget: OpenOptions::default().delta_budget };
    // Whether the add was acknowledged; then whether the tensor is there.
    let work = |s: &Store| add(s, "emb").is_ok();
    let check = |s: &Store, acked: bool, trial: &str| {
        let there = s.tensor_meta("emb").is_ok();
        assert!(there || !acked, "{trial}: an acknowledged add is durable");
        if there {
            check_added(s, "emb");
        } else {
            assert_eq!(s.tensors().len(), 1, "{trial}: the store is as it was");
            add(s, "emb").unwrap_or_else(|e| panic!("{trial}: add after recovery: {e}"));
            check_added(s, "emb");
            s.verify(&mut |_, _| {}).unwrap();
        }
        there
    };
    let (total, there) = cuts.at_every_io(4, work, check);
    let with = there.iter().filter(|&&t| t).count();
    assert!(with < there.len(), "some cuts fall before the commit");
    eprintln!("add_tensor power cuts: {total} I/O operations; recovered as before {} times, with the tensor {with} times", there.len() - with);
}
