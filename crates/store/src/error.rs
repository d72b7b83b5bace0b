use std::path::PathBuf;

use solidgraph_io::IoError;

/// Errors of the store. Input errors name the file and line (or page);
/// corruption names the page and what check failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Io(#[from] IoError),
    #[error("{path}: {source}")]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: {reason}")]
    Parse { path: PathBuf, line: u64, reason: String },
    #[error("{path}: {reason}")]
    BadInput { path: PathBuf, reason: String },
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("page {page}: {reason}")]
    Corrupt { page: u64, reason: String },
    #[error("{path}: store format version {found} is newer than this build understands ({supported}); upgrade solidgraph")]
    NewerFormat { path: PathBuf, found: u32, supported: u32 },
    #[error("{path}: store format version {found} is older than this build reads ({supported}); import the graph again")]
    OlderFormat { path: PathBuf, found: u32, supported: u32 },
    /// `reason` says what is there instead ("is a file, not a SolidGraph
    /// store", "not a SolidGraph store: ...").
    #[error("{path}: {reason}")]
    NotAStore { path: PathBuf, reason: String },
    #[error("{path}: already exists")]
    Exists { path: PathBuf },
    #[error("vertex {vertex} is out of range (the graph has {num_nodes} vertices)")]
    VertexOutOfRange { vertex: u64, num_nodes: u64 },
    #[error("no tensor named {name:?} (the store has: {have})")]
    NoSuchTensor { name: String, have: String },
    #[error("{path}: locked by another writer (one process may open a store for writing)")]
    Locked { path: PathBuf },
    #[error("this store is open read-only; open it with writable=True (OpenOptions::writable) to update it")]
    ReadOnly,
    #[error("page {page}: written by a merge (epoch {found}) after this reader opened the store (epoch {epoch}); reopen it to read the merged graph")]
    Stale { page: u64, epoch: u64, found: u64 },
    #[error("this store has no {0} edges; import with keep_in_edges (--in-edges) to add them")]
    NoDirection(&'static str),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

pub(crate) fn file_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::File { path: path.to_path_buf(), source }
}
