use std::path::PathBuf;

/// Every way the I/O layer can fail. Each variant names the member file and
/// what went wrong, so the message alone tells a user where to look.
#[derive(Debug, thiserror::Error)]
pub enum IoError {
    #[error("{path}: {source}")]
    Os {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: no such volume member")]
    MissingMember { path: PathBuf },
    #[error("{path}: member is {actual} bytes, expected {expected} (all members of a volume have the same size)")]
    MemberSize { path: PathBuf, actual: u64, expected: u64 },
    #[error("{path}: size {size} is not a multiple of the stripe row ({row} bytes)")]
    UnalignedSize { path: PathBuf, size: u64, row: u64 },
    #[error("{path}: no space left on device while writing {bytes} bytes at offset {offset}")]
    NoSpace { path: PathBuf, offset: u64, bytes: u64 },
    #[error("page {page} is past the end of the volume ({num_pages} pages)")]
    PastEnd { page: u64, num_pages: u64 },
    #[error("{path}: I/O error at offset {offset} ({len} bytes): {source}")]
    Device {
        path: PathBuf,
        offset: u64,
        len: u64,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: short read at offset {offset}: the file ends before the volume says it does")]
    ShortRead { path: PathBuf, offset: u64 },
    #[error("invalid volume configuration: {0}")]
    Config(String),
    #[error("write batch: {0}")]
    BadWrite(String),
    #[error("io_uring backend unavailable: {0}")]
    UringUnavailable(String),
}

pub type Result<T, E = IoError> = std::result::Result<T, E>;
