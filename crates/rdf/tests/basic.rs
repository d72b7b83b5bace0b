//! End to end on a small store: bulk load, query, update, reopen, compact.

use std::path::PathBuf;

use solidgraph_rdf::{LoadOptions, OpenOptions, QueryOptions, QueryOutput, RdfError, RdfStore};

fn write(dir: &std::path::Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn select(store: &RdfStore, q: &str) -> Vec<Vec<String>> {
    select_with(store, q, &QueryOptions::default())
}

fn select_with(store: &RdfStore, q: &str, o: &QueryOptions) -> Vec<Vec<String>> {
    let QueryOutput::Solutions { rows, .. } = store.query(q, o).unwrap() else { panic!("not a SELECT") };
    let mut v: Vec<Vec<String>> = rows.map(|r| r.unwrap().into_iter().map(|t| t.map_or("-".into(), |t| t.to_string())).collect()).collect();
    v.sort();
    v
}

#[test]
fn load_query_update_reopen_compact() {
    let tmp = tempfile::tempdir().unwrap();
    let data =
        write(tmp.path(), "d.ttl", "@prefix ex: <http://ex/> . ex:a ex:knows ex:b , ex:c . ex:b ex:knows ex:c . ex:a ex:name \"A\" . ex:a ex:knows ex:b .");
    let path = tmp.path().join("s");
    let r = RdfStore::bulk_load(&path, &[data], &LoadOptions::default()).unwrap();
    assert_eq!(r.quads, 5);
    let store = RdfStore::open(&path, &OpenOptions { writable: true, ..Default::default() }).unwrap();
    assert_eq!(store.info().unwrap().quads, 4);
    let q = "SELECT ?x ?y WHERE { ?x <http://ex/knows> ?y }";
    assert_eq!(select(&store, q), vec![vec!["<http://ex/a>", "<http://ex/b>"], vec!["<http://ex/a>", "<http://ex/c>"], vec!["<http://ex/b>", "<http://ex/c>"]]);
    assert_eq!(select(&store, "SELECT ?y WHERE { <http://ex/a> <http://ex/knows>+ ?y }"), vec![vec!["<http://ex/b>"], vec!["<http://ex/c>"]]);
    let u = store.update("DELETE DATA { <http://ex/a> <http://ex/knows> <http://ex/b> } ; INSERT DATA { GRAPH <http://ex/g> { <http://ex/c> <http://ex/knows> <http://ex/a> } }", &QueryOptions::default()).unwrap();
    assert_eq!((u.inserted, u.deleted), (1, 1));
    let check = |s: &RdfStore| {
        assert_eq!(select(s, q), vec![vec!["<http://ex/a>", "<http://ex/c>"], vec!["<http://ex/b>", "<http://ex/c>"]]);
        assert_eq!(select(s, "SELECT ?g ?x WHERE { GRAPH ?g { ?x ?p ?y } }"), vec![vec!["<http://ex/g>", "<http://ex/c>"]]);
    };
    check(&store);
    drop(store);
    let store = RdfStore::open(&path, &OpenOptions { writable: true, ..Default::default() }).unwrap();
    check(&store);
    store.compact().unwrap();
    assert_eq!(store.info().unwrap().pending, 0);
    check(&store);
    drop(store);
    let store = RdfStore::open(&path, &OpenOptions::default()).unwrap();
    check(&store);
    assert!(matches!(store.update("INSERT DATA { <http://ex/a> <http://ex/p> 1 }", &QueryOptions::default()), Err(RdfError::ReadOnly)));
}

/// pyoxigraph's `use_default_graph_as_union`: every graph, the default one
/// included, and `GRAPH ?g` still over named graphs only.
#[test]
fn union_default_graph_includes_the_default_graph() {
    let tmp = tempfile::tempdir().unwrap();
    let data = write(tmp.path(), "d.nq", "<http://ex/a> <http://ex/p> <http://ex/b> .\n<http://ex/b> <http://ex/p> <http://ex/c> <http://ex/g> .\n");
    let path = tmp.path().join("s");
    RdfStore::bulk_load(&path, &[data], &LoadOptions::default()).unwrap();
    let store = RdfStore::open(&path, &OpenOptions::default()).unwrap();
    let union = QueryOptions { default_graph_as_union: true, ..Default::default() };
    let all = vec![vec!["<http://ex/a>", "<http://ex/b>"], vec!["<http://ex/b>", "<http://ex/c>"]];
    assert_eq!(select_with(&store, "SELECT ?s ?o WHERE { ?s ?p ?o }", &union), all);
    assert_eq!(select_with(&store, "SELECT ?o WHERE { <http://ex/a> <http://ex/p>+ ?o }", &union), vec![vec!["<http://ex/b>"], vec!["<http://ex/c>"]]);
    assert_eq!(select_with(&store, "SELECT ?g WHERE { GRAPH ?g { ?s ?p ?o } }", &union), vec![vec!["<http://ex/g>"]]);
    assert_eq!(select(&store, "SELECT ?s ?o WHERE { ?s ?p ?o }"), vec![vec!["<http://ex/a>", "<http://ex/b>"]]);
}

/// A query parsed once runs like its text, each time, and a parse error
/// keeps its kind; the base IRI resolves at the parse.
#[test]
fn parsed_queries_run_like_their_text() {
    let tmp = tempfile::tempdir().unwrap();
    let data = write(tmp.path(), "d.nt", "<http://ex/a> <http://ex/p> <http://ex/b> .\n<http://ex/b> <http://ex/p> <http://ex/c> .\n");
    let path = tmp.path().join("s");
    RdfStore::bulk_load(&path, &[data], &LoadOptions::default()).unwrap();
    let store = RdfStore::open(&path, &OpenOptions::default()).unwrap();
    let text = "SELECT ?o WHERE { <a> <p>+ ?o } ORDER BY ?o";
    let q = RdfStore::parse_query(text, Some("http://ex/")).unwrap();
    let by_text = select_with(&store, text, &QueryOptions { base_iri: Some("http://ex/".into()), ..Default::default() });
    assert_eq!(by_text, vec![vec!["<http://ex/b>"], vec!["<http://ex/c>"]]);
    for _ in 0..2 {
        let QueryOutput::Solutions { rows, .. } = store.query_parsed(&q, &QueryOptions::default()).unwrap() else { panic!("not a SELECT") };
        let rows: Vec<Vec<String>> = rows.map(|r| r.unwrap().into_iter().map(|t| t.map_or("-".into(), |t| t.to_string())).collect()).collect();
        assert_eq!(rows, by_text);
    }
    assert!(matches!(RdfStore::parse_query("SELECT WHERE {", None), Err(RdfError::QuerySyntax(_))));
}

#[test]
fn bad_syntax_names_file_line_column_and_leaves_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let data = write(
        tmp.path(),
        "bad.nt",
        "<http://ex/a> <http://ex/p> <http://ex/b> .\n<http://ex/a> <http://ex/p> .\n<http://ex/b> <http://ex/p> <http://ex/c> .\n",
    );
    let path = tmp.path().join("s");
    let e = RdfStore::bulk_load(&path, std::slice::from_ref(&data), &LoadOptions::default()).unwrap_err();
    match &e {
        RdfError::Syntax { file, line, .. } => {
            assert!(file.ends_with("bad.nt"));
            assert_eq!(*line, 2);
        }
        e => panic!("{e}"),
    }
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1, "only the data file is left");
    let r = RdfStore::bulk_load(&path, &[data], &LoadOptions { lenient: true, ..Default::default() }).unwrap();
    assert_eq!((r.quads, r.skipped), (2, 1));
}

/// Chains of lookups from a bound term (planned as for-loop joins), over
/// quads in pages and in the delta, and `!=` between a date and other terms.
#[test]
fn dependent_lookups_and_date_inequality() {
    let tmp = tempfile::tempdir().unwrap();
    let data = write(
        tmp.path(),
        "d.ttl",
        "@prefix ex: <http://ex/> . ex:a ex:k ex:b , ex:c . ex:b ex:k ex:d . ex:c ex:k ex:e . ex:x ex:k ex:y . \
         ex:s ex:p \"2020-01-31\"^^<http://www.w3.org/2001/XMLSchema#date> , \"a\" , 0 .",
    );
    let path = tmp.path().join("s");
    RdfStore::bulk_load(&path, &[data], &LoadOptions::default()).unwrap();
    let store = RdfStore::open(&path, &OpenOptions { writable: true, ..Default::default() }).unwrap();
    let bgp = "SELECT ?y WHERE { <http://ex/a> <http://ex/k> ?x . ?x <http://ex/k> ?y }";
    let path_q = "SELECT ?y WHERE { <http://ex/a> <http://ex/k>/<http://ex/k> ?y }";
    let want = vec![vec!["<http://ex/d>".to_string()], vec!["<http://ex/e>".to_string()]];
    assert_eq!(select(&store, bgp), want);
    assert_eq!(select(&store, path_q), want);
    store
        .update(
            "INSERT DATA { <http://ex/b> <http://ex/k> <http://ex/f> } ; DELETE DATA { <http://ex/c> <http://ex/k> <http://ex/e> }",
            &QueryOptions::default(),
        )
        .unwrap();
    let want = vec![vec!["<http://ex/d>".to_string()], vec!["<http://ex/f>".to_string()]];
    assert_eq!(select(&store, bgp), want);
    assert_eq!(select(&store, path_q), want);
    let ne = "SELECT ?o WHERE { <http://ex/s> <http://ex/p> ?o FILTER(?o != \"2020-01-31\"^^<http://www.w3.org/2001/XMLSchema#date>) }";
    assert_eq!(select(&store, ne), vec![vec!["\"0\"^^<http://www.w3.org/2001/XMLSchema#integer>".to_string()], vec!["\"a\"".to_string()]]);
}
