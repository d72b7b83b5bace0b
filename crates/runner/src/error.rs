//! The runner's one error type: every bad model, bad input or failed kernel
//! is a value the caller sees, named after the file, op, weight or value at
//! fault, never a panic in a worker.

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum RunnerError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: {size} bytes is over the limit of {limit}")]
    TooLarge { path: PathBuf, size: u64, limit: u64 },
    #[error("model.json: {0}")]
    Json(String),
    #[error("model.json: format is {0:?}, not \"solidgraph-dfg\"")]
    Format(String),
    #[error("model.json: DFG version {found} is newer than this runner's {supported}; upgrade solidgraph")]
    Version { found: u64, supported: u64 },
    #[error("model.json: op {index} is {name:?}, which this runner does not know")]
    UnknownOp { index: usize, name: String },
    #[error("model.json: op {index} ({op}): {message}")]
    BadOp { index: usize, op: String, message: String },
    #[error("model.json: {0}")]
    Invalid(String),
    #[error("weights.safetensors: {0}")]
    WeightsFile(String),
    #[error("weight {name:?} is missing from weights.safetensors")]
    MissingWeight { name: String },
    #[error("weight {name:?} has dtype {found}, expected F32")]
    WeightDtype { name: String, found: String },
    #[error("weight {name:?} has shape {found:?}, model.json declares {expected:?}")]
    WeightShape { name: String, found: Vec<usize>, expected: Vec<usize> },
    #[error("weight {name:?} holds a non-finite value ({value}) at element {at}")]
    WeightNotFinite { name: String, at: usize, value: f32 },
    #[error("op {index} ({op}): shape mismatch: {message}")]
    Shape { index: usize, op: String, message: String },
    #[error("input {name:?}: {message}")]
    Input { name: String, message: String },
    #[error("block {index}: {message}")]
    Block { index: usize, message: String },
    #[error("no kernel for op {op:?} on any enabled device")]
    NoKernel { op: String },
    #[error("kernel {kernel:?} for op {index} ({op}) failed: {message}")]
    Kernel { index: usize, op: String, kernel: String, message: String },
    /// A row file of `infer_all` (a layer's output) that is damaged or not the one recorded.
    #[error("{path}: {message}")]
    RowFile { path: PathBuf, message: String },
    #[error("plugin {path}: {message}")]
    Plugin { path: PathBuf, message: String },
    /// Sampling or gathering for inference failed in the engine or the store.
    #[error(transparent)]
    Engine(#[from] solidgraph_engine::EngineError),
}

pub type Result<T> = std::result::Result<T, RunnerError>;

impl From<solidgraph_store::StoreError> for RunnerError {
    fn from(e: solidgraph_store::StoreError) -> Self {
        RunnerError::Engine(e.into())
    }
}
