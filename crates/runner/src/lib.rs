//! Near-data GNN inference (issue 29, stage 1): models as versioned dataflow
//! graphs (DFG) of ops, kernels per op and device chosen by priority, run on
//! the blocks of a sampled or full k-hop subgraph next to the store.
pub mod block;
pub mod dfg;
pub mod error;
pub mod fuse;
pub mod kernels;
pub mod limits;
pub mod model;
pub mod models;
pub mod plan;
pub mod registry;
pub mod tensor;
pub mod weights;

pub use block::{Block, EdgeView, blocks_from_sample, blocks_full};
pub use dfg::{Dfg, Node, Op};
pub use error::{Result, RunnerError};
pub use kernels::{Args, Kernel};
pub use model::{Model, save_model};
pub use registry::{Device, Registry};
pub use tensor::Tensor;
pub use weights::Weight;
