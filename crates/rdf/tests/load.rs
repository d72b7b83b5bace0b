//! The bulk load's term interning within a memory budget: a load whose
//! map is frozen part way (terms spilled to partition files) gives the
//! same dictionary, byte for byte, and the same quads as one that keeps
//! every term in memory, and leaves no temporary files.

use std::collections::BTreeSet;
use std::path::Path;

use solidgraph_rdf::{LoadOptions, OpenOptions, QueryOptions, QueryOutput, RdfStore};

/// A deterministic N-Quads document: IRIs, plain, language and typed
/// literals, a few named graphs, repeats near and far apart. No blank
/// nodes: the parser renames them at random, so two loads differ.
fn document(n: usize) -> String {
    let mut x = 12345u64;
    let mut next = move |m: u64| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) % m
    };
    let mut out = String::new();
    for i in 0..n {
        let s = format!("<http://ex/s{}>", if next(3) == 0 { next(20) } else { i as u64 / 3 });
        let p = format!("<http://ex/p{}>", next(7));
        let o = match next(6) {
            0 => format!("\"text {}\"", next(400)),
            // Unique literals, so that a 16 MiB budget's map fills.
            4 => format!("\"a long unique literal that fills the map, number {i}\""),
            1 => format!("\"t{}\"@en", next(30)),
            2 => format!("\"{}\"^^<http://www.w3.org/2001/XMLSchema#integer>", next(1000)),
            _ => format!("<http://ex/o{}>", next(2000)),
        };
        let g = match next(4) {
            0 => format!(" <http://ex/g{}>", next(3)),
            _ => String::new(),
        };
        out.push_str(&format!("{s} {p} {o}{g} .\n"));
        if next(10) == 0 {
            out.push_str(&format!("{s} {p} {o}{g} .\n")); // a duplicate quad
        }
    }
    out
}

fn all_quads(store: &RdfStore) -> BTreeSet<String> {
    let q = "SELECT ?s ?p ?o ?g WHERE { { ?s ?p ?o } UNION { GRAPH ?g { ?s ?p ?o } } }";
    let QueryOutput::Solutions { rows, .. } = store.query(q, &QueryOptions::default()).unwrap() else { panic!("not a SELECT") };
    rows.map(|r| format!("{:?}", r.unwrap())).collect()
}

fn load(dir: &Path, file: &Path, name: &str, budget: u64) -> (Vec<u8>, BTreeSet<String>, u64) {
    let path = dir.join(name);
    let o = LoadOptions { memory_budget: budget, ..LoadOptions::default() };
    let report = RdfStore::bulk_load(&path, &[file.to_path_buf()], &o).unwrap();
    let leftovers: Vec<String> =
        std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.ends_with(".tmp")).collect();
    assert!(leftovers.is_empty(), "budget {budget}: temporary files left: {leftovers:?}");
    let dict = std::fs::read(path.join("dict.1")).unwrap();
    let store = RdfStore::open(&path, &OpenOptions::default()).unwrap();
    (dict, all_quads(&store), report.terms)
}

#[test]
fn a_spilled_interning_equals_the_in_memory_one() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("d.nq");
    let text = document(200_000);
    std::fs::write(&file, &text).unwrap();
    let (dict, quads, terms) = load(tmp.path(), &file, "mem", 1 << 30);
    let distinct: BTreeSet<&str> = text.lines().collect();
    assert_eq!(quads.len(), distinct.len(), "one row per distinct quad");
    // 16 MiB, the least the page store's import takes: the map (6 MiB)
    // freezes part way (the unit tests in intern.rs freeze it at once).
    let budget = 16 << 20;
    let (d, q, t) = load(tmp.path(), &file, "b16m", budget);
    assert_eq!(t, terms, "terms");
    assert!(d == dict, "the dictionary files differ");
    assert_eq!(q, quads, "quads");
}
