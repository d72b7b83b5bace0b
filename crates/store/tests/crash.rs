//! Crash consistency on a simulated disk: a workload of durable update
//! batches and merges (explicit, and by a small delta budget) loses power
//! at operation N, for every N the workload performs; unsynced writes are
//! then lost, or torn at sector granularity. After recovery the graph
//! equals the reference up to the last acknowledged batch, `verify`
//! passes, and the store merges on.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use solidgraph_io::{BackendChoice, CrashMode, Faults, SimDisk};
use solidgraph_store::*;

fn open_sim(path: &Path, disk: &Arc<SimDisk>) -> Result<Store> {
    Store::open(
        path,
        &OpenOptions { writable: true, cache_bytes: 64 << 10, delta_budget: 24 << 10, backend: BackendChoice::Sim(disk.clone()), ..Default::default() },
    )
}

#[test]
fn power_cut_at_every_io_of_updates_and_merges() {
    let dir = tempfile::tempdir().unwrap();
    let base_path = dir.path().join("base");
    let base = import_base(&base_path, 11);
    let image = std::fs::read(member_path(&base_path, 0)).unwrap();
    const STEPS: u64 = 60;
    // Runs the workload with a power cut at `cut`; returns the model of the
    // acknowledged batches and the operations the disk saw.
    let run = |cut: Option<u64>, mode: CrashMode, trial: &str| -> (Model, u64) {
        let disk = SimDisk::new(1, 5);
        disk.load(0, image.clone());
        let path = dir.path().join(trial);
        std::fs::create_dir_all(&path).unwrap();
        let s = open_sim(&path, &disk).unwrap();
        disk.set_faults(Faults { power_cut_at: cut, ..Default::default() });
        let (mut m, mut rng) = (base.clone(), 99u64);
        for i in 0..STEPS {
            let b = m.next(&mut rng, i);
            if apply_store(&s, &b).is_err() {
                break;
            }
            m.apply(&b);
        }
        let ops = disk.ops();
        drop(s);
        disk.crash(mode);
        let s = open_sim(&path, &disk).unwrap_or_else(|e| panic!("{trial}: reopen after the crash: {e}"));
        if let Some(d) = diff(&s, &m) {
            panic!("{trial}: after recovery: {d}");
        }
        s.verify(&mut |_, _| {}).unwrap_or_else(|e| panic!("{trial}: verify after recovery: {e}"));
        // The recovered store merges on (free space is recomputed).
        s.merge().unwrap();
        s.verify(&mut |_, _| {}).unwrap_or_else(|e| panic!("{trial}: verify after a merge past the crash: {e}"));
        assert!(diff(&s, &m).is_none(), "{trial}: merge after recovery changed the graph");
        std::fs::remove_dir_all(&path).unwrap();
        (m, ops)
    };
    let (_, total) = run(None, CrashMode::LoseUnsynced, "clean");
    assert!(total > 50, "the workload should do real I/O ({total} ops)");
    for cut in 0..total {
        run(Some(cut), CrashMode::LoseUnsynced, &format!("lose-{cut}"));
        run(Some(cut), CrashMode::Torn { seed: cut * 7 + 1 }, &format!("torn-{cut}"));
    }
    eprintln!("power cuts: the workload does {total} I/O operations; a cut at each, unsynced writes lost, then torn: {} recoveries", 2 * total);
}
