//! I/O errors (EIO) from the simulated disk at every I/O of every
//! operation: open, verify, neighbors, degrees, range reads, tensor
//! gathers, sampling, BFS, update batches with merges, and import. Each
//! fault is an error to the caller naming the I/O (the member and offset),
//! never a partial result; once the fault clears, the same store answers
//! exactly as before, verifies, and (after a power cut) reopens with every
//! acknowledged batch. Failed writes come in two kinds: the write did not
//! happen, or it landed and the device still reported an error.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use solidgraph_engine::bfs::bfs;
use solidgraph_engine::sampler::{SampleOptions, sample_neighbors};
use solidgraph_io::{BackendChoice, CrashMode, Faults, IoError, OpKinds, SimDisk};
use solidgraph_store::*;

fn open_sim(path: &Path, disk: &Arc<SimDisk>, writable: bool) -> Result<Store> {
    // A small cache, so reads go to the disk.
    let o = OpenOptions { writable, cache_bytes: 64 << 10, delta_budget: 24 << 10, backend: BackendChoice::Sim(disk.clone()), ..Default::default() };
    Store::open(path, &o)
}

/// Whether `e` is the injected EIO, named by member and offset.
fn io_is_eio(io: &IoError) -> bool {
    match io {
        IoError::Device { source, path, .. } | IoError::Os { source, path } => source.raw_os_error() == Some(libc::EIO) && path.ends_with("sg.0"),
        _ => false,
    }
}

/// Whether `e`'s chain holds the injected EIO (`transparent` variants
/// hide their inner error from `source`, so they are unwrapped here).
fn is_eio(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(e) = cur {
        let io = match (e.downcast_ref::<IoError>(), e.downcast_ref::<StoreError>(), e.downcast_ref::<solidgraph_engine::EngineError>()) {
            (Some(io), _, _) | (_, Some(StoreError::Io(io)), _) | (_, _, Some(solidgraph_engine::EngineError::Store(StoreError::Io(io)))) => Some(io),
            _ => None,
        };
        if let Some(io) = io {
            return io_is_eio(io);
        }
        cur = e.source();
    }
    false
}

type Answer = std::result::Result<String, Box<dyn std::error::Error>>;

/// A named read.
type Read = (&'static str, fn(&Store) -> Answer);

/// The read operations, each answering as text (equal texts, equal
/// results). They read in batches of 40 vertices past the page cache, so
/// each does several I/Os.
fn reads() -> Vec<Read> {
    fn each<T: std::fmt::Debug>(s: &Store, f: impl Fn(&[u64]) -> Result<T>) -> Answer {
        let ids: Vec<u64> = (0..s.num_nodes()).collect();
        let mut out = String::new();
        for chunk in ids.chunks(40) {
            out += &format!("{:?}", f(chunk)?);
        }
        Ok(out)
    }
    vec![
        ("verify", |s| Ok(format!("{:?}", s.verify(&mut |_, _| {})?))),
        ("neighbors out", |s| each(s, |c| s.neighbors_with(c, Direction::Out, true, false, false, Csr::default()))),
        ("neighbors in", |s| each(s, |c| s.neighbors_with(c, Direction::In, false, false, false, Csr::default()))),
        ("degree", |s| each(s, |c| s.degree(c, Direction::Out))),
        ("read_range", |s| each(s, |c| s.read_range(Direction::Out, c[0], c[c.len() - 1] + 1, true, false, Csr::default()))),
        ("tensor", |s| each(s, |c| s.tensor("x", c))),
        ("sample", |s| {
            let mut out = String::new();
            for seed in 0..6u64 {
                let o = SampleOptions { fanouts: vec![5, 3], seed, tensors: vec!["x".into()], ..Default::default() };
                out += &format!("{:?}", sample_neighbors(s, &[seed, 40 + seed, 150 + 7 * seed, 300 + seed], &o)?);
                s.clear_cache();
            }
            Ok(out)
        }),
        ("bfs", |s| {
            let mut out = String::new();
            for source in [0, 123, 321] {
                out += &format!("{:?}", bfs(s, source, None, true, &solidgraph_engine::silent)?.levels);
                s.clear_cache();
            }
            Ok(out)
        }),
    ]
}

/// Up to `max` fault points spread over `0..total`.
fn points(total: u64, max: u64) -> Vec<u64> {
    let step = total.div_ceil(max).max(1);
    (0..total).step_by(step as usize).collect()
}

/// A store with merged pages, a tensor map and pending log records: the
/// base import, then part of the crash workload on files.
fn build(dir: &Path) -> (std::path::PathBuf, Vec<u8>) {
    let path = dir.join("g");
    let mut m = import_base(&path, 21);
    let s = Store::open(&path, &OpenOptions { writable: true, cache_bytes: 1 << 20, delta_budget: 0, ..Default::default() }).unwrap();
    let mut rng = 5u64;
    for i in 0..40 {
        let b = m.next(&mut rng, i);
        apply_store(&s, &b).unwrap();
        m.apply(&b);
    }
    assert!(s.pending_updates() > 0, "the fixture keeps updates in the log");
    drop(s);
    let image = std::fs::read(member_path(&path, 0)).unwrap();
    (path, image)
}

#[test]
fn reads_fail_cleanly_at_every_io() {
    let dir = tempfile::tempdir().unwrap();
    let (path, image) = build(dir.path());
    let disk = SimDisk::new(1, 9);
    disk.load(0, image);
    let (mut faults, mut cases) = (0u64, 0u64);

    // Open: a fault at each of its I/Os is an error; then it opens.
    let before = disk.ops();
    let want: Vec<String> = {
        let s = open_sim(&path, &disk, false).unwrap();
        let opened = disk.ops() - before;
        assert!(opened > 0);
        for k in 0..opened {
            disk.set_faults(Faults { eio_at: Some(disk.ops() + k), ..Default::default() });
            match open_sim(&path, &disk, false) {
                Err(e) => assert!(is_eio(&e), "open, fault at I/O {k}: {e}"),
                Ok(_) => panic!("open, fault at I/O {k}: opened"),
            }
            faults += disk.eios();
            cases += 1;
        }
        disk.set_faults(Faults::default());
        reads().iter().map(|(name, f)| f(&s).unwrap_or_else(|e| panic!("{name}: {e}"))).collect()
    };

    for ((name, f), want) in reads().iter().zip(&want) {
        // How many I/Os the read does from a cold cache.
        let s = open_sim(&path, &disk, false).unwrap();
        let at = disk.ops();
        f(&s).unwrap();
        let total = disk.ops() - at;
        assert!(total > 0, "{name} does no I/O");
        let mut sticky = vec![(None, Some(0))];
        sticky.extend(points(total, 40).into_iter().map(|k| (Some(k), None)));
        for (eio_at, eio_from) in sticky {
            let s = open_sim(&path, &disk, false).unwrap();
            let at = disk.ops();
            disk.set_faults(Faults { eio_at: eio_at.map(|k| at + k), eio_from: eio_from.map(|k| at + k), ..Default::default() });
            match f(&s) {
                Err(e) => assert!(is_eio(e.as_ref()), "{name}, fault at I/O {eio_at:?}/{eio_from:?}: {e}"),
                Ok(got) => panic!("{name}, fault at I/O {eio_at:?}/{eio_from:?}: answered ({} bytes)", got.len()),
            }
            faults += disk.eios();
            cases += 1;
            // The fault cleared, the same store (its cache included)
            // answers exactly as before.
            disk.set_faults(Faults::default());
            assert_eq!(&f(&s).unwrap_or_else(|e| panic!("{name} after the fault: {e}")), want, "{name} after a fault at {eio_at:?}");
            s.verify(&mut |_, _| {}).unwrap();
        }
    }

    // Random read faults over all reads at once on one store: every
    // answer is right or an EIO.
    let s = open_sim(&path, &disk, false).unwrap();
    disk.set_faults(Faults { eio_ppm: 30_000, eio_seed: 77, eio_kinds: OpKinds::Reads, ..Default::default() });
    for round in 0..20 {
        for ((name, f), want) in reads().iter().zip(&want) {
            match f(&s) {
                Ok(got) => assert_eq!(&got, want, "{name}, round {round}: a different answer under random faults"),
                Err(e) => assert!(is_eio(e.as_ref()), "{name}, round {round}: {e}"),
            }
            cases += 1;
        }
    }
    faults += disk.eios();
    disk.set_faults(Faults::default());
    s.verify(&mut |_, _| {}).unwrap();
    eprintln!("read faults: {cases} cases, {faults} EIOs injected, 0 partial or wrong answers");
}

fn is_power_cut(e: &StoreError) -> bool {
    e.to_string().contains("simulated power cut")
}

/// Runs the update workload from `base` with `faults` set after the open;
/// returns the model of the acknowledged batches, the disk's op count and
/// the batches that failed. A power cut ends it.
fn workload(path: &Path, disk: &Arc<SimDisk>, base: &Model, faults: impl Fn(u64) -> Faults, trial: &str) -> (Model, u64, u64) {
    let s = open_sim(path, disk, true).unwrap();
    let mut m = base.clone();
    disk.set_faults(faults(disk.ops()));
    let (mut rng, mut errors, mut cut) = (99u64, 0u64, false);
    for i in 0..STEPS {
        let b = m.next(&mut rng, i);
        match apply_store(&s, &b) {
            Ok(()) => m.apply(&b),
            Err(e) if is_power_cut(&e) => {
                cut = true;
                break;
            }
            Err(e) => {
                errors += 1;
                assert!(is_eio(&e) || e.to_string().contains("reopen"), "{trial}: batch {i} ({b:?}): {e}");
            }
        }
    }
    let ops = disk.ops();
    if !cut {
        disk.set_faults(Faults::default());
        if let Some(d) = diff(&s, &m) {
            panic!("{trial}: in the running store: {d}");
        }
    }
    drop(s);
    (m, ops, errors)
}

const STEPS: u64 = 60;

/// After the workload: a power cut (unsynced writes lost), then the store
/// reopens with exactly the acknowledged batches, verifies and merges on.
fn recover(path: &Path, disk: &Arc<SimDisk>, m: &Model, trial: &str) {
    disk.crash(CrashMode::LoseUnsynced);
    let s = open_sim(path, disk, true).unwrap_or_else(|e| panic!("{trial}: reopen: {e}"));
    if let Some(d) = diff(&s, m) {
        panic!("{trial}: after reopening: {d}");
    }
    s.verify(&mut |_, _| {}).unwrap_or_else(|e| panic!("{trial}: verify: {e}"));
    s.merge().unwrap_or_else(|e| panic!("{trial}: merge after reopening: {e}"));
    s.verify(&mut |_, _| {}).unwrap_or_else(|e| panic!("{trial}: verify after a merge: {e}"));
    assert!(diff(&s, m).is_none(), "{trial}: a merge after reopening changed the graph");
}

#[test]
fn updates_and_merges_survive_eio_at_every_io() {
    let dir = tempfile::tempdir().unwrap();
    let base_path = dir.path().join("base");
    let base = import_base(&base_path, 11);
    let image = std::fs::read(member_path(&base_path, 0)).unwrap();
    let trial_dir = |name: &str| {
        let p = dir.path().join(name);
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        p
    };
    let fresh = || {
        let d = SimDisk::new(1, 5);
        d.load(0, image.clone());
        d
    };
    let disk = fresh();
    let (_, total, errors) = workload(&trial_dir("clean"), &disk, &base, |_| Faults::default(), "clean");
    assert_eq!(errors, 0);
    let opened = {
        let d = fresh();
        drop(open_sim(&trial_dir("opened"), &d, true).unwrap());
        d.ops()
    };
    let total = total - opened;
    assert!(total > 50, "the workload should do real I/O ({total} ops)");
    let (mut cases, mut failed) = (0u64, 0u64);
    let mut rng = 1234u64;
    for k in 0..total {
        // A power cut after the fault too: later merges must not build on
        // a failed one's pages. The four kinds alternate over fault points.
        let cut = k + 1 + rnd(&mut rng) % (total - k + 8);
        for (lands, power_cut) in [(k % 2 == 1, None), (k % 2 == 0, Some(cut))] {
            {
                let trial = format!("EIO at {k}, write lands {lands}, power cut {power_cut:?}");
                let path = trial_dir("t");
                let disk = fresh();
                let faults = |at: u64| Faults { eio_at: Some(at + k), eio_write_lands: lands, power_cut_at: power_cut.map(|c| at + c), ..Default::default() };
                let (m, _, errors) = workload(&path, &disk, &base, faults, &trial);
                failed += errors;
                recover(&path, &disk, &m, &trial);
                cases += 1;
            }
        }
    }
    eprintln!(
        "update faults: the workload does {total} I/Os; {cases} trials (EIO at each, without and with a later power cut, the failed write lost or landed alternately), {failed} batches failed with the error"
    );
}

/// Regression: a merge whose superblock write or the sync after it failed
/// left the store taking merges; the next one reused pages the (possibly
/// durable) new superblock names, so a power cut inside that merge
/// reopened a superblock over overwritten pages ("vertex 252 has neighbor
/// 406 beyond the 405 vertices"). Such a failure now refuses writes until
/// the store is reopened. Here: EIO at each I/O of a merge, then a batch
/// and a second merge cut by a power failure at each of its I/Os.
#[test]
fn a_failed_commit_is_never_built_on() {
    let dir = tempfile::tempdir().unwrap();
    let base_path = dir.path().join("base");
    let base = import_base(&base_path, 3);
    let image = std::fs::read(member_path(&base_path, 0)).unwrap();
    let path = dir.path().join("t");
    let batch = |m: &Model, i: u64| {
        let pairs = (0..30).map(|k| ((k * 13 + i * 31) % N, (k * 7 + 3 * i + 1) % N));
        let (a, b): (Vec<u64>, Vec<u64>) = pairs.filter(|(s, d)| !m.out.get(s).is_some_and(|l| l.contains_key(d))).unzip();
        let w = vec![i as f32; a.len()];
        Batch::Add(a, b, w)
    };
    // Runs the trial; returns whether the first merge failed and whether
    // the second did I/O past `cut`.
    let trial = |k: u64, cut: u64| -> (bool, bool, bool) {
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        let disk = SimDisk::new(1, 5);
        disk.load(0, image.clone());
        let s = open_sim(&path, &disk, true).unwrap();
        let mut m = base.clone();
        let b = batch(&m, 1);
        apply_store(&s, &b).unwrap();
        m.apply(&b);
        disk.set_faults(Faults { eio_at: Some(disk.ops() + k), ..Default::default() });
        let failed = s.merge().is_err();
        disk.set_faults(Faults::default());
        let b = batch(&m, 2);
        if apply_store(&s, &b).is_ok() {
            m.apply(&b);
        }
        let at = disk.ops();
        disk.set_faults(Faults { power_cut_at: Some(at + cut), ..Default::default() });
        let refused = s.merge().is_err_and(|e| e.to_string().contains("reopened"));
        let more = disk.ops() > at + cut;
        drop(s);
        recover(&path, &disk, &m, &format!("EIO at merge I/O {k}, power cut at I/O {cut} of the next merge"));
        (failed, more, refused)
    };
    let (mut trials, mut refused) = (0, 0);
    for k in 0..200 {
        let mut any_failed = false;
        for cut in 0..200 {
            let (failed, more, r) = trial(k, cut);
            (trials, refused) = (trials + 1, refused + r as u64);
            any_failed |= failed;
            if !more {
                break;
            }
        }
        if !any_failed {
            eprintln!("failed commits: {trials} trials over {k} merge I/Os, {refused} second merges refused until reopened");
            return;
        }
    }
    panic!("the merge never stops doing I/O");
}

/// EIO on the log file (a real file whose appends and syncs count as the
/// simulated disk's operations, `Faults::log_file`) at each operation of
/// the update workload, pages included. The batch that meets it fails with
/// the EIO; its outcome is unknown (a failed sync leaves the record in the
/// file), so the store then refuses every write until reopened: after a
/// failed fdatasync the kernel may drop the record's pages and report
/// success to the next sync, and a later batch acknowledged over that hole
/// would be lost at replay. After a power cut the store reopens with every
/// acknowledged batch (and perhaps the failed one), verifies and merges on.
#[test]
fn eio_on_the_log_file_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let base_path = dir.path().join("base");
    let base = import_base(&base_path, 5);
    let image = std::fs::read(member_path(&base_path, 0)).unwrap();
    let path = dir.path().join("t");
    // Returns the ops the workload did past the open, and whether a batch
    // failed.
    let trial = |k: Option<u64>| -> (u64, bool) {
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        let disk = SimDisk::new(1, 5);
        disk.load(0, image.clone());
        let s = open_sim(&path, &disk, true).unwrap();
        let at = disk.ops();
        disk.set_faults(Faults { log_file: true, eio_at: k.map(|k| at + k), ..Default::default() });
        let (mut m, mut rng) = (base.clone(), 41u64);
        let mut uncertain: Option<Model> = None;
        for i in 0..STEPS {
            let b = m.next(&mut rng, i);
            match (apply_store(&s, &b), &uncertain) {
                (Ok(()), None) => m.apply(&b),
                (Ok(()), Some(_)) => panic!("EIO at {k:?}: batch {i} ({b:?}) acknowledged after a failed log write"),
                (Err(e), Some(_)) => assert!(e.to_string().contains("reopen"), "EIO at {k:?}: batch {i} after the failure: {e}"),
                (Err(e), None) => {
                    // A page read before the commit (a batch checks the
                    // lists it changes) fails the batch with no effect; the
                    // log's failure leaves it applied or not.
                    let log = e.to_string().contains("wal.log");
                    assert!(is_eio(&e) || log || e.to_string().contains("reopen"), "EIO at {k:?}: batch {i} ({b:?}): {e}");
                    if log {
                        let mut u = m.clone();
                        u.apply(&b);
                        uncertain = Some(u);
                    }
                }
            }
        }
        let ops = disk.ops() - at;
        drop(s);
        disk.crash(CrashMode::LoseUnsynced);
        let s = open_sim(&path, &disk, true).unwrap_or_else(|e| panic!("EIO at {k:?}: reopen: {e}"));
        let want = match &uncertain {
            Some(u) if diff(&s, &m).is_some() => u,
            _ => &m,
        };
        if let Some(d) = diff(&s, want) {
            panic!("EIO at {k:?}: after reopening: {d}");
        }
        s.verify(&mut |_, _| {}).unwrap_or_else(|e| panic!("EIO at {k:?}: verify: {e}"));
        let b = want.next(&mut rng, 1);
        apply_store(&s, &b).unwrap_or_else(|e| panic!("EIO at {k:?}: a batch after reopening: {e}"));
        s.merge().unwrap_or_else(|e| panic!("EIO at {k:?}: merge after reopening: {e}"));
        s.verify(&mut |_, _| {}).unwrap_or_else(|e| panic!("EIO at {k:?}: verify after a merge: {e}"));
        (ops, uncertain.is_some())
    };
    let (total, failed) = trial(None);
    assert!(!failed && total > 100, "the workload should append and sync the log ({total} ops)");
    let mut broke = 0;
    for k in 0..total {
        broke += trial(Some(k)).1 as u64;
    }
    assert!(broke > total / 2, "most faults should hit a batch's log append or sync ({broke} of {total})");
    eprintln!(
        "log faults: the workload does {total} I/Os with the log's; EIO at each: {broke} batches failed and the writer refused the rest until reopened; every acknowledged batch recovered"
    );
}
