//! SolidGraph's store: the on-disk graph (superblocks, packed adjacency
//! pages, extents, translation tables, tensor regions), its page cache, the
//! external-memory import, and batched reads. See docs/DESIGN.md, "On-disk
//! format" and "Read path".

mod addtensor;
pub mod adjacency;
mod base;
pub mod cache;
pub mod delta;
mod doorkeeper;
mod draw;
mod error;
mod fetch;
mod gather;
pub mod gtt;
mod ids;
pub mod import;
pub mod mem;
mod merge;
mod open;
pub mod order;
pub mod page;
pub mod partition;
mod planner;
mod read;
pub mod rowcache;
mod scan;
mod space;
mod store;
pub mod superblock;
pub mod tensor;
mod update;
mod varint;
mod verify;
pub mod wal;
mod warmup;
mod writer;

pub use base::{Direction, GttRef, member_path};
pub use draw::Drawn;
pub use error::{Front, Need, Result, StoreError};
pub use import::source::EdgeInput;
pub use import::{ImportOptions, ImportReport, TensorData, TensorInput, import};
pub use merge::MergeReport;
pub use open::{OpenOptions, RowAdmission};
pub use planner::Csr;
pub use read::Rows;
pub use rowcache::Expected;
pub use scan::{ChunkLimit, RangePages};
// `OpenOptions::backend` is of these types: front ends choose a backend
// without a dependency on the io crate of their own.
pub use solidgraph_io::{BackendChoice, BackendKind};
pub use store::{Store, StoreStats, View};
pub use tensor::DType;
pub use verify::VerifyReport;
