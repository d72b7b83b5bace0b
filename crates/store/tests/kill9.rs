//! kill -9: a child process (this test binary, re-run) applies random
//! batches and prints each acknowledged one; the parent kills it at a
//! random moment (half the trials just after a merge begins), reopens, and
//! checks the graph equals the reference after some prefix of the batches
//! that holds every acknowledged one (the child may have gone further than
//! the parent read). Trials: `SG_CRASH_TRIALS` (default 3);
//! `benchmarks/crash.sh --trials N` runs many.

mod common;

use std::io::BufRead;
use std::path::Path;

use common::*;
use solidgraph_store::*;

const CHILD_STEPS: u64 = 100_000;

fn child(path: &Path, seed: u64) {
    let s = Store::open(path, &OpenOptions { writable: true, cache_bytes: 1 << 20, delta_budget: 64 << 10, ..Default::default() }).unwrap();
    let (mut m, mut rng) = (import_model(seed), seed ^ 0x5eed);
    let out = std::io::stdout();
    for i in 0..CHILD_STEPS {
        let b = m.next(&mut rng, i);
        use std::io::Write;
        if matches!(b, Batch::Merge) {
            writeln!(out.lock(), "merging").unwrap();
        }
        apply_store(&s, &b).unwrap();
        m.apply(&b);
        writeln!(out.lock(), "ack {i}").unwrap();
    }
}

/// The base model for `seed` (the parent imported it before starting the child).
fn import_model(seed: u64) -> Model {
    let dir = tempfile::tempdir().unwrap();
    import_base(&dir.path().join("m"), seed)
}

#[test]
fn kill_9_during_updates_and_merges() {
    if let (Ok(p), Ok(seed)) = (std::env::var("SG_CRASH_CHILD"), std::env::var("SG_CRASH_SEED")) {
        child(Path::new(&p), seed.parse().unwrap());
        return;
    }
    let trials: u64 = std::env::var("SG_CRASH_TRIALS").ok().and_then(|t| t.parse().ok()).unwrap_or(3);
    let dir = tempfile::tempdir().unwrap();
    let mut in_merge = 0;
    let mut acked_total = 0;
    for t in 0..trials {
        let seed = 1000 + t;
        let path = dir.path().join(format!("t{t}"));
        let base = import_base(&path, seed);
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["kill_9_during_updates_and_merges", "--exact", "--nocapture", "--test-threads=1"])
            .env("SG_CRASH_CHILD", &path)
            .env("SG_CRASH_SEED", seed.to_string())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut rng = seed * 31 + 7;
        let kill_after = 1 + rnd(&mut rng) % 120;
        // Half the trials kill just after an explicit merge begins.
        let at_merge = rnd(&mut rng).is_multiple_of(2);
        let mut acked = 0u64;
        let mut last = String::new();
        let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        for line in lines {
            let line = line.unwrap();
            if line.starts_with("ack ") {
                acked += 1;
            }
            if line.starts_with("ack ") || line == "merging" {
                last = line;
            }
            if acked >= kill_after && (!at_merge || last == "merging") {
                // Let it run on a little so the kill lands anywhere in a batch.
                std::thread::sleep(std::time::Duration::from_micros(rnd(&mut rng) % 3000));
                break;
            }
        }
        child.kill().unwrap();
        child.wait().unwrap();
        // The child may have printed acks the parent did not read.
        in_merge += (last == "merging") as u64;
        acked_total += acked;
        let s = Store::open(&path, &OpenOptions { writable: true, ..Default::default() }).unwrap_or_else(|e| panic!("trial {t}: reopen: {e}"));
        let (mut m, mut rng) = (base, seed ^ 0x5eed);
        let mut matched = None;
        for i in 0..CHILD_STEPS {
            if diff(&s, &m).is_none() {
                matched = Some(i);
            } else if matched.is_some() || i > acked + 1000 {
                break;
            }
            let b = m.next(&mut rng, i);
            m.apply(&b);
        }
        let k = matched.unwrap_or_else(|| panic!("trial {t}: the recovered graph matches no prefix of the batches"));
        assert!(k >= acked, "trial {t}: {acked} batches were acknowledged but only {k} survived");
        s.verify(&mut |_, _| {}).unwrap_or_else(|e| panic!("trial {t}: verify: {e}"));
        std::fs::remove_dir_all(&path).unwrap();
    }
    eprintln!("kill -9: {trials} trials, {acked_total} acknowledged batches read back, {in_merge} kills after a merge began");
}
