//! SolidGraph's RDF store: a term dictionary, quads as RDF-tuples on the
//! page store (subject -> (predicate, object) out-lists and object ->
//! (predicate, subject) in-lists, the label naming the (graph, predicate)
//! pair), SPARQL 1.1 query and update through `spareval`, results through
//! `sparesults`. See docs/DESIGN.md, "RDF".
//!
//! The public API, for the CLI and the Python bindings:
//! - [`RdfStore::bulk_load`] builds a store from RDF files (N-Triples,
//!   N-Quads, Turtle, TriG, RDF/XML), [`RdfStore::open`] opens one.
//! - [`RdfStore::query`] runs a SPARQL query on a snapshot and returns a
//!   [`QueryOutput`] (solutions streamed, a boolean, or triples);
//!   [`write_solutions`], [`write_boolean`] and [`write_triples`] serialise
//!   it.
//! - [`RdfStore::update`] runs a SPARQL update, durable (in the synced
//!   update log) when it returns; [`RdfStore::load`] adds a file's quads
//!   the same way; [`RdfStore::compact`] folds the log into pages.
//! - [`RdfStore::quads_for_pattern`] reads quads matching a pattern.
//!
//! Terms and quads are `oxrdf`'s types, re-exported here so callers need no
//! dependency of their own on it.

mod dataset;
mod dict;
mod dictfile;
mod error;
mod inline;
mod intern;
mod load;
mod meta;
mod parse;
mod path;
mod query;
mod results;
mod sort;
mod state;
mod store;
mod term;
mod update;
mod wal;

use std::path::PathBuf;
use std::time::Duration;

pub use error::{RdfError, Result};
pub use oxrdf::{BlankNode, GraphName, Literal, NamedNode, NamedOrBlankNode, Quad, Term, Triple, Variable};
pub use oxrdfio::RdfFormat;
pub use results::{rdf_format, results_format, write_boolean, write_solutions, write_triples};
pub use sparesults::QueryResultsFormat;
/// A parsed SPARQL query (`RdfStore::parse_query`, `RdfStore::query_parsed`).
pub use spargebra::Query;
pub use store::RdfStore;

/// How [`RdfStore::open`] opens a store.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// Take the writer lock and allow updates. A read-only open sees the
    /// store as of its open.
    pub writable: bool,
    /// Create an empty store if nothing is at the path.
    pub create: bool,
    /// Page-cache budget of the quad pages, bytes.
    pub cache_bytes: u64,
    /// Cache budget of the term dictionary's pages, bytes. The dictionary
    /// is read on demand; only its directory (16 bytes a 4 KiB page) and
    /// the terms added since the last compaction stay in memory.
    pub dict_cache_bytes: u64,
    /// The quad store's I/O backend: a simulated disk lets the fuzz
    /// targets open a store per input without an io_uring ring.
    pub quads_backend: solidgraph_store::BackendChoice,
    /// The dictionary file's I/O backend, for the same reason: a simulated
    /// disk holding the file's bytes (its version and size are still read
    /// from the file). A compaction's new dictionary is read from its file.
    pub dict_backend: solidgraph_store::BackendChoice,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            writable: false,
            create: false,
            cache_bytes: 256 << 20,
            dict_cache_bytes: 32 << 20,
            quads_backend: Default::default(),
            dict_backend: Default::default(),
        }
    }
}

/// How [`RdfStore::bulk_load`] and [`RdfStore::load`] read files.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// The syntax; `None` guesses it from each file's extension (`.nt`,
    /// `.nq`, `.ttl`, `.trig`, `.rdf`/`.owl`/`.xml`).
    pub format: Option<RdfFormat>,
    /// Base IRI for relative IRIs; `None`: the file's `file://` IRI.
    pub base_iri: Option<String>,
    /// Skip bad statements and count them (`LoadReport::skipped`) instead of
    /// failing on the first one.
    pub lenient: bool,
    /// Triples of formats without graphs go to this graph (default graph if `None`).
    pub to_graph: Option<NamedOrBlankNode>,
    /// Bytes for sort buffers; the load's peak memory stays near this plus
    /// the dictionary's build tables.
    pub memory_budget: u64,
    /// Print a progress bar on stderr.
    pub progress: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions { format: None, base_iri: None, lenient: false, to_graph: None, memory_budget: 1 << 30, progress: false }
    }
}

/// What a load did.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    /// Quads read from the files (before duplicates were dropped).
    pub quads: u64,
    /// Bad statements skipped under `lenient`.
    pub skipped: u64,
    /// Distinct terms in the dictionary afterwards.
    pub terms: u64,
    pub seconds: f64,
}

/// Options of one query or update.
#[derive(Debug, Clone, Default)]
pub struct QueryOptions {
    /// Base IRI for the query's relative IRIs.
    pub base_iri: Option<String>,
    /// Cancel the query with `RdfError::Timeout` after this long.
    pub timeout: Option<Duration>,
    /// Fail with `RdfError::ResultLimit` once a query yields more than this
    /// many solutions or triples.
    pub result_limit: Option<u64>,
    /// The default graph is the union of all graphs, the default one
    /// included (as with pyoxigraph's `use_default_graph_as_union`). A
    /// query's FROM clause still names its dataset.
    pub default_graph_as_union: bool,
}

/// A query's result. Solutions and triples are streamed: each item is read
/// from the store as the caller advances. It holds the store's snapshot, so
/// it may outlive the borrow of the store, but it is not `Send` (spareval's
/// iterators hold `Rc`s): consume it on the thread that ran the query.
pub enum QueryOutput {
    /// SELECT: the projected variables and one row per solution, a value
    /// per variable in that order (`None` when unbound).
    Solutions { variables: Vec<Variable>, rows: SolutionRows },
    /// ASK.
    Boolean(bool),
    /// CONSTRUCT and DESCRIBE.
    Triples(TripleRows),
}

/// The rows of a SELECT.
pub type SolutionRows = Box<dyn Iterator<Item = Result<Vec<Option<Term>>>>>;
/// The triples of a CONSTRUCT or DESCRIBE.
pub type TripleRows = Box<dyn Iterator<Item = Result<Triple>>>;

/// What an update did.
#[derive(Debug, Clone, Default)]
pub struct UpdateReport {
    /// Quads added that were not there before.
    pub inserted: u64,
    /// Quads removed that were there.
    pub deleted: u64,
}

/// What a store holds.
#[derive(Debug, Clone)]
pub struct StoreInfo {
    pub path: PathBuf,
    /// Quads in the store (pages and pending updates).
    pub quads: u64,
    /// Terms in the dictionary (on disk and added by pending updates).
    pub terms: u64,
    /// Quads added or removed by updates not yet compacted into pages.
    pub pending: u64,
    /// Bytes of the store's files.
    pub bytes: u64,
}
