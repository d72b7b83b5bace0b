use solidgraph_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Unsupported(String),
    /// A whole-graph algorithm's state exceeds the state budget
    /// (`state::reserve`); nothing was allocated.
    #[error("{algorithm} needs {needed} bytes of state, more than its memory budget of {budget} bytes")]
    OverBudget { algorithm: &'static str, needed: u64, budget: u64 },
    /// The progress hook asked to stop; nothing was written.
    #[error("cancelled")]
    Cancelled,
}

/// What a progress hook returns to stop the work: the operator then returns
/// [`EngineError::Cancelled`] at its next report, having written nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

impl From<Cancelled> for EngineError {
    fn from(_: Cancelled) -> Self {
        EngineError::Cancelled
    }
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

/// (phase, done, total) callbacks for long runs; `Err(Cancelled)` stops the
/// run. Operators report at least once per read batch or round, so a hook
/// that starts refusing stops them within one batch's work.
pub type Progress<'a> = &'a (dyn Fn(&str, u64, u64) -> Result<(), Cancelled> + Sync);

/// A progress callback that reports nothing and never stops the work.
pub fn silent(_: &str, _: u64, _: u64) -> Result<(), Cancelled> {
    Ok(())
}

impl EngineError {
    /// The message for a caller of `front` (see `StoreError::message`).
    pub fn message(&self, front: solidgraph_store::Front) -> String {
        match self {
            EngineError::Store(e) => e.message(front),
            _ => self.to_string(),
        }
    }
}
