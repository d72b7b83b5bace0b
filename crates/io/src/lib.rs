//! SolidGraph's I/O layer: volumes of one or more files or block devices,
//! striped, read and written in batches of direct I/O.
//!
//! Everything above this crate speaks in logical pages and whole batches:
//! [`Volume::read`] takes every page a query needs and returns them at once;
//! the volume sorts, de-duplicates and merges them per member and keeps each
//! member's queue full (io_uring), or a thread pool busy (POSIX), or runs them
//! against an in-memory disk that injects faults ([`SimDisk`]).

mod backend;
pub mod bench;
mod buf;
mod error;
mod stats;
pub mod sync;
mod volume;

pub use backend::BackendKind;
pub use backend::sim::{CrashMode, Faults, OpKinds, SECTOR, SimDisk};
pub use buf::{ALIGN, AlignedBuf};
pub use error::{IoError, Result};
pub use stats::MemberStats;
pub use volume::{BackendChoice, Pages, Stripe, Volume, VolumeOptions};
