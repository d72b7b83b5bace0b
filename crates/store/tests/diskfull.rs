//! Disk full: a store on a 4 MiB tmpfs (mounted and unmounted by the test;
//! skipped, saying why, where mounting is not permitted). An import larger
//! than the filesystem fails with ENOSPC and leaves nothing; on a full
//! filesystem, updates, tensor writes and merges fail with ENOSPC, no
//! acknowledged batch is lost, the store opens and verifies, and once space
//! is freed it takes updates and merges again.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use solidgraph_store::*;

struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(size: &str) -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?.keep();
        let out = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(&dir).output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            let _ = std::fs::remove_dir(&dir);
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn is_enospc(e: &StoreError) -> bool {
    let s = e.to_string();
    s.contains("No space left") || s.contains("no space left")
}

/// Fills the filesystem with a file of zeros until a write fails.
fn fill(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0u8; 4096];
    while f.write_all(&chunk).is_ok() {}
    let _ = f.sync_all();
}

fn edges(n: u64, m: usize, seed: u64) -> (Vec<u64>, Vec<u64>) {
    let mut x = seed;
    let mut r = || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) % n
    };
    (0..m).map(|_| (r(), r())).unzip()
}

fn open(dir: &Path, writable: bool) -> Result<Store> {
    Store::open(dir, &OpenOptions { writable, cache_bytes: 1 << 20, delta_budget: 0, ..Default::default() })
}

#[test]
fn enospc_on_import_updates_tensor_writes_and_merge() {
    let fs = match Tmpfs::mount("4m") {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("skipped: cannot mount a tmpfs ({why}); needs root");
            return;
        }
    };
    // An import larger than the filesystem: ENOSPC, nothing left behind.
    let (a, b) = edges(400_000, 600_000, 1);
    let big = fs.0.join("big.sg");
    let e = import(&big, &[EdgeInput::Memory { src: a, dst: b, weights: None, labels: None }], &[], &ImportOptions::default(), &|_, _, _| {}).unwrap_err();
    assert!(is_enospc(&e), "import: {e}");
    assert_eq!(std::fs::read_dir(&fs.0).unwrap().count(), 0, "a failed import leaves nothing");

    // A small store, then the filesystem filled up behind it.
    let n = 2000;
    let (a, b) = edges(n, 8000, 2);
    let dir = fs.0.join("g.sg");
    let x = TensorInput { name: "x".into(), data: TensorData::Memory { dtype: DType::F32, rows: n, dim: 8, bytes: vec![0u8; n as usize * 32] } };
    let o = ImportOptions { in_edges: true, num_nodes: Some(n), dedup: true, ..Default::default() };
    import(&dir, &[EdgeInput::Memory { src: a.clone(), dst: b.clone(), weights: None, labels: None }], &[x], &o, &|_, _, _| {}).unwrap();
    let mut model: BTreeSet<(u64, u64)> = a.into_iter().zip(b).collect();
    // Pending updates, logged while there is room, for the merge to write.
    let s = open(&dir, true).unwrap();
    for round in 0..20 {
        let (src, dst) = edges(n, 200, 1000 + round);
        s.add_edges(&src, &dst, None, None, true).unwrap();
        model.extend(src.into_iter().zip(dst));
    }
    let filler = fs.0.join("filler");
    fill(&filler);
    let (mut errors, mut merged) = ([0u32; 3], 0);
    for round in 0..400u64 {
        let (src, dst) = edges(n, 50, 5 + 2 * round);
        match s.add_edges(&src, &dst, None, None, true) {
            Ok(()) => model.extend(src.iter().copied().zip(dst.iter().copied())),
            Err(e) => {
                assert!(is_enospc(&e), "add_edges: {e}");
                errors[0] += 1;
            }
        }
        let rows: Vec<u8> = (0..32).map(|i| (round + i) as u8).collect();
        if let Err(e) = s.update_tensor("x", &[round % n], &rows, true) {
            assert!(is_enospc(&e), "update_tensor: {e}");
            errors[1] += 1;
        }
        if round % 50 == 0 {
            // A merge may still fit in the member's free pages; when it
            // does not, the error is ENOSPC and the graph stays whole.
            match s.merge() {
                Ok(_) => {
                    // It emptied the log: fill the room that freed.
                    merged += 1;
                    fill(&fs.0.join(format!("filler-{round}")));
                }
                Err(e) => {
                    assert!(is_enospc(&e), "merge: {e}");
                    errors[2] += 1;
                }
            }
        }
    }
    assert!(errors[0] > 0 && errors[1] > 0, "the filesystem filled up: {errors:?}");
    drop(s);
    let check = |s: &Store, model: &BTreeSet<(u64, u64)>, when: &str| {
        s.verify(&mut |_, _| {}).unwrap_or_else(|e| panic!("{when}: verify: {e}"));
        let ids: Vec<u64> = (0..n).collect();
        let c = s.neighbors(&ids, Direction::Out, false, false).unwrap();
        let got: BTreeSet<(u64, u64)> =
            (0..n as usize).flat_map(|v| c.indices[c.indptr[v] as usize..c.indptr[v + 1] as usize].iter().map(move |&d| (v as u64, d))).collect();
        // Exactly the acknowledged batches: none lost, none of the failed
        // ones half there.
        assert!(model.is_subset(&got), "{when}: {} acknowledged edges lost", model.difference(&got).count());
        assert!(got.is_subset(model), "{when}: {} edges of failed batches present", got.difference(model).count());
    };
    check(&open(&dir, false).unwrap(), &model, "full, reopened");

    // Space freed: updates and merges work again.
    for f in std::fs::read_dir(&fs.0).unwrap() {
        let f = f.unwrap().path();
        if f.file_name().unwrap().to_string_lossy().starts_with("filler") {
            std::fs::remove_file(f).unwrap();
        }
    }
    let s = open(&dir, true).unwrap();
    check(&s, &model, "space freed, reopened");
    s.add_edges(&[1, 2], &[3, 4], None, None, true).unwrap();
    model.extend([(1, 3), (2, 4)]);
    s.update_tensor("x", &[7], &[9u8; 32], true).unwrap();
    s.merge().unwrap();
    check(&s, &model, "after a merge with space");
    drop(s);
    check(&open(&dir, false).unwrap(), &model, "space freed, merged, reopened");
    eprintln!(
        "ENOSPC: import refused, then {} update, {} tensor and {} merge failures ({merged} merges fit) on a full 4 MiB tmpfs",
        errors[0], errors[1], errors[2]
    );
}
