//! Errors of the RDF store. Each names what is at fault: the file, line
//! and column of bad syntax, the query's position, the store file.

use std::path::PathBuf;

use solidgraph_store::StoreError;

pub type Result<T> = std::result::Result<T, RdfError>;

#[derive(Debug, thiserror::Error)]
pub enum RdfError {
    /// Bad RDF syntax in a data file (1-based line and column).
    #[error("{file}:{line}:{column}: {message}")]
    Syntax { file: String, line: u64, column: u64, message: String },
    /// A SPARQL query or update that does not parse.
    #[error("SPARQL syntax error: {0}")]
    QuerySyntax(String),
    /// A query that fails while it runs (a type error is not one: those
    /// leave a variable unbound).
    #[error("query evaluation failed: {0}")]
    Evaluation(String),
    /// A feature the store refuses (SERVICE federation, LOAD of a URL).
    #[error("unsupported: {0}")]
    Unsupported(String),
    #[error("query timed out after {0:?}")]
    Timeout(std::time::Duration),
    #[error("the query yields more than {0} results (the result limit)")]
    ResultLimit(u64),
    /// Bad arguments (an unknown format, a store that already exists).
    #[error("{0}")]
    Invalid(String),
    /// A file of the store that fails its checksum or does not decode.
    #[error("{path}: damaged: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    /// A directory that is not an RDF store (for example a graph store).
    /// A store file in a format this build does not read; `solidgraph rdf
    /// compact` converts an old dictionary.
    #[error("{path}: format version {found}, this build reads {reads}; convert the store with `solidgraph rdf compact STORE`")]
    OldFormat { path: PathBuf, found: u32, reads: u32 },
    #[error("{0}: not a SolidGraph RDF store (no rdf.meta)")]
    NotRdf(PathBuf),
    #[error("the store is open read-only; open it writable to update it")]
    ReadOnly,
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub(crate) fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> RdfError {
    let path = path.into();
    move |source| RdfError::Io { path, source }
}

pub(crate) fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> RdfError {
    RdfError::Corrupt { path: path.into(), reason: reason.into() }
}
