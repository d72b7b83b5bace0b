//! Near-data GNN inference: models as versioned dataflow
//! graphs (DFG) of ops, kernels per op and device chosen by priority, run on
//! the blocks of a sampled or full k-hop subgraph next to the store.
//!
//! - [`dfg`]: the model format (`model.json`, format `solidgraph-dfg`, version 1) and its ops.
//! - [`weights`]: `weights.safetensors`, checked against the shapes model.json declares.
//! - [`plan`]: load-time checks (columns, names, blocks) and slots; rows are checked per run.
//! - [`registry`], [`kernels`]: per op and device, the highest-priority available kernel
//!   runs; `reference` is the oracle, `cpu` the optimised set. [`fuse`] turns an
//!   aggregation read only by the next GEMM into one `spmm_gemm`.
//! - [`plugin`]: kernels from shared libraries with a versioned C ABI
//!   (`include/solidgraph_plugin.h`), loaded only from a configured directory
//!   ([`Registry::load_plugins`]).
//! - [`block`]: one layer's bipartite graph; [`blocks_from_sample`] and [`blocks_full`].
//! - [`model`]: [`Model::load`], [`Model::run`] (one mini-batch), [`Model::run_sample`].
//! - [`infer`]: [`infer_nodes`], batched inference over a store, sampling and gathering
//!   ahead of the model like the engine's loader.
//! - [`whole`]: [`infer_all`], whole-graph inference layer by layer into
//!   checksummed row files ([`rowfile`]), resumable per layer.
//! - [`reach`]: how many hops from a target the output reads, per input and in all,
//!   so that a full-neighbourhood request gathers rows and computes only that far.
//! - [`models`]: builders of GCN, GraphSAGE, GIN, GAT and NGCF, with their exact
//!   semantics (what matches PyG) in that module's docs.
//!
//! Sampled batches follow PyG's homogeneous trim-free convention: every layer
//! runs over the whole sampled node set and every sampled edge, and the seeds'
//! rows are kept, i.e. `model(batch.x, batch.edge_index)[:batch.batch_size]`
//! after `NeighborLoader`. A [`Model`] is `Send + Sync`: one loaded model serves
//! every worker thread.
pub mod block;
pub mod cost;
pub mod dfg;
pub mod error;
pub mod fuse;
pub mod infer;
pub mod kernels;
pub mod limits;
pub mod model;
pub mod models;
pub mod plan;
pub mod plugin;
pub mod reach;
pub mod registry;
pub mod rowfile;
pub mod stream;
pub mod tensor;
pub mod weights;
pub mod whole;

pub use block::{Block, EdgeView, blocks_from_sample, blocks_full};
pub use dfg::{Dfg, Node, Op};
pub use error::{Result, RunnerError};
pub use infer::{InferOptions, infer_nodes};
pub use kernels::{Args, Kernel};
pub use model::{Model, save_model};
pub use plugin::PluginDir;
pub use registry::{Device, Registry};
pub use tensor::Tensor;
pub use weights::Weight;
pub use whole::{WholeOptions, WholeReport, infer_all};
