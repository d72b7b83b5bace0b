//! The batched property-path operator against spareval's own evaluation
//! (what pyoxigraph runs): random graphs, every path form, each end bound
//! or open, named graphs, for-loop joins; as multisets, on pages, with
//! pending updates over pages, and after compaction.

use oxrdf::{Dataset, GraphName, NamedNode, Quad};
use solidgraph_rdf::{LoadOptions, OpenOptions, QueryOptions, QueryOutput, RdfStore};
use spareval::{QueryEvaluator, QueryResults};
use spargebra::SparqlParser;

const EX: &str = "http://ex/";

const PATHS: &[&str] = &[
    "ex:p+",
    "ex:p*",
    "ex:p?",
    "(ex:p|ex:q)",
    "(ex:p|^ex:q)+",
    "(ex:p/ex:q)*",
    "^ex:p*",
    "^(ex:p|ex:r)",
    "(ex:p/^ex:q)+",
    "(ex:p|ex:q)/ex:r?",
    "(!ex:p)+",
    "(!(ex:q|^ex:r))*",
    "ex:p+/ex:q*",
    "(ex:p?/ex:r)+",
    "ex:missing*",
    // Sequences of plain predicates: the parser makes chains of triple
    // patterns of them, which the rewrite turns back into paths when an
    // end is a constant (one row per middle node, as the BGP gives).
    "ex:p/ex:q",
    "ex:p/^ex:q/ex:r",
    "^ex:r/ex:p/ex:p",
];

/// Chains of triple patterns linked by blank nodes, and shapes that are
/// not chains (a blank node used three times, a variable middle).
const CHAINS: &[&str] = &[
    "SELECT ?y WHERE { ex:n0 ex:p _:a . _:a ex:q _:b . ?y ex:r _:b }",
    "SELECT ?y WHERE { ex:n0 ex:p [ ex:q ?y ] }",
    "SELECT ?x ?y WHERE { ?y ex:r ?x . ex:n0 ex:p/ex:q ?y }",
    "SELECT ?x WHERE { ?x ex:p/ex:q/ex:q ex:n2 . ?x ex:r ?z }",
    "SELECT ?y ?z WHERE { ex:n0 ex:p _:a . _:a ex:q ?y . _:a ex:r ?z }",
    "SELECT ?m ?y WHERE { ex:n0 ex:p ?m . ?m ex:q ?y }",
    "SELECT ?y WHERE { ex:n1 ex:p _:a . _:a ex:p _:a . _:a ex:q ?y }",
    "SELECT * WHERE { ex:n0 ex:p/ex:q ex:n1 }",
    "SELECT ?g ?y WHERE { GRAPH ?g { ex:n1 ^ex:p/ex:q ?y } }",
    "SELECT (COUNT(*) AS ?c) WHERE { ex:n0 ex:p/ex:p/ex:p ?y OPTIONAL { ?y ex:q/ex:r ?z } }",
    "SELECT ?y WHERE { \"lit\" ^ex:p/ex:q ?y }",
];

const PATTERNS: &[&str] = &[
    "SELECT ?x ?y WHERE { ?x PATH ?y }",
    "SELECT ?y WHERE { ex:n0 PATH ?y }",
    "SELECT ?x WHERE { ?x PATH ex:n1 }",
    "SELECT * WHERE { ex:n0 PATH ex:n3 }",
    "SELECT * WHERE { ex:n2 PATH ex:n2 }",
    "SELECT ?x WHERE { ?x PATH ?x }",
    "SELECT ?y WHERE { ex:absent PATH ?y }",
    "SELECT ?g ?x ?y WHERE { GRAPH ?g { ?x PATH ?y } }",
    "SELECT ?g ?y WHERE { GRAPH ?g { ex:n1 PATH ?y } }",
    "SELECT ?x WHERE { GRAPH ex:g1 { ?x PATH ex:n4 } }",
    "SELECT ?x ?y WHERE { ?x ex:r ?m . ?m PATH ?y }",
    "SELECT ?m ?y WHERE { VALUES ?m { ex:n0 ex:n5 ex:absent } ?m PATH ?y }",
    "SELECT (COUNT(*) AS ?c) WHERE { ?x PATH ?y . ?y PATH ?z }",
];

/// A deterministic random graph: `n` nodes, 3 predicates, a default graph
/// and a named graph.
fn graph(seed: u64, n: u64, edges: usize) -> Vec<Quad> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut next = move |m: u64| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) % m
    };
    let node = |i: u64| NamedNode::new_unchecked(format!("{EX}n{i}"));
    let preds = ["p", "q", "r"].map(|p| NamedNode::new_unchecked(format!("{EX}{p}")));
    let g1 = GraphName::NamedNode(NamedNode::new_unchecked(format!("{EX}g1")));
    let mut quads: Vec<Quad> = (0..edges)
        .map(|_| {
            let (s, p, o) = (next(n), next(3), next(n));
            let g = if next(4) == 0 { g1.clone() } else { GraphName::DefaultGraph };
            Quad::new(node(s), preds[p as usize].clone(), node(o), g)
        })
        .collect();
    quads.sort_by_key(|q| q.to_string());
    quads.dedup();
    quads
}

fn rows(store: &RdfStore, q: &str) -> Vec<String> {
    let QueryOutput::Solutions { rows, .. } = store.query(q, &QueryOptions::default()).unwrap() else { panic!("not a SELECT") };
    let mut v: Vec<String> = rows.map(|r| format!("{:?}", r.unwrap())).collect();
    v.sort();
    v
}

fn reference(data: &Dataset, q: &str) -> Vec<String> {
    let query = SparqlParser::new().parse_query(q).unwrap();
    let QueryResults::Solutions(sols) = QueryEvaluator::new().prepare(&query).execute(data).unwrap() else { panic!("not a SELECT") };
    let mut v: Vec<String> = sols.map(|s| format!("{:?}", s.unwrap().values().to_vec())).collect();
    v.sort();
    v
}

fn compare(store: &RdfStore, quads: &[Quad], stage: &str) {
    let data: Dataset = quads.iter().cloned().collect();
    for path in PATHS {
        for pattern in PATTERNS {
            let q = format!("PREFIX ex: <{EX}> {}", pattern.replace("PATH", path));
            assert_eq!(rows(store, &q), reference(&data, &q), "{stage}: {q}");
        }
    }
    for pattern in CHAINS {
        let q = format!("PREFIX ex: <{EX}> {pattern}");
        assert_eq!(rows(store, &q), reference(&data, &q), "{stage}: {q}");
    }
}

#[test]
fn paths_equal_spareval_on_pages_updates_and_after_compaction() {
    for seed in 0..4u64 {
        let tmp = tempfile::tempdir().unwrap();
        let mut quads = graph(seed, 10, 28);
        let file = tmp.path().join("d.nq");
        std::fs::write(&file, quads.iter().map(|q| format!("{q} .\n")).collect::<String>()).unwrap();
        let path = tmp.path().join("s");
        RdfStore::bulk_load(&path, &[file], &LoadOptions::default()).unwrap();
        let store = RdfStore::open(&path, &OpenOptions { writable: true, ..Default::default() }).unwrap();
        compare(&store, &quads, &format!("seed {seed}, pages"));

        // Pending updates over the pages: some quads removed, others added.
        let extra = graph(seed + 100, 12, 10);
        let gone: Vec<Quad> = quads.iter().step_by(3).cloned().collect();
        store.remove(&gone).unwrap();
        store.insert(&extra).unwrap();
        quads.retain(|q| !gone.contains(q));
        quads.extend(extra);
        quads.sort_by_key(|q| q.to_string());
        quads.dedup();
        compare(&store, &quads, &format!("seed {seed}, pages and pending updates"));

        store.compact().unwrap();
        compare(&store, &quads, &format!("seed {seed}, compacted"));
    }
}
