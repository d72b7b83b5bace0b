//! Backends execute a planned batch of I/Os against the volume's members.
//!
//! The volume plans (classify per member, sort, dedup, merge); a backend only
//! runs the resulting ops with at most `cap` in flight per member, completes
//! them in any order, and returns when every op has finished, so no buffer is
//! referenced after `execute` returns, error or not.

pub(crate) mod posix;
pub(crate) mod sim;
pub(crate) mod uring;

use std::fs::File;
use std::ops::Range;
use std::path::PathBuf;

use crate::error::{IoError, Result};
use crate::stats::MemberCounters;

/// Which backend runs the I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    Uring,
    Posix,
    Sim,
}

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Uring => "uring",
            BackendKind::Posix => "posix",
            BackendKind::Sim => "sim",
        }
    }
}

impl std::str::FromStr for BackendKind {
    type Err = IoError;
    fn from_str(s: &str) -> Result<BackendKind> {
        match s {
            "uring" | "io_uring" => Ok(BackendKind::Uring),
            "posix" => Ok(BackendKind::Posix),
            _ => Err(IoError::Config(format!("unknown I/O backend {s:?} (expected uring or posix)"))),
        }
    }
}

/// One I/O: a run of one or more pages contiguous on one member and in memory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IoOp {
    pub member: u32,
    pub write: bool,
    /// Fixed-buffer index when `buf` lies in a registered chunk.
    pub reg: Option<u16>,
    pub len: u32,
    pub offset: u64,
    pub buf: *mut u8,
}

// SAFETY: an IoOp is a description; the volume guarantees the buffer outlives
// the batch and that no two ops of a batch overlap in memory.
unsafe impl Send for IoOp {}
unsafe impl Sync for IoOp {}

pub(crate) struct ExecCtx<'a> {
    /// Max I/Os in flight per member.
    pub cap: usize,
    /// Batches of at most this many ops run in the caller's thread.
    pub inline_watermark: usize,
    pub paths: &'a [PathBuf],
    pub counters: &'a [MemberCounters],
}

impl ExecCtx<'_> {
    pub(crate) fn os_error(&self, op: &IoOp, errno: i32) -> IoError {
        let path = self.paths[op.member as usize].clone();
        if errno == libc::ENOSPC {
            return IoError::NoSpace { path, offset: op.offset, bytes: op.len as u64 };
        }
        IoError::Device { path, offset: op.offset, len: op.len as u64, source: std::io::Error::from_raw_os_error(errno) }
    }

    pub(crate) fn short_read(&self, op: &IoOp) -> IoError {
        IoError::ShortRead { path: self.paths[op.member as usize].clone(), offset: op.offset }
    }
}

pub(crate) trait Backend: Send + Sync {
    fn kind(&self) -> BackendKind;
    /// Runs `ops`; `by_member[m]` is the range of `ops` on member m, sorted by
    /// offset. Returns the first error only after every submitted op is done.
    fn execute(&self, ops: &[IoOp], by_member: &[Range<usize>], ctx: &ExecCtx) -> Result<()>;
    /// The open member files (empty for the simulated disk, which overrides
    /// the three methods below).
    fn files(&self) -> &[File];
    /// fdatasync (or fsync when `metadata`) one member.
    fn sync(&self, member: usize, metadata: bool, path: &std::path::Path) -> Result<()> {
        sync_file(&self.files()[member], metadata, path)
    }
    /// Current length of a member in bytes.
    fn member_len(&self, member: usize, path: &std::path::Path) -> Result<u64> {
        file_len(&self.files()[member], path)
    }
    /// Grows a member to `len` bytes, allocating space (ENOSPC surfaces here).
    fn grow_member(&self, member: usize, len: u64, path: &std::path::Path) -> Result<()> {
        grow_file(&self.files()[member], len, path)
    }
    /// Grows a member to `len` bytes without allocating space (a hole, where
    /// the filesystem has them): pages written there allocate then, and
    /// ENOSPC surfaces at that write.
    fn extend_member(&self, member: usize, len: u64, path: &std::path::Path) -> Result<()> {
        let cur = file_len(&self.files()[member], path)?;
        if len <= cur {
            return Ok(());
        }
        self.files()[member].set_len(len).map_err(|e| IoError::Os { path: path.to_path_buf(), source: e })
    }
}

/// Opens a member file with O_DIRECT.
pub(crate) fn open_member(path: &std::path::Path, create: bool, writable: bool) -> Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = std::fs::OpenOptions::new();
    o.read(true).write(writable || create).create_new(create).custom_flags(libc::O_DIRECT | libc::O_CLOEXEC);
    o.open(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            IoError::MissingMember { path: path.to_path_buf() }
        } else {
            IoError::Os { path: path.to_path_buf(), source: e }
        }
    })
}

pub(crate) fn file_len(file: &File, path: &std::path::Path) -> Result<u64> {
    use std::io::Seek;
    // Seek works for block devices too, where metadata().len() is 0.
    let mut f = file;
    f.seek(std::io::SeekFrom::End(0)).map_err(|e| IoError::Os { path: path.to_path_buf(), source: e })
}

pub(crate) fn grow_file(file: &File, len: u64, path: &std::path::Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    let cur = file_len(file, path)?;
    if len <= cur {
        return Ok(());
    }
    // SAFETY: plain syscall on an owned fd.
    let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, cur as i64, (len - cur) as i64) };
    if r == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ENOSPC) => Err(IoError::NoSpace { path: path.to_path_buf(), offset: cur, bytes: len - cur }),
        Some(libc::EOPNOTSUPP) => file.set_len(len).map_err(|e| IoError::Os { path: path.to_path_buf(), source: e }),
        _ => Err(IoError::Os { path: path.to_path_buf(), source: err }),
    }
}

pub(crate) fn sync_file(file: &File, metadata: bool, path: &std::path::Path) -> Result<()> {
    let r = if metadata { file.sync_all() } else { file.sync_data() };
    r.map_err(|e| IoError::Os { path: path.to_path_buf(), source: e })
}
