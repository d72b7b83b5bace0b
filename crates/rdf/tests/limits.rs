//! A query's timeout and result limit end it cleanly with their errors; a
//! writer killed with SIGKILL in the middle of updates loses no update it
//! acknowledged, and the store opens and answers afterwards; a bulk load
//! killed with SIGKILL leaves no store, and the next load works.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use solidgraph_rdf::{LoadOptions, OpenOptions, QueryOptions, QueryOutput, RdfError, RdfStore};

/// A store of `n` triples `<s{i}> <p> <o{i}>`.
fn small_store(dir: &Path, n: usize) -> PathBuf {
    let data = dir.join("d.nt");
    let mut f = std::fs::File::create(&data).unwrap();
    for i in 0..n {
        writeln!(f, "<http://ex/s{i}> <http://ex/p> <http://ex/o{i}> .").unwrap();
    }
    drop(f);
    let path = dir.join("s");
    RdfStore::bulk_load(&path, &[data], &LoadOptions::default()).unwrap();
    path
}

/// The first error the query's rows yield (or the query's own error), with how long it took.
fn first_error(store: &RdfStore, q: &str, o: &QueryOptions) -> (Option<RdfError>, Duration) {
    let t = Instant::now();
    let err = match store.query(q, o) {
        Err(e) => Some(e),
        Ok(QueryOutput::Solutions { mut rows, .. }) => rows.find_map(|r| r.err()),
        Ok(QueryOutput::Triples(mut rows)) => rows.find_map(|r| r.err()),
        Ok(QueryOutput::Boolean(_)) => None,
    };
    (err, t.elapsed())
}

#[test]
fn timeout_cancels_a_long_query() {
    let tmp = tempfile::tempdir().unwrap();
    let store = RdfStore::open(&small_store(tmp.path(), 400), &OpenOptions::default()).unwrap();
    // 400^3 = 64 million rows to count: far longer than the timeout.
    let q = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i }";
    let o = QueryOptions { timeout: Some(Duration::from_millis(200)), ..Default::default() };
    let (err, took) = first_error(&store, q, &o);
    assert!(matches!(err, Some(RdfError::Timeout(_))), "{err:?}");
    assert!(took < Duration::from_secs(60), "cancelled only after {took:?}");
    // The store still answers, and a quick query under the same timeout is not cancelled.
    let (err, _) = first_error(&store, "SELECT * WHERE { <http://ex/s1> ?p ?o }", &o);
    assert!(err.is_none(), "{err:?}");
}

#[test]
fn deadline_stops_a_scan_of_every_list_between_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let n = 200_000;
    let store = RdfStore::open(&small_store(tmp.path(), n), &OpenOptions::default()).unwrap();
    // One list per term and id 0: about a hundred batches.
    let all = store.info().unwrap().terms + 1;
    let o = QueryOptions { timeout: Some(Duration::from_millis(1)), ..Default::default() };
    for q in ["SELECT * WHERE { ?s ?p ?o }", "SELECT ?s WHERE { ?s <http://ex/p> ?o }", "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"] {
        let before = store.scanned_lists().unwrap();
        let (err, _) = first_error(&store, q, &o);
        assert!(matches!(err, Some(RdfError::Timeout(_))), "{q}: {err:?}");
        let read = store.scanned_lists().unwrap() - before;
        assert!(read < all, "{q}: the scan read {read} of {all} lists, past its deadline");
    }
    // With no deadline the same scan reads every list once.
    let before = store.scanned_lists().unwrap();
    let QueryOutput::Solutions { rows, .. } = store.query("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }", &QueryOptions::default()).unwrap() else {
        panic!("SELECT")
    };
    let row = rows.into_iter().next().unwrap().unwrap();
    assert_eq!(row[0].as_ref().unwrap().to_string(), format!("\"{n}\"^^<http://www.w3.org/2001/XMLSchema#integer>"));
    assert_eq!(store.scanned_lists().unwrap() - before, all);
}

#[test]
fn result_limit_ends_a_large_result() {
    let tmp = tempfile::tempdir().unwrap();
    let store = RdfStore::open(&small_store(tmp.path(), 100), &OpenOptions::default()).unwrap();
    let o = QueryOptions { result_limit: Some(10), ..Default::default() };
    let (err, _) = first_error(&store, "SELECT * WHERE { ?s ?p ?o }", &o);
    assert!(matches!(err, Some(RdfError::ResultLimit(10))), "{err:?}");
    let (err, _) = first_error(&store, "CONSTRUCT { ?o ?p ?s } WHERE { ?s ?p ?o }", &o);
    assert!(matches!(err, Some(RdfError::ResultLimit(10))), "{err:?}");
    // At the limit is fine.
    let QueryOutput::Solutions { rows, .. } = store.query("SELECT * WHERE { ?s ?p ?o } LIMIT 10", &o).unwrap() else { panic!("SELECT") };
    assert_eq!(rows.filter(|r| r.is_ok()).count(), 10);
}

const CHILD: &str = "SOLIDGRAPH_RDF_CRASH_CHILD";

/// Run as a child of `kill_during_updates`: updates the store until killed,
/// printing each update's number once it returned (acknowledged).
#[test]
fn crash_child() {
    let Ok(path) = std::env::var(CHILD) else { return };
    let store = RdfStore::open(Path::new(&path), &OpenOptions { writable: true, ..Default::default() }).unwrap();
    let out = std::io::stdout();
    for i in 0u64.. {
        // Each update deletes one base triple and inserts a new one with a new literal.
        let u = format!(
            "DELETE DATA {{ <http://ex/s{d}> <http://ex/p> <http://ex/o{d}> }} ; INSERT DATA {{ <http://ex/n{i}> <http://ex/q> \"v{i}\" }}",
            d = i % 200
        );
        store.update(&u, &QueryOptions::default()).unwrap();
        writeln!(out.lock(), "{i}").unwrap();
        if i % 50 == 49 {
            store.compact().unwrap();
        }
    }
}

#[test]
fn kill_during_updates_loses_no_acknowledged_update() {
    let tmp = tempfile::tempdir().unwrap();
    let path = small_store(tmp.path(), 200);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--nocapture", "--test-threads", "1"])
        .env(CHILD, &path)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut acked = None;
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        if let Ok(i) = line.unwrap().trim().parse::<u64>() {
            acked = Some(i);
            // Past a compaction or two, at a point unrelated to them.
            if i >= 130 {
                break;
            }
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // The child kept updating until the kill landed: what it acknowledged in
    // the meantime is still in the pipe.
    for line in lines.map_while(Result::ok) {
        // A line the kill cut short reads as a smaller number: keep the largest.
        if let Ok(i) = line.trim().parse::<u64>() {
            acked = acked.max(Some(i));
        }
    }
    let acked = acked.expect("the child acknowledged updates");
    let store = RdfStore::open(&path, &OpenOptions { writable: true, ..Default::default() }).unwrap();
    let QueryOutput::Solutions { rows, .. } = store.query("SELECT ?v WHERE { ?n <http://ex/q> ?v }", &QueryOptions::default()).unwrap() else {
        panic!("SELECT")
    };
    let mut got: Vec<u64> = rows.map(|r| r.unwrap()[0].as_ref().unwrap().to_string().trim_matches('"')[1..].parse().unwrap()).collect();
    got.sort_unstable();
    // Every acknowledged update is there; at most the one in flight besides.
    assert!(got.len() as u64 == acked + 1 || got.len() as u64 == acked + 2, "acked {acked}, found {}", got.len());
    assert_eq!(got, (0..got.len() as u64).collect::<Vec<_>>());
    let QueryOutput::Solutions { rows, .. } = store.query("SELECT ?s WHERE { ?s <http://ex/p> ?o }", &QueryOptions::default()).unwrap() else {
        panic!("SELECT")
    };
    let left = rows.count() as u64;
    assert_eq!(left, 200 - (got.len() as u64).min(200));
    // It takes updates and compacts again.
    store.update("INSERT DATA { <http://ex/x> <http://ex/q> \"after\" }", &QueryOptions::default()).unwrap();
    store.compact().unwrap();
}

const LOAD_CHILD: &str = "SOLIDGRAPH_RDF_LOAD_CHILD";

/// Run as a child of `kill_during_bulk_load`: bulk-loads `<dir>/d.nt` into
/// `<dir>/s` with a small memory budget (several sorted runs).
#[test]
fn load_child() {
    let Ok(dir) = std::env::var(LOAD_CHILD) else { return };
    let dir = Path::new(&dir);
    let o = LoadOptions { memory_budget: 16 << 20, ..Default::default() };
    RdfStore::bulk_load(&dir.join("s"), &[dir.join("d.nt")], &o).unwrap();
}

#[test]
fn kill_during_bulk_load_leaves_no_store_and_a_later_load_works() {
    let tmp = tempfile::tempdir().unwrap();
    let n = 400_000u64;
    let mut text = String::with_capacity(n as usize * 60);
    for i in 0..n {
        // Every tenth triple twice: the de-duplication has work to do.
        let line = format!("<http://ex/s{}> <http://ex/p{}> <http://ex/o{}> .\n", i % 50_000, i % 7, i / 3);
        text.push_str(&line);
        if i % 10 == 0 {
            text.push_str(&line);
        }
    }
    std::fs::write(tmp.path().join("d.nt"), text).unwrap();
    let store_path = tmp.path().join("s");
    let partials = || std::fs::read_dir(tmp.path()).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().starts_with("s.partial-")).count();
    let mut killed_mid_load = 0;
    for delay_ms in [0u64, 40, 150, 400] {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "load_child", "--nocapture", "--test-threads", "1"])
            .env(LOAD_CHILD, tmp.path())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        // Wait until the load has begun (its partial directory exists), then a while.
        let t0 = Instant::now();
        while partials() == 0 && child.try_wait().unwrap().is_none() && t0.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(2));
        }
        std::thread::sleep(Duration::from_millis(delay_ms));
        let finished = child.try_wait().unwrap().is_some();
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        if finished || store_path.exists() {
            // The load won the race: the store is whole.
            let s = RdfStore::open(&store_path, &OpenOptions::default()).unwrap();
            assert_eq!(s.info().unwrap().quads, n);
            drop(s);
            std::fs::remove_dir_all(&store_path).unwrap();
            continue;
        }
        killed_mid_load += 1;
        assert!(RdfStore::open(&store_path, &OpenOptions::default()).is_err(), "no store after a killed load");
    }
    assert!(killed_mid_load > 0, "no kill landed during a load");
    assert!(partials() > 0, "a killed load leaves its partial directory");
    // A later load removes the dead loads' partial directories and builds the store.
    let r = RdfStore::bulk_load(&store_path, &[tmp.path().join("d.nt")], &LoadOptions { memory_budget: 16 << 20, ..Default::default() }).unwrap();
    assert_eq!(r.quads, n + n / 10);
    assert_eq!(partials(), 0);
    let s = RdfStore::open(&store_path, &OpenOptions::default()).unwrap();
    assert_eq!(s.info().unwrap().quads, n);
    let QueryOutput::Solutions { rows, .. } = s.query("SELECT (COUNT(*) AS ?c) WHERE { <http://ex/s7> ?p ?o }", &QueryOptions::default()).unwrap() else {
        panic!("SELECT")
    };
    let c = rows.map(|r| r.unwrap()[0].clone().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(c, vec![format!("\"{}\"^^<http://www.w3.org/2001/XMLSchema#integer>", n / 50_000)]);
}
