//! RDF targets on a small store built once (a dictionary with term,
//! hash, directory and inline pages, quads in two graphs, pending updates
//! in the log):
//! - `rdf_bytes`: a byte range of one of the store's files overwritten
//!   and the checksums it touches recomputed (dictionary pages, rdf.meta,
//!   the quad store's pages, log records), then open and a few queries.
//! - `rdf_wal`: update records with valid checksums replayed at open.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use solidgraph_store::BackendChoice;

use solidgraph_io::SimDisk;
use solidgraph_rdf::{LoadOptions, NamedNode, OpenOptions, Query, QueryOptions, QueryOutput, RdfStore, Term};

/// The fixture's data: typed values that are inlined, strings, language
/// tags, blank nodes, a named graph and a chain for path queries.
const NQUADS: &str = r#"<http://x/a> <http://x/knows> <http://x/b> .
<http://x/b> <http://x/knows> <http://x/c> .
<http://x/c> <http://x/knows> <http://x/a> .
<http://x/a> <http://x/age> "31"^^<http://www.w3.org/2001/XMLSchema#integer> .
<http://x/b> <http://x/age> "047"^^<http://www.w3.org/2001/XMLSchema#integer> .
<http://x/c> <http://x/age> "2.5"^^<http://www.w3.org/2001/XMLSchema#decimal> .
<http://x/a> <http://x/born> "1990-01-02"^^<http://www.w3.org/2001/XMLSchema#date> .
<http://x/b> <http://x/seen> "2020-05-06T07:08:09Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .
<http://x/c> <http://x/ok> "true"^^<http://www.w3.org/2001/XMLSchema#boolean> .
<http://x/a> <http://x/name> "Ann"@en <http://x/g1> .
<http://x/b> <http://x/name> "Bob" <http://x/g1> .
_:n1 <http://x/knows> <http://x/a> <http://x/g2> .
<http://x/c> <http://x/note> "a long note that is not inlined, with \"quotes\" and a newline\n" .
"#;

/// Runs after the load, so the store has pending updates in its log.
const UPDATE: &str = r#"PREFIX x: <http://x/>
INSERT DATA { x:d x:knows x:a . x:d x:age 12 . GRAPH x:g1 { x:d x:name "Dee" } } ;
DELETE DATA { x:c x:knows x:a }"#;

/// Queries every input runs (read paths: scans, lookups of constants,
/// inlined values compared and ordered, a property path, an aggregate).
const QUERIES: [&str; 5] = [
    "SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }",
    "SELECT ?s ?o WHERE { ?s <http://x/age> ?o FILTER(?o > 3) } ORDER BY ?o",
    "SELECT ?x WHERE { <http://x/a> <http://x/knows>+ ?x }",
    "SELECT (COUNT(*) AS ?n) (MAX(?o) AS ?m) WHERE { ?s ?p ?o }",
    "ASK { ?s <http://x/name> \"Ann\"@en }",
];

/// `QUERIES`, parsed once: their parse is the same for every input.
fn queries() -> &'static [Query] {
    static Q: OnceLock<Vec<Query>> = OnceLock::new();
    Q.get_or_init(|| QUERIES.iter().map(|t| RdfStore::parse_query(t, None).expect("the fixture's queries parse")).collect())
}

/// Solutions a query may yield (the fixture has a few dozen).
const RESULT_LIMIT: u64 = 10_000;

/// A store's files as an input makes them: relative path and bytes, in
/// path order; the files it leaves alone borrow the fixture's bytes, so an
/// input copies only the file it changes.
pub type Files = Vec<(PathBuf, Cow<'static, [u8]>)>;

/// The store's files: relative path and bytes, in path order.
pub struct RdfFixture {
    pub files: Vec<(PathBuf, Vec<u8>)>,
    /// Bytes of the quad store's member up to its last written page.
    pub member_written: usize,
}

pub fn rdf_fixture() -> &'static RdfFixture {
    static F: OnceLock<RdfFixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = crate::memory_dir();
        let src = dir.join("in.nq");
        std::fs::write(&src, NQUADS).expect("write fixture quads");
        let st = dir.join("s.rdf");
        RdfStore::bulk_load(&st, &[src], &LoadOptions::default()).expect("fixture load");
        let s =
            RdfStore::open(&st, &OpenOptions { writable: true, cache_bytes: 1 << 20, dict_cache_bytes: 1 << 20, ..Default::default() }).expect("fixture open");
        s.update(UPDATE, &QueryOptions::default()).expect("fixture update");
        drop(s);
        let mut files = vec![];
        list(&st, Path::new(""), &mut files);
        files.sort();
        assert!(files.iter().any(|f| f.0.to_string_lossy().starts_with("dict.")), "the fixture has a dictionary");
        let member = files.iter().find(|f| is_member(&f.0)).expect("the fixture has a quad store member");
        let member_written = written(&member.1);
        RdfFixture { files, member_written }
    })
}

/// The fixture's files, borrowed.
pub fn fixture_files() -> Files {
    rdf_fixture().files.iter().map(|(p, b)| (p.clone(), Cow::Borrowed(b.as_slice()))).collect()
}

/// Whether `a` and `b` hold the same bytes: the same borrowed fixture file
/// without comparing them. (Both are alive, so equal pointers and lengths
/// are the same bytes.)
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    std::ptr::eq(a, b) || a == b
}

/// A simulated disk holding `bytes` as its one member. A fixture file's
/// disk is made once and shared by every input that leaves the file
/// alone: opens are read-only, so nothing changes its bytes, and a fresh
/// copy of the 1 MiB quad member per input would be most of the copying
/// an input does.
fn sim_disk(bytes: Cow<'static, [u8]>) -> Arc<SimDisk> {
    let fresh = |b: Vec<u8>| {
        let disk = SimDisk::new(1, 1);
        disk.load(0, b);
        disk
    };
    match bytes {
        Cow::Borrowed(b) => {
            static SHARED: Mutex<Option<HashMap<usize, Arc<SimDisk>>>> = Mutex::new(None);
            let mut shared = SHARED.lock().unwrap_or_else(|p| p.into_inner());
            shared.get_or_insert_with(HashMap::new).entry(b.as_ptr() as usize).or_insert_with(|| fresh(b.to_vec())).clone()
        }
        Cow::Owned(b) => fresh(b),
    }
}

fn list(root: &Path, rel: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    for e in std::fs::read_dir(root.join(rel)).expect("fixture dir") {
        let e = e.expect("fixture entry");
        let r = rel.join(e.file_name());
        if e.file_type().expect("file type").is_dir() {
            list(root, &r, out);
        } else if r != Path::new("writer.lock") {
            out.push((r.clone(), std::fs::read(root.join(&r)).expect("fixture file")));
        }
    }
}

/// Whether `rel` is the quad store's member file (`<quads dir>/<member 0>`).
fn is_member(rel: &Path) -> bool {
    rel.parent().is_some_and(|q| q != Path::new("") && solidgraph_store::member_path(q, 0) == rel)
}

/// A store made of `files`: every file but the quad store's member under
/// the scratch directory (the layout open reads), the member's bytes on a
/// simulated disk, so an input costs no io_uring ring (its registered
/// buffers were most of an open) and no member file write. The
/// dictionary's bytes go on a simulated disk too, for the same reason,
/// and to its file (open reads its version and size there).
pub struct Written {
    pub dir: PathBuf,
    pub quads: Option<std::sync::Arc<SimDisk>>,
    pub dict: Option<std::sync::Arc<SimDisk>>,
}

/// Writes `files` as a store under the scratch directory. The files of
/// the last store written stay there, and only those whose bytes differ
/// are rewritten: an input changes one file, and removing and writing the
/// whole directory each time cost more than opening it. Opens are
/// read-only, so nothing but this function changes the directory.
pub fn write_store(files: Files) -> Written {
    static ON_DISK: Mutex<Files> = Mutex::new(Vec::new());
    let d = crate::scratch().join("s.rdf");
    let mut on_disk = ON_DISK.lock().unwrap_or_else(|p| p.into_inner());
    let same_names = on_disk.len() == files.len() && on_disk.iter().zip(&files).all(|(a, b)| a.0 == b.0);
    if !same_names {
        on_disk.clear();
        let _ = std::fs::remove_dir_all(&d);
    }
    let (mut quads, mut dict) = (None, None);
    for (i, (rel, bytes)) in files.into_iter().enumerate() {
        let p = d.join(&rel);
        if !same_names {
            std::fs::create_dir_all(p.parent().expect("in the store")).expect("scratch store dir");
            on_disk.push((rel.clone(), Cow::Borrowed(&[])));
        }
        if is_member(&rel) {
            quads = Some(sim_disk(bytes));
            continue;
        }
        if !same_names || !same_bytes(&on_disk[i].1, &bytes) {
            std::fs::write(&p, &bytes).expect("write scratch store");
        }
        if rel.parent() == Some(Path::new("")) && rel.to_string_lossy().starts_with("dict.") {
            dict = Some(sim_disk(bytes.clone()));
        }
        on_disk[i].1 = bytes;
    }
    Written { dir: d, quads, dict }
}

/// Opens the store `w` read-only and runs every query and a pattern read;
/// errors are fine, panics are not.
pub fn exercise(w: &Written) {
    crate::one_thread();
    let Ok(s) = RdfStore::open(&w.dir, &open_options(w)) else { return };
    // No query timeout: its deadline is a thread per query, and a query
    // that runs away on damaged data should fail the run as a hang
    // (libFuzzer's -timeout), not end as a timeout error.
    let q = QueryOptions { timeout: None, result_limit: Some(RESULT_LIMIT), default_graph_as_union: true, ..Default::default() };
    for query in queries() {
        match s.query_parsed(query, &q) {
            Ok(QueryOutput::Solutions { rows, .. }) => rows.take(RESULT_LIMIT as usize).for_each(drop),
            Ok(QueryOutput::Triples(rows)) => rows.take(RESULT_LIMIT as usize).for_each(drop),
            Ok(QueryOutput::Boolean(_)) | Err(_) => {}
        }
    }
    let a = Term::NamedNode(NamedNode::new_unchecked("http://x/a"));
    let _ = s.quads_for_pattern(Some(&a), None, None, None);
    let _ = s.quads_for_pattern(None, None, Some(&a), None);
    let _ = s.info();
}

/// The options `exercise` opens a written store with.
pub fn open_options(w: &Written) -> OpenOptions {
    let quads_backend = w.quads.clone().map_or(BackendChoice::Auto, BackendChoice::Sim);
    let dict_backend = w.dict.clone().map_or(BackendChoice::Auto, BackendChoice::Sim);
    OpenOptions { cache_bytes: 1 << 20, dict_cache_bytes: 1 << 16, quads_backend, dict_backend, ..Default::default() }
}

/// data[0] picks a file of the fixture, data[1..5] a byte offset in it,
/// data[5..] (up to a page) is written there; then the checksums of what
/// was touched are recomputed.
pub fn rdf_bytes(data: &[u8]) {
    if let Some(files) = rdf_bytes_files(data) {
        exercise(&write_store(files));
    }
}

/// The fixture's files as `rdf_bytes` changes them (None: input too short).
pub fn rdf_bytes_files(data: &[u8]) -> Option<Files> {
    if data.len() < 6 {
        return None;
    }
    let mut files = fixture_files();
    let n = files.len();
    let (rel, bytes) = &mut files[data[0] as usize % n];
    if bytes.is_empty() {
        return Some(files);
    }
    let bytes = bytes.to_mut();
    let at = u32::from_le_bytes(data[1..5].try_into().expect("4")) as usize;
    let at = if is_member(rel) { crate::fold(at, bytes.len(), rdf_fixture().member_written) } else { at % bytes.len() };
    let body = &data[5..data.len().min(5 + PAGE)];
    let end = (at + body.len()).min(bytes.len());
    bytes[at..end].copy_from_slice(&body[..end - at]);
    reseal(rel, bytes, at, end);
    Some(files)
}

const PAGE: usize = 4096;

/// Bytes of a quad store member up to the end of its last page holding
/// a nonzero byte: the rest of its stripe is free space no open reads,
/// where damage would change nothing (`crate::fold`).
fn written(member: &[u8]) -> usize {
    let last = member.chunks(PAGE).rposition(|p| p.iter().any(|&b| b != 0));
    last.map_or(member.len(), |p| ((p + 1) * PAGE).min(member.len()))
}

/// Recomputes the checksums over bytes `at..end` of the file `rel`.
fn reseal(rel: &Path, bytes: &mut [u8], at: usize, end: usize) {
    let name = rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let in_quads = rel.components().count() > 1;
    if name.starts_with("dict.") {
        for p in at / PAGE..=(end - 1) / PAGE {
            let Some(pg) = bytes.get_mut(p * PAGE..(p + 1) * PAGE) else { continue };
            if p == 0 {
                let c = crc32c::crc32c(&pg[..PAGE - 4]);
                pg[PAGE - 4..].copy_from_slice(&c.to_le_bytes());
            } else {
                let c = crc32c::crc32c(&pg[4..]);
                pg[..4].copy_from_slice(&c.to_le_bytes());
            }
        }
    } else if name == "rdf.meta" && bytes.len() >= 4 {
        let k = bytes.len() - 4;
        let c = crc32c::crc32c(&bytes[..k]);
        bytes[k..].copy_from_slice(&c.to_le_bytes());
    } else if name == "rdf.wal" || name == "wal.log" {
        reseal_log(bytes);
    } else if in_quads && bytes.len().is_multiple_of(PAGE) {
        for p in at / PAGE..=(end - 1) / PAGE {
            crate::reseal(bytes, PAGE, p);
        }
    }
}

/// Recomputes each log record's CRC (`magic u32 | len u32 | lsn u64 | crc
/// u32 | payload`, the CRC over len, LSN and payload: the store's log and
/// the RDF log share it) while the lengths frame records.
fn reseal_log(b: &mut [u8]) {
    let mut pos = 0;
    while pos + 20 <= b.len() {
        let len = u32::from_le_bytes(b[pos + 4..pos + 8].try_into().expect("4")) as usize;
        let Some(end) = (pos + 20).checked_add(len).filter(|&e| e <= b.len()) else { break };
        let c = crc32c::crc32c_append(crc32c::crc32c(&b[pos + 4..pos + 16]), &b[pos + 20..end]);
        b[pos + 16..pos + 20].copy_from_slice(&c.to_le_bytes());
        pos = end;
    }
}

/// The RDF log's record magic ("WFDR").
const RDF_WAL_MAGIC: u32 = 0x5244_4657;

/// data is a list of update payloads, each `len u16 | bytes`, written as
/// the RDF log's records with valid checksums and consecutive LSNs in
/// place of the fixture's log: replay at open decodes and applies them.
pub fn rdf_wal(data: &[u8]) {
    exercise(&write_store(rdf_wal_files(data)));
}

/// The fixture's files with the log `rdf_wal` makes of `data`.
pub fn rdf_wal_files(data: &[u8]) -> Files {
    let mut log = Vec::new();
    let (mut at, mut lsn) = (0, 1u64);
    while at + 2 <= data.len() {
        let len = u16::from_le_bytes([data[at], data[at + 1]]) as usize;
        let p = &data[at + 2..(at + 2 + len).min(data.len())];
        log.extend_from_slice(&RDF_WAL_MAGIC.to_le_bytes());
        log.extend_from_slice(&(p.len() as u32).to_le_bytes());
        log.extend_from_slice(&lsn.to_le_bytes());
        log.extend_from_slice(&[0; 4]);
        log.extend_from_slice(p);
        at += 2 + len;
        lsn += 1;
    }
    reseal_log(&mut log);
    let mut files: Files = fixture_files().into_iter().filter(|f| f.0 != Path::new("rdf.wal")).collect();
    files.push((PathBuf::from("rdf.wal"), Cow::Owned(log)));
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Damage aimed at the free end of the quad store's member lands in
    /// its written pages, where an open reads it.
    #[test]
    fn member_damage_lands_in_written_pages() {
        let f = rdf_fixture();
        let (i, member) = f.files.iter().enumerate().find(|(_, f)| is_member(&f.0)).expect("a member");
        assert!(f.member_written > 0 && f.member_written < member.1.len(), "{} of {}", f.member_written, member.1.len());
        let mut data = vec![i as u8];
        data.extend((member.1.len() as u32 - 10).to_le_bytes());
        data.extend([0xA5; 8]);
        let files = rdf_bytes_files(&data).expect("a whole input");
        let changed = files[i].1.iter().zip(&member.1).position(|(a, b)| a != b).expect("the member changed");
        assert!(changed < f.member_written, "damage at {changed}, written {}", f.member_written);
    }

    /// The fixture, written and opened as the targets do (quads and
    /// dictionary on simulated disks), opens and answers: an open failing
    /// for a reason of the harness's own would end every input early.
    /// Twice, so the second write keeps the files already there.
    #[test]
    fn fixture_opens_as_written() {
        for _ in 0..2 {
            let w = write_store(fixture_files());
            assert!(w.quads.is_some() && w.dict.is_some(), "both on simulated disks");
            let s = RdfStore::open(&w.dir, &open_options(&w)).expect("the fixture opens");
            let count = |text: &str| match s.query(text, &QueryOptions::default()) {
                Ok(QueryOutput::Solutions { rows, .. }) => rows.count() as u64,
                _ => panic!("a SELECT answers solutions"),
            };
            // The default graph's quads and the named graphs' are all of them.
            let quads = count("SELECT * WHERE { ?s ?p ?o }") + count("SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }");
            assert_eq!(quads, s.info().expect("info").quads, "every quad of the fixture read");
        }
    }
}
