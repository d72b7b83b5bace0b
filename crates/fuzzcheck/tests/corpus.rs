//! Replays every input kept in fuzz/corpus/<target>/ (seeds, minimized
//! corpora, and the inputs of crashes once fixed) through the target's
//! body: the fuzzers' findings stay regression tests on stable.

use std::path::Path;

#[test]
fn corpora_replay_without_panics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let mut total = 0;
    for target in solidgraph_fuzzcheck::TARGETS {
        let dir = root.join(target);
        let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).map(|e| e.unwrap().path()).collect();
        files.sort();
        assert!(!files.is_empty(), "{}: no corpus", dir.display());
        for f in &files {
            let data = std::fs::read(f).unwrap();
            solidgraph_fuzzcheck::run(target, &data);
        }
        total += files.len();
        eprintln!("{target}: {} inputs", files.len());
    }
    assert!(total > 0);
}
