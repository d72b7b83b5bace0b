//! SolidGraph's gRPC server: the stores, the engine's batched operators and
//! the updates, served over tonic (proto/solidgraph/v1). A layer above
//! store and engine, below the CLI's `solidgraph serve`.
//!
//! Requests run on a bounded pool of blocking threads (`gate`), never on
//! tokio's reactor; results leave as chunked raw arrays (`arrays`), framed
//! without copies (`replies`); every call passes bearer-token auth
//! (`auth`) and the limits (`limits`), and is counted in the Prometheus
//! metrics (`telemetry`).

mod analytics;
pub mod arrays;
pub mod auth;
mod errors;
mod gate;
mod graph;
pub mod inproc;
pub mod limits;
mod oversize;
mod replies;
mod serve;
mod shard;
pub mod shm;
mod spool;
mod stores;
mod telemetry;
mod update_graph;
mod updates;

pub use auth::{Role, Tokens};
pub use limits::Limits;
pub use serve::{ServeOptions, TlsFiles, serve};
pub use shm::ShmOptions;
pub use stores::Stores;

/// The generated messages and services of `solidgraph.v1`.
pub mod proto {
    tonic::include_proto!("solidgraph.v1");

    /// The encoded FileDescriptorSet of the protos, for gRPC reflection.
    pub const DESCRIPTOR: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/solidgraph_v1_descriptor.bin"));
}
