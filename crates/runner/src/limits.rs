//! Limits on everything a model or a batch can ask for: a bad or hostile
//! model file fails at load with an error instead of exhausting memory.

/// Largest model.json read.
pub const MAX_MODEL_JSON_BYTES: u64 = 16 << 20;
/// Largest weights.safetensors read (read whole into memory).
pub const MAX_WEIGHTS_BYTES: u64 = 4 << 30;
/// Ops in one DFG.
pub const MAX_OPS: usize = 4096;
/// Named inputs, weights.
pub const MAX_INPUTS: usize = 64;
pub const MAX_WEIGHTS: usize = 4096;
/// Blocks (layers) one model reads.
pub const MAX_BLOCKS: usize = 64;
/// Columns of any value (feature width, hidden width, heads * channels).
pub const MAX_COLS: usize = 1 << 20;
/// Elements of any one tensor (16 GiB of f32).
pub const MAX_ELEMENTS: usize = 1 << 32;
/// Attention heads.
pub const MAX_HEADS: usize = 1024;
/// Nodes and edges of one block (ids are u32).
pub const MAX_BLOCK_NODES: usize = u32::MAX as usize;
pub const MAX_BLOCK_EDGES: usize = 1 << 36;
/// Length of a value, weight or op name.
pub const MAX_NAME: usize = 256;
