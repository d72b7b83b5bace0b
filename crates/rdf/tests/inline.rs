//! Inlined values (canonical integers, booleans, dates, dateTimes in the
//! query-time id): queries give spareval's own answers (what pyoxigraph
//! runs) on data mixing them with non-canonical forms and other typed
//! literals, from pages, with pending updates and after compaction; and a
//! FILTER or ORDER BY on inlined values reads no term from the dictionary.

use std::path::Path;

use oxrdf::{Dataset, Quad};
use solidgraph_rdf::{LoadOptions, OpenOptions, QueryOptions, QueryOutput, RdfStore};
use spareval::{QueryEvaluator, QueryResults};
use spargebra::SparqlParser;

const DATA: &str = r#"@prefix ex: <http://ex/> . @prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
ex:a ex:age 30 ; ex:ok true ; ex:born "1994-03-01"^^xsd:date ; ex:seen "2024-05-01T10:00:00Z"^^xsd:dateTime ; ex:n 7 .
ex:b ex:age "030"^^xsd:integer ; ex:ok "1"^^xsd:boolean ; ex:bornTz "1994-03-01Z"^^xsd:date ; ex:seen "2024-05-01T11:00:00+01:00"^^xsd:dateTime ; ex:n 7.0 .
ex:c ex:age 41 ; ex:ok false ; ex:born "2001-12-31"^^xsd:date ; ex:seen "2024-05-01T10:00:00.250Z"^^xsd:dateTime ; ex:n "7"^^xsd:int .
ex:d ex:age -5 ; ex:ok "false"^^xsd:boolean ; ex:bornTz "1994-03-01+00:00"^^xsd:date ; ex:seen "2024-05-01T10:00:00.5Z"^^xsd:dateTime ;
  ex:seenLocal "2024-05-01T10:00:00.5"^^xsd:dateTime ; ex:n "7" .
ex:e ex:age 123456789012345678901234 ; ex:ok "true" ; ex:born "10000-01-01"^^xsd:date ; ex:n 7e0 .
ex:f ex:age "+41"^^xsd:integer ; ex:ok "TRUE"^^xsd:boolean ; ex:born "x"^^xsd:date ; ex:n "seven"^^xsd:integer .
ex:g ex:age 288230376151711743 ; ex:big -288230376151711744 ; ex:huge 288230376151711744 .
ex:h ex:age 30 ; ex:born "1994-03-01"^^xsd:date .
"#;

const PREFIXES: &str = "@prefix ex: <http://ex/> . @prefix xsd: <http://www.w3.org/2001/XMLSchema#> .\n";
/// Inserted by an update after the load.
const INSERTED: &str = r#"ex:i ex:age 30 , 55 ; ex:ok true ; ex:born "2030-01-01"^^xsd:date . ex:j ex:age "055"^^xsd:integer . ex:a ex:age 31 ."#;

/// (query, whether its answer is in order)
const QUERIES: &[(&str, bool)] = &[
    ("SELECT ?s ?v WHERE { ?s ex:age ?v }", false),
    ("SELECT ?s ?v WHERE { ?s ex:age ?v FILTER(?v > 29) }", false),
    ("SELECT ?s ?v WHERE { ?s ex:age ?v FILTER(?v = 30) }", false),
    ("SELECT ?s WHERE { ?s ex:age 30 }", false),
    ("SELECT ?s WHERE { ?s ex:age \"030\"^^xsd:integer }", false),
    ("SELECT ?s WHERE { ?s ex:age 55 }", false),
    ("SELECT ?s WHERE { ?s ex:age 99 }", false),
    ("SELECT ?s ?t WHERE { ?s ex:age ?v . ?t ex:age ?w FILTER(sameTerm(?v, ?w) && ?s != ?t) }", false),
    ("SELECT ?s ?t WHERE { ?s ex:age ?v . ?t ex:age ?v FILTER(?s != ?t) }", false),
    ("SELECT ?v (COUNT(*) AS ?c) WHERE { ?s ex:age ?v } GROUP BY ?v", false),
    ("SELECT ?s ?v WHERE { ?s ex:age ?v } ORDER BY ?v ?s", true),
    ("SELECT ?s ?v WHERE { ?s ex:age ?v } ORDER BY DESC(?v) ?s", true),
    ("SELECT ?s ?v WHERE { ?s ex:ok ?v FILTER(?v) }", false),
    ("SELECT ?s WHERE { ?s ex:ok true }", false),
    ("SELECT ?s ?v WHERE { ?s ex:born ?v FILTER(?v < \"2000-01-01\"^^xsd:date) }", false),
    ("SELECT ?s WHERE { ?s ex:born \"1994-03-01\"^^xsd:date }", false),
    ("SELECT ?s ?v WHERE { ?s ex:bornTz|ex:born ?v FILTER(?v = \"1994-03-01Z\"^^xsd:date) }", false),
    ("SELECT ?s WHERE { ?s ex:bornTz \"1994-03-01Z\"^^xsd:date }", false),
    ("SELECT ?s ?v WHERE { ?s ex:seenLocal|ex:seen ?v FILTER(?v > \"2024-05-01T09:00:00\"^^xsd:dateTime) }", false),
    ("SELECT ?s ?v WHERE { ?s ex:born ?v } ORDER BY ?v ?s", true),
    ("SELECT ?s ?v WHERE { ?s ex:seen ?v FILTER(?v >= \"2024-05-01T10:00:00Z\"^^xsd:dateTime) }", false),
    ("SELECT ?s ?v WHERE { ?s ex:seen ?v } ORDER BY ?v ?s", true),
    ("SELECT ?s ?v WHERE { ?s ex:n ?v FILTER(?v = 7) }", false),
    ("SELECT ?s ?v WHERE { ?s ex:n ?v FILTER(sameTerm(?v, 7)) }", false),
    ("SELECT ?s ?x WHERE { ?s ex:age ?v BIND(?v + 1 AS ?x) ?t ex:age ?x }", false),
    ("SELECT ?s ?w WHERE { ?s ex:age ?v BIND(?v * 2 AS ?w) FILTER(?w > 60) }", false),
    ("SELECT ?v WHERE { ?s ?p ?v FILTER(isLiteral(?v) && datatype(?v) = xsd:integer) }", false),
    ("SELECT ?s ?v WHERE { ?s ex:big|ex:huge ?v }", false),
    ("SELECT ?s WHERE { ?s ex:age ?v FILTER(STR(?v) = \"30\") }", false),
    ("SELECT ?o WHERE { ex:a ex:age/^ex:age ?o }", false),
    ("SELECT ?s WHERE { ?s ex:age+ 30 }", false),
    ("SELECT ?s WHERE { VALUES ?v { 30 \"030\"^^xsd:integer 41 } ?s ex:age ?v }", false),
];

fn rows(out: QueryOutput) -> Vec<String> {
    let QueryOutput::Solutions { rows, .. } = out else { panic!("not a SELECT") };
    rows.map(|r| format!("{:?}", r.unwrap())).collect()
}

fn reference(data: &Dataset, q: &str) -> Vec<String> {
    let query = SparqlParser::new().parse_query(q).unwrap();
    let QueryResults::Solutions(sols) = QueryEvaluator::new().prepare(&query).execute(data).unwrap() else { panic!("not a SELECT") };
    sols.map(|s| format!("{:?}", s.unwrap().values().to_vec())).collect()
}

fn compare(store: &RdfStore, data: &Dataset, stage: &str) {
    for &(q, ordered) in QUERIES {
        let q = format!("PREFIX ex: <http://ex/> PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> {q}");
        let (mut got, mut want) = (rows(store.query(&q, &QueryOptions::default()).unwrap()), reference(data, &q));
        if !ordered {
            got.sort();
            want.sort();
        }
        assert_eq!(got, want, "{stage}: {q}");
    }
}

fn parse(text: &str) -> Vec<Quad> {
    oxrdfio::RdfParser::from_format(oxrdfio::RdfFormat::Turtle).for_slice(text.as_bytes()).map(Result::unwrap).collect()
}

fn open(path: &Path) -> RdfStore {
    RdfStore::open(path, &OpenOptions { writable: true, ..Default::default() }).unwrap()
}

#[test]
fn inlined_values_answer_as_spareval_on_pages_updates_and_after_compaction() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("d.ttl");
    std::fs::write(&file, DATA).unwrap();
    let path = tmp.path().join("s");
    RdfStore::bulk_load(&path, &[file], &LoadOptions::default()).unwrap();
    let mut data: Dataset = parse(DATA).into_iter().collect();
    let store = open(&path);
    compare(&store, &data, "loaded");
    let update = format!("PREFIX ex: <http://ex/> PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> INSERT DATA {{ {INSERTED} }}");
    store.update(&update, &QueryOptions::default()).unwrap();
    data.extend(parse(&format!("{PREFIXES}{INSERTED}")));
    compare(&store, &data, "updated");
    drop(store);
    let store = open(&path);
    compare(&store, &data, "reopened with the log");
    store.compact().unwrap();
    compare(&store, &data, "compacted");
    drop(store);
    compare(&open(&path), &data, "compacted and reopened");
}

/// FILTER, ORDER BY and aggregates over inlined values read no term: the
/// dictionary file's term-read counter does not move; a query that
/// returns IRIs does read them (the counter counts).
#[test]
fn filters_and_order_by_on_inlined_values_read_no_term() {
    let tmp = tempfile::tempdir().unwrap();
    let mut text = String::from("@prefix ex: <http://ex/> . @prefix xsd: <http://www.w3.org/2001/XMLSchema#> .\n");
    for i in 0..2000 {
        text +=
            &format!("ex:s{i} ex:v {} ; ex:ok {} ; ex:d \"20{:02}-0{}-1{}\"^^xsd:date .\n", i as i64 * 7 % 1001 - 500, i % 3 == 0, i % 100, i % 9 + 1, i % 10);
    }
    let file = tmp.path().join("d.ttl");
    std::fs::write(&file, text).unwrap();
    let path = tmp.path().join("s");
    RdfStore::bulk_load(&path, &[file], &LoadOptions::default()).unwrap();
    let store = RdfStore::open(&path, &OpenOptions::default()).unwrap();
    let p = "PREFIX ex: <http://ex/> PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> ";
    let run = |q: &str| {
        let before = store.dict_term_reads();
        let out = rows(store.query(&format!("{p}{q}"), &QueryOptions::default()).unwrap());
        (out, store.dict_term_reads() - before)
    };
    for q in [
        "SELECT (COUNT(*) AS ?c) WHERE { ?s ex:v ?v FILTER(?v > 100 && ?v <= 400) }",
        "SELECT ?v WHERE { ?s ex:v ?v FILTER(?v < 0) } ORDER BY DESC(?v) LIMIT 10",
        "SELECT (SUM(?v) AS ?t) (MAX(?v) AS ?m) WHERE { ?s ex:v ?v ; ex:ok true }",
        "SELECT ?d WHERE { ?s ex:d ?d FILTER(?d >= \"2050-01-01\"^^xsd:date) } ORDER BY ?d LIMIT 5",
        "SELECT (COUNT(*) AS ?c) WHERE { ?s ex:ok ?b FILTER(!?b) }",
        "SELECT ?w WHERE { ?s ex:v ?v BIND(?v * 2 + 1 AS ?w) FILTER(?w > 900) } ORDER BY ?w",
    ] {
        let (out, reads) = run(q);
        assert!(!out.is_empty(), "{q}");
        assert_eq!(reads, 0, "{q}: {reads} term reads");
    }
    let (out, reads) = run("SELECT ?s WHERE { ?s ex:v -500 }");
    assert_eq!(out.len(), 14);
    assert!(reads > 0, "the counter counts the IRIs read");
}
