//! Concurrency stress: one writer (edge additions and deletions, tensor
//! updates, vertex additions and deletions, merges explicit and by the
//! delta budget, each batch durable) and reader threads (neighbors out and
//! in, tensor gathers) for a few seconds. Every read equals the reference
//! graph after some committed prefix of the batches (the versions
//! published around the call, or the batch in flight). No
//! read fails; the store verifies and reopens to the last version; a
//! watchdog fails the test if anything deadlocks.

mod common;
#[path = "common/reference.rs"]
mod reference;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use solidgraph_engine::bfs::bfs;
use solidgraph_engine::sampler::{SampleOptions, sample_neighbors};
use solidgraph_engine::silent;
use solidgraph_store::*;

/// How long the writer runs, at most, and how many batches.
const WRITE_FOR: Duration = Duration::from_secs(4);
const MAX_BATCHES: u64 = 2000;
const READERS: usize = 3;
/// The whole test, past which the watchdog aborts it.
const WATCHDOG: Duration = Duration::from_secs(120);

/// The graph after each committed batch: `versions[i]` after `i` of them.
struct Versions {
    list: Mutex<Vec<Arc<Model>>>,
    done: AtomicBool,
}

impl Versions {
    fn len(&self) -> usize {
        self.list.lock().unwrap().len()
    }

    /// Version `i`, waiting for the writer to publish it; None if it never
    /// will.
    fn get(&self, i: usize) -> Option<Arc<Model>> {
        loop {
            if let Some(m) = self.list.lock().unwrap().get(i) {
                return Some(m.clone());
            }
            if self.done.load(Ordering::Acquire) {
                return self.list.lock().unwrap().get(i).cloned();
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The first version in `lo..=hi` (`hi` possibly the batch in flight
    /// when the read ended) that `ok` accepts.
    fn find(&self, lo: usize, hi: usize, ok: impl Fn(&Model) -> bool) -> Option<usize> {
        (lo..=hi).find(|&i| self.get(i).is_some_and(|m| ok(&m)))
    }
}

fn out_list(m: &Model, v: u64) -> Vec<(u64, f32)> {
    m.out.get(&v).map(|l| l.iter().map(|(&d, &w)| (d, w)).collect()).unwrap_or_default()
}

fn in_lists(m: &Model) -> BTreeMap<u64, Vec<u64>> {
    let mut ins: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (&a, l) in &m.out {
        for &b in l.keys() {
            ins.entry(b).or_default().push(a);
        }
    }
    ins
}

fn out_matches(m: &Model, ids: &[u64], csr: &Csr) -> bool {
    let w = csr.weights.as_deref().unwrap_or(&[]);
    ids.iter().enumerate().all(|(i, &v)| {
        let (a, b) = (csr.indptr[i] as usize, csr.indptr[i + 1] as usize);
        let got: Vec<(u64, f32)> = csr.indices[a..b].iter().copied().zip(w[a..b].iter().copied()).collect();
        got == out_list(m, v)
    })
}

fn in_matches(m: &Model, ids: &[u64], csr: &Csr) -> bool {
    let ins = in_lists(m);
    ids.iter().enumerate().all(|(i, v)| csr.indices[csr.indptr[i] as usize..csr.indptr[i + 1] as usize] == ins.get(v).cloned().unwrap_or_default()[..])
}

fn rows_match(m: &Model, ids: &[u64], rows: &Rows) -> bool {
    ids.iter().enumerate().all(|(i, v)| {
        let got: Vec<f32> = rows.data[i * 4 * DIM..(i + 1) * 4 * DIM].chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        got[..] == m.rows.get(v).copied().unwrap_or([0.0; DIM])[..]
    })
}

/// One reader: random reads until the writer is done; returns the reads
/// checked.
fn reader(s: &Store, versions: &Versions, seed: u64) -> u64 {
    let mut rng = seed;
    let mut checked = 0;
    while !versions.done.load(Ordering::Acquire) {
        let ids: Vec<u64> = (0..1 + rnd(&mut rng) % 60).map(|_| rnd(&mut rng) % N).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
        let lo = versions.len() - 1;
        let kind = rnd(&mut rng) % 5;
        let what = ["neighbors out", "neighbors in", "tensor", "sample", "bfs"][kind as usize];
        let found = match kind {
            0 => {
                let csr = s.neighbors(&ids, Direction::Out, true, false).unwrap_or_else(|e| panic!("{what}: {e}"));
                versions.find(lo, versions.len(), |m| out_matches(m, &ids, &csr))
            }
            1 => {
                let csr = s.neighbors(&ids, Direction::In, false, false).unwrap_or_else(|e| panic!("{what}: {e}"));
                versions.find(lo, versions.len(), |m| in_matches(m, &ids, &csr))
            }
            2 => {
                let rows = s.tensor("x", &ids).unwrap_or_else(|e| panic!("{what}: {e}"));
                versions.find(lo, versions.len(), |m| rows_match(m, &ids, &rows))
            }
            3 => {
                let (dir, fanouts) = if rnd(&mut rng).is_multiple_of(2) { (Direction::In, vec![3, 2]) } else { (Direction::Out, vec![4, 3]) };
                let seed = rnd(&mut rng);
                let seeds = &ids[..ids.len().min(6)];
                let o = SampleOptions { fanouts: fanouts.clone(), direction: dir, seed, ..Default::default() };
                let snap = s.snapshot();
                let got = sample_neighbors(&snap, seeds, &o).unwrap_or_else(|e| panic!("{what}: {e}"));
                versions.find(lo, versions.len(), |m| reference::shape(&got) == reference::shape(&reference::sample(m, seeds, &fanouts, seed, dir)))
            }
            _ => {
                let snap = s.snapshot();
                let got = bfs(&snap, ids[0], None, false, &silent).unwrap_or_else(|e| panic!("{what}: {e}"));
                versions.find(lo, versions.len(), |m| got.levels == reference::bfs(m, ids[0]))
            }
        };
        assert!(found.is_some(), "{what} of {ids:?}: equals no version from {lo} on");
        checked += 1;
    }
    checked
}

/// Says why the test aborts, with every thread's stack when gdb is
/// installed, so that a hang in CI says where it is. Written to the
/// process's stderr: libtest's capture of `eprintln!` dies with the abort.
fn abort_with_stacks(why: &str) -> ! {
    use std::io::Write;
    let pid = std::process::id().to_string();
    let stacks = match std::process::Command::new("gdb").args(["-p", &pid, "-batch", "-ex", "thread apply all bt"]).output() {
        Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned(),
        Err(e) => format!("no thread stacks (gdb: {e})"),
    };
    let _ = writeln!(std::io::stderr().lock(), "stress: {why}\n{stacks}");
    std::process::abort();
}

#[test]
fn one_writer_and_readers_see_committed_prefixes() {
    let done = Arc::new(AtomicBool::new(false));
    let watch = done.clone();
    std::thread::spawn(move || {
        let t0 = Instant::now();
        while t0.elapsed() < WATCHDOG {
            if watch.load(Ordering::Acquire) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        abort_with_stacks(&format!("no progress after {WATCHDOG:?} (a deadlock?)"));
    });

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    let base = import_base(&path, 17);
    let s = Store::open(&path, &OpenOptions { writable: true, cache_bytes: 256 << 10, delta_budget: 24 << 10, ..Default::default() }).unwrap();
    let versions = Versions { list: Mutex::new(vec![Arc::new(base.clone())]), done: AtomicBool::new(false) };
    let (batches, merges, reads) = std::thread::scope(|sc| {
        let readers: Vec<_> = (0..READERS)
            .map(|r| {
                sc.spawn({
                    let (s, versions) = (&s, &versions);
                    move || reader(s, versions, 1000 + r as u64)
                })
            })
            .collect();
        let (mut m, mut rng, mut merges) = (base.clone(), 7u64, 0u64);
        let t0 = Instant::now();
        let mut i = 0;
        while i < MAX_BATCHES && t0.elapsed() < WRITE_FOR {
            let b = m.next(&mut rng, i);
            merges += matches!(b, Batch::Merge) as u64;
            apply_store(&s, &b).unwrap_or_else(|e| panic!("batch {i} ({b:?}): {e}"));
            m.apply(&b);
            versions.list.lock().unwrap().push(Arc::new(m.clone()));
            i += 1;
        }
        versions.done.store(true, Ordering::Release);
        let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
        (i, merges, reads)
    });
    let last = versions.get(batches as usize).unwrap();
    assert!(diff(&s, &last).is_none(), "the store after the writer: {:?}", diff(&s, &last));
    s.verify(&mut |_, _| {}).unwrap();
    drop(s);
    let s = Store::open(&path, &OpenOptions { cache_bytes: 1 << 20, ..Default::default() }).unwrap();
    assert!(diff(&s, &last).is_none(), "after reopening: {:?}", diff(&s, &last));
    s.verify(&mut |_, _| {}).unwrap();
    assert!(reads > 100 && batches > 50, "too little work to mean anything: {reads} reads, {batches} batches");
    done.store(true, Ordering::Release);
    eprintln!("stress: {batches} batches ({merges} explicit merges, more by the delta budget), {READERS} readers checked {reads} reads, 0 errors");
}

/// Where the engine's sample and BFS on `s` differ from the model, if
/// anywhere (a few seed sets, both directions, several fanouts).
fn sample_bfs_diff(s: &Store, m: &Model, rng: &mut u64) -> Option<String> {
    for (dir, fanouts) in [(Direction::In, vec![3, 2]), (Direction::Out, vec![2, 4]), (Direction::In, vec![-1]), (Direction::Out, vec![5])] {
        let seeds: Vec<u64> = (0..1 + rnd(rng) % 8).map(|_| rnd(rng) % m.n).collect();
        let seed = rnd(rng);
        let o = SampleOptions { fanouts: fanouts.clone(), direction: dir, seed, ..Default::default() };
        let got = match sample_neighbors(s, &seeds, &o) {
            Ok(g) => g,
            Err(e) => return Some(format!("sample: {e}")),
        };
        let want = reference::sample(m, &seeds, &fanouts, seed, dir);
        if reference::shape(&got) != reference::shape(&want) {
            return Some(format!("sample of {seeds:?} {dir:?} {fanouts:?} seed {seed}: {:?}, expected {:?}", reference::shape(&got), reference::shape(&want)));
        }
    }
    let source = rnd(rng) % m.n;
    match bfs(s, source, None, false, &silent) {
        Ok(b) if b.levels != reference::bfs(m, source) => {
            let want = reference::bfs(m, source);
            let v = (0..want.len()).find(|&v| b.levels.get(v) != Some(&want[v]));
            Some(format!("bfs from {source}: first difference at vertex {v:?}: {:?}, expected {:?}", v.map(|v| b.levels.get(v)), v.map(|v| want[v])))
        }
        Ok(_) => None,
        Err(e) => Some(format!("bfs: {e}")),
    }
}

/// Sample and BFS after every batch of the writer's workload, on the store
/// and on snapshots taken earlier, one thread: a deterministic check of
/// what the stress test checks under concurrency.
#[test]
fn sample_and_bfs_equal_the_reference_after_every_batch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    let base = import_base(&path, 17);
    let s = Store::open(&path, &OpenOptions { writable: true, cache_bytes: 256 << 10, delta_budget: 24 << 10, ..Default::default() }).unwrap();
    let (mut m, mut rng, mut check_rng) = (base, 7u64, 3u64);
    let mut snaps: Vec<(usize, Store, Model)> = Vec::new();
    for i in 0..300 {
        let b = m.next(&mut rng, i);
        apply_store(&s, &b).unwrap_or_else(|e| panic!("batch {i} ({b:?}): {e}"));
        m.apply(&b);
        if let Some(d) = sample_bfs_diff(&s, &m, &mut check_rng) {
            panic!("after batch {i} ({b:?}): {d}");
        }
        if i % 25 == 0 {
            snaps.push((i as usize, s.snapshot(), m.clone()));
        }
        for (at, snap, sm) in snaps.iter().filter(|_| i % 10 == 9) {
            if let Some(d) = sample_bfs_diff(snap, sm, &mut check_rng) {
                panic!("snapshot after batch {at}, read after batch {i}: {d}");
            }
        }
    }
}

/// What the stress test found when its readers ran BFS on the live store
/// (not a snapshot): an operator reading the graph once per level saw a
/// batch committed between two levels in the later ones only, and its
/// levels belonged to no version of the graph.
/// Here the batch is applied from the progress hook, between levels, on
/// the same thread. The engine's multi-read operators take one view per
/// call (`Store::view`), so the BFS sees version A throughout.
#[test]
fn bfs_on_a_live_store_sees_one_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    // A path 0 -> 1 -> 2 -> 3 -> 4.
    let o = ImportOptions { num_nodes: Some(5), page_size: 4096, ..Default::default() };
    import(&path, &[EdgeInput::Memory { src: vec![0, 1, 2, 3], dst: vec![1, 2, 3, 4], weights: None, labels: None }], &[], &o, &|_, _, _| {}).unwrap();
    let s = Store::open(&path, &OpenOptions { writable: true, ..Default::default() }).unwrap();
    let a = [0, 1, 2, 3, 4];
    // Version B: 2 -> 3 deleted, 0 -> 3 added.
    let b = [0, 1, 2, 1, 2];
    let once = std::sync::Once::new();
    let hook = |_: &str, _: u64, _: u64| {
        once.call_once(|| {
            s.delete_edges(&[2], &[3], true).unwrap();
            s.add_edges(&[0], &[3], None, None, true).unwrap();
        });
        Ok(())
    };
    let got = bfs(&s, 0, None, false, &hook).unwrap().levels;
    assert_eq!(got, a, "bfs levels {got:?} are not version A's {a:?} (B would be {b:?})");
}

/// What hung the stress test in CI: a snapshot read the base and the
/// pending updates apart, so a merge between the two reads paired the old
/// pages with the new (empty) delta of the next epoch, and every read of
/// that snapshot retried forever waiting for the epochs to agree. Here
/// readers take snapshots while the writer merges after every batch; each
/// snapshot's read must return (a watchdog ends a hang) and equal some
/// committed version.
#[test]
fn snapshots_taken_during_merges_are_of_one_version() {
    const ROUNDS: u64 = 150;
    const READERS: usize = 2;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    let o = ImportOptions { num_nodes: Some(4), page_size: 4096, ..Default::default() };
    import(&path, &[EdgeInput::Memory { src: vec![0], dst: vec![1], weights: None, labels: None }], &[], &o, &|_, _, _| {}).unwrap();
    let s = Store::open(&path, &OpenOptions { writable: true, ..Default::default() }).unwrap();
    let (done, exited) = (AtomicBool::new(false), std::sync::atomic::AtomicUsize::new(0));
    let reads = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|sc| {
        for _ in 0..READERS {
            let (s, done, exited, reads) = (&s, &done, &exited, &reads);
            sc.spawn(move || {
                while !done.load(Ordering::Acquire) {
                    let snap = s.snapshot();
                    // The writer toggles edge 0 -> 2 beside 0 -> 1.
                    let csr = snap.neighbors(&[0], Direction::Out, false, false).expect("a snapshot read");
                    assert!(matches!(&csr.indices[..], [1] | [1, 2]), "out-list of 0: {:?}", csr.indices);
                    reads.fetch_add(1, Ordering::Relaxed);
                }
                exited.fetch_add(1, Ordering::Release);
            });
        }
        for i in 0..ROUNDS {
            if i % 2 == 0 {
                s.add_edges(&[0], &[2], None, None, false).unwrap();
            } else {
                s.delete_edges(&[0], &[2], false).unwrap();
            }
            s.merge().unwrap();
        }
        done.store(true, Ordering::Release);
        // A reader stuck in a read never exits: end the test with the
        // stacks instead of hanging CI.
        let t0 = Instant::now();
        while exited.load(Ordering::Acquire) < READERS {
            if t0.elapsed() > Duration::from_secs(60) {
                abort_with_stacks("a snapshot read did not return in 60 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    assert!(reads.into_inner() > 0, "no reads ran beside the merges");
}
