//! SolidGraph's store: the on-disk graph (superblocks, packed adjacency
//! pages, extents, translation tables, tensor regions), its page cache, the
//! external-memory import, and batched reads. See docs/DESIGN.md, "store".

pub mod adjacency;
pub mod cache;
pub mod delta;
mod doorkeeper;
mod error;
pub mod gtt;
pub mod import;
mod merge;
pub mod mem;
pub mod order;
pub mod page;
pub mod rowcache;
mod scan;
mod space;
mod store;
mod update;
pub mod superblock;
pub mod tensor;
mod varint;
mod verify;
pub mod wal;

pub use error::{Result, StoreError};
pub use import::source::EdgeInput;
pub use import::{ImportOptions, ImportReport, TensorData, TensorInput, import};
pub use merge::MergeReport;
pub use rowcache::Expected;
pub use scan::{ChunkLimit, RangePages};
pub use store::{Csr, Direction, Drawn, GttRef, OpenOptions, RowAdmission, Rows, Store, StoreStats, member_path};
pub use tensor::DType;
pub use verify::VerifyReport;
