use solidgraph_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("{0}")]
    Unsupported(String),
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// (phase, done, total) callbacks for long runs.
pub type Progress<'a> = &'a (dyn Fn(&str, u64, u64) + Sync);

/// A progress callback that reports nothing.
pub fn silent(_: &str, _: u64, _: u64) {}
