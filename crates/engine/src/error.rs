use solidgraph_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Unsupported(String),
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// (phase, done, total) callbacks for long runs.
pub type Progress<'a> = &'a (dyn Fn(&str, u64, u64) + Sync);

/// A progress callback that reports nothing.
pub fn silent(_: &str, _: u64, _: u64) {}

impl EngineError {
    /// The message for a caller of `front` (see `StoreError::message`).
    pub fn message(&self, front: solidgraph_store::Front) -> String {
        match self {
            EngineError::Store(e) => e.message(front),
            _ => self.to_string(),
        }
    }
}
