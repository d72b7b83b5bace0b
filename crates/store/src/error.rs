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
    #[error("{0}")]
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
    #[error("this store is open read-only; {}", Need::Writable.remedy(Front::Neutral))]
    ReadOnly,
    #[error("page {page}: written by a merge (epoch {found}) after this reader opened the store (epoch {epoch}); reopen it to read the merged graph")]
    Stale { page: u64, epoch: u64, found: u64 },
    #[error("this store has no {0} edges; {remedy}", remedy = Need::of_direction(.0).remedy(Front::Neutral))]
    NoDirection(&'static str),
    /// An operation that needs what the store was imported without: `what`
    /// says what and why ("sssp needs edge weights").
    #[error("{what}; {}", .need.remedy(Front::Neutral))]
    Lacks { what: String, need: Need },
}

/// Who shows an error to whom: a remedy is worded in the caller's terms,
/// Python keyword arguments for a Python caller and flags for a shell user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Front {
    /// Neither (the `Display` text, for Rust callers and logs).
    Neutral,
    Python,
    Cli,
}

/// What the store was imported or opened without that an operation needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    InEdges,
    Weights,
    Labels,
    LowerLists,
    Writable,
}

impl Need {
    fn of_direction(dir: &str) -> Need {
        if dir == "lower" { Need::LowerLists } else { Need::InEdges }
    }

    /// How to get it, in `front`'s terms.
    pub fn remedy(self, front: Front) -> &'static str {
        match (self, front) {
            (Need::InEdges, Front::Neutral) => "import it again keeping in-edges",
            (Need::InEdges, Front::Python) => "import it again with in_edges=True",
            (Need::InEdges, Front::Cli) => "import it again with --in-edges",
            (Need::Weights, Front::Neutral) => "import it with edge weights",
            (Need::Weights, Front::Python) => "import it with weights=True (or edge_weights=...)",
            (Need::Weights, Front::Cli) => "import it with --weights",
            (Need::Labels, Front::Neutral) => "import it with edge labels",
            (Need::Labels, Front::Python) => "import it with labels=True (or edge_labels=...)",
            (Need::Labels, Front::Cli) => "import it with --labels",
            (Need::LowerLists, Front::Neutral) => "import it again with lower lists (undirected)",
            (Need::LowerLists, Front::Python) => "import it again with lower_lists=True (undirected)",
            (Need::LowerLists, Front::Cli) => "import it again with --lower-lists (undirected)",
            (Need::Writable, Front::Neutral) => "open it writable to update it",
            (Need::Writable, Front::Python) => "open it with solidgraph.open(path, writable=True) to update it",
            (Need::Writable, Front::Cli) => "update it with solidgraph apply",
        }
    }
}

impl StoreError {
    /// The message for a caller of `front`: the `Display` text, with a
    /// missing feature's remedy in that front end's terms.
    pub fn message(&self, front: Front) -> String {
        match self {
            StoreError::ReadOnly => format!("this store is open read-only; {}", Need::Writable.remedy(front)),
            StoreError::NoDirection(d) => format!("this store has no {d} edges; {}", Need::of_direction(d).remedy(front)),
            StoreError::Lacks { what, need } => format!("{what}; {}", need.remedy(front)),
            _ => self.to_string(),
        }
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

pub(crate) fn file_err(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::File { path: path.to_path_buf(), source }
}
