//! The power-cut harness of `crash.rs` and `addtensor.rs`: a piece of work
//! on a fresh copy of a store image on the simulated disk, the power cut
//! at its Nth I/O for every N it does (unsynced writes lost, then torn at
//! sector granularity), and a check of the store recovered from each cut.

use std::path::Path;
use std::sync::Arc;

use solidgraph_io::{BackendChoice, CrashMode, Faults, SimDisk};
use solidgraph_store::*;

/// Opens `path` for writing on `disk` (a small cache, so reads go to the
/// disk; `delta_budget`: merges by budget when the work updates).
pub fn open_sim(path: &Path, disk: &Arc<SimDisk>, delta_budget: u64) -> Result<Store> {
    Store::open(path, &OpenOptions { writable: true, cache_bytes: 64 << 10, delta_budget, backend: BackendChoice::Sim(disk.clone()), ..Default::default() })
}

pub struct PowerCuts<'a> {
    /// Where each trial's store directory (its log) goes.
    pub dir: &'a Path,
    /// Member 0 of the store every trial starts from.
    pub image: Vec<u8>,
    pub delta_budget: u64,
}

impl PowerCuts<'_> {
    /// One trial: `work` on the image with the power cut at operation
    /// `cut` (None: no cut), the crash, the reopen, then `check` on the
    /// recovered store with what `work` returned. Returns what `check`
    /// returned and the operations `work` saw.
    pub fn run<T, R>(&self, cut: Option<u64>, mode: CrashMode, trial: &str, work: impl FnOnce(&Store) -> T, check: impl FnOnce(&Store, T) -> R) -> (R, u64) {
        let disk = SimDisk::new(1, 5);
        disk.load(0, self.image.clone());
        let path = self.dir.join(trial);
        std::fs::create_dir_all(&path).unwrap();
        let s = open_sim(&path, &disk, self.delta_budget).unwrap();
        disk.set_faults(Faults { power_cut_at: cut, ..Default::default() });
        let done = work(&s);
        let ops = disk.ops();
        drop(s);
        disk.crash(mode);
        let s = open_sim(&path, &disk, self.delta_budget).unwrap_or_else(|e| panic!("{trial}: reopen after the crash: {e}"));
        s.verify(&mut |_, _| {}).unwrap_or_else(|e| panic!("{trial}: verify after recovery: {e}"));
        let r = check(&s, done);
        drop(s);
        std::fs::remove_dir_all(&path).unwrap();
        (r, ops)
    }

    /// A clean trial to count the work's operations (at least `min_ops`),
    /// then a cut at each, unsynced writes lost and then torn. Returns the
    /// operation count and `check`'s results, two per cut.
    pub fn at_every_io<T, R>(&self, min_ops: u64, work: impl Fn(&Store) -> T, check: impl Fn(&Store, T, &str) -> R) -> (u64, Vec<R>) {
        let (_, total) = self.run(None, CrashMode::LoseUnsynced, "clean", &work, |s, t| check(s, t, "clean"));
        assert!(total >= min_ops, "the work should do real I/O ({total} ops)");
        let mut out = Vec::with_capacity(2 * total as usize);
        for cut in 0..total {
            for (mode, trial) in [(CrashMode::LoseUnsynced, format!("lose-{cut}")), (CrashMode::Torn { seed: cut * 7 + 1 }, format!("torn-{cut}"))] {
                out.push(self.run(Some(cut), mode, &trial, &work, |s, t| check(s, t, &trial)).0);
            }
        }
        (total, out)
    }
}
