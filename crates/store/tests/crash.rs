//! Crash consistency on a simulated disk: a workload of durable update
//! batches and merges (explicit, and by a small delta budget) loses power
//! at operation N, for every N the workload performs; unsynced writes are
//! then lost, or torn at sector granularity. After recovery the graph
//! equals the reference up to the last acknowledged batch, `verify`
//! passes, and the store merges on.

mod common;
mod harness;

use common::*;
use harness::PowerCuts;
use solidgraph_store::*;

#[test]
fn power_cut_at_every_io_of_updates_and_merges() {
    let dir = tempfile::tempdir().unwrap();
    let base_path = dir.path().join("base");
    let base = import_base(&base_path, 11);
    let cuts = PowerCuts { dir: dir.path(), image: std::fs::read(member_path(&base_path, 0)).unwrap(), delta_budget: 24 << 10 };
    const STEPS: u64 = 60;
    // The acknowledged batches' model.
    let work = |s: &Store| {
        let (mut m, mut rng) = (base.clone(), 99u64);
        for i in 0..STEPS {
            let b = m.next(&mut rng, i);
            if apply_store(s, &b).is_err() {
                break;
            }
            m.apply(&b);
        }
        m
    };
    let check = |s: &Store, m: Model, trial: &str| {
        if let Some(d) = diff(s, &m) {
            panic!("{trial}: after recovery: {d}");
        }
        // The recovered store merges on (free space is recomputed).
        s.merge().unwrap();
        s.verify(&mut |_, _| {}).unwrap_or_else(|e| panic!("{trial}: verify after a merge past the crash: {e}"));
        assert!(diff(s, &m).is_none(), "{trial}: merge after recovery changed the graph");
    };
    let (total, _) = cuts.at_every_io(51, work, check);
    eprintln!("power cuts: the workload does {total} I/O operations; a cut at each, unsynced writes lost, then torn: {} recoveries", 2 * total);
}
