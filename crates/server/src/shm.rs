//! Array replies through shared memory, for a caller on the same host.
//!
//! Sending a sampled batch's ~9 MB over loopback TCP costs the server the
//! kernel's copy into the receiver and the caller the copy out of it. A
//! caller on this host instead creates a file on tmpfs, registers it
//! (`RegisterShm`), and names a slot of it per call (header
//! `solidgraph-shm`); the server copies each array into the slot, already
//! faulted in on both sides, and replies with offsets.
//!
//! Trust: a region is accepted only when `solidgraph serve --shm` allows
//! it, from a loopback peer, for a regular file on tmpfs (opened without
//! following a symlink) owned by the server's user with no group or other
//! permissions, of at most `max_shm_bytes`, whose first bytes are the
//! cookie the caller sends (so the caller can read the file: naming a path
//! is not enough). Whoever passes these checks runs as the server's user,
//! who can already signal or trace it; such a caller could also truncate
//! the file under the server's mapping (SIGBUS on the next write), which
//! is why no other user's file is ever mapped.
//!
//! Lifetime: a region belongs to the connection that registered it, and
//! only calls on that connection may name it. The server maps the file
//! once (populated) and keeps it until `ReleaseShm`, the connection's end
//! (`Conn` drops its regions), or more than `max_regions` are held (the
//! oldest goes first); the caller unlinks the file once registered, so the
//! memory goes when both mappings do. A request naming a region the server
//! does not hold for its connection is answered inline.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::Read;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tonic::Status;

use crate::proto::{ArrayChunk, Arrays, ShmSpan};

/// The request header naming a slot: "REGION/OFFSET/CAPACITY".
pub const HEADER: &str = "solidgraph-shm";
/// Each array starts at a multiple of this many bytes into the region.
pub const ALIGN: usize = 64;
/// Cookie lengths accepted.
const COOKIE: std::ops::RangeInclusive<usize> = 16..=64;
/// tmpfs's `f_type` (linux/magic.h).
const TMPFS_MAGIC: i64 = 0x0102_1994;

/// The shared-memory settings of a server.
#[derive(Debug, Clone)]
pub struct ShmOptions {
    /// Whether callers may register regions at all (`serve --shm`).
    pub enabled: bool,
    /// Largest region.
    pub max_bytes: usize,
    /// Most regions held; registering one more drops the oldest.
    pub max_regions: usize,
}

impl Default for ShmOptions {
    fn default() -> Self {
        ShmOptions { enabled: false, max_bytes: 1 << 30, max_regions: 64 }
    }
}

/// A region mapped shared and writable.
pub struct Region {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory for the life of `Region`; the server
// only writes slots a caller named, with `copy_nonoverlapping`.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: ptr/len are the mapping made in `map`, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

impl Region {
    fn map(file: &File, len: usize) -> Result<Region, Status> {
        // SAFETY: a fresh shared mapping of a file checked to be `len` bytes.
        let ptr =
            unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_POPULATE, file.as_raw_fd(), 0) };
        if ptr == libc::MAP_FAILED {
            return Err(Status::resource_exhausted(format!("mapping the region: {}", std::io::Error::last_os_error())));
        }
        Ok(Region { ptr: ptr.cast(), len })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes while `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// The regions registered with this server.
pub struct ShmRegions {
    opts: ShmOptions,
    held: Mutex<Held>,
}

/// The regions by name with the connection (peer) that owns each, and
/// their names oldest first.
type Held = (HashMap<String, (Arc<Region>, SocketAddr)>, VecDeque<String>);

impl ShmRegions {
    pub fn new(opts: ShmOptions) -> ShmRegions {
        ShmRegions { opts, held: Mutex::new((HashMap::new(), VecDeque::new())) }
    }

    /// Checks and maps the caller's file; returns the region's name.
    pub fn register(&self, peer: Option<SocketAddr>, path: &str, size: u64, cookie: &[u8]) -> Result<String, Status> {
        if !self.opts.enabled {
            return Err(Status::failed_precondition("this server does not serve shared memory (solidgraph serve --shm)"));
        }
        let Some(peer) = peer.filter(|p| p.ip().is_loopback()) else {
            return Err(Status::failed_precondition("shared memory is for callers on the server's host (a loopback connection)"));
        };
        let bad = |why: String| Status::invalid_argument(format!("shared-memory region {path:?}: {why}"));
        if !COOKIE.contains(&cookie.len()) {
            return Err(bad(format!("a cookie of {} bytes, not {}-{}", cookie.len(), COOKIE.start(), COOKIE.end())));
        }
        let len = usize::try_from(size).ok().filter(|&s| s >= cookie.len() && s <= self.opts.max_bytes);
        let Some(len) = len else {
            return Err(bad(format!("{size} bytes; a region holds its cookie and at most {} bytes", self.opts.max_bytes)));
        };
        if !path.starts_with('/') {
            return Err(bad("the path is not absolute".into()));
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| bad(format!("cannot open it: {e}")))?;
        check_file(&file, len).map_err(bad)?;
        if check_owner(&file).is_err() {
            return Err(Status::failed_precondition(format!("shared-memory region {path:?}: not owned by the server's user with mode 0600")));
        }
        let mut head = vec![0u8; cookie.len()];
        (&file).read_exact(&mut head).map_err(|e| bad(format!("reading its cookie: {e}")))?;
        if head != cookie {
            return Err(bad("its first bytes are not the cookie sent".into()));
        }
        let region = Arc::new(Region::map(&file, len)?);
        debug_assert_eq!(&region.bytes()[..cookie.len()], cookie);
        let name = random_name().map_err(|e| Status::internal(format!("naming the region: {e}")))?;
        let mut held = self.held.lock().expect("the region table's lock is not poisoned");
        held.0.insert(name.clone(), (region, peer));
        held.1.push_back(name.clone());
        while held.1.len() > self.opts.max_regions {
            let old = held.1.pop_front().expect("longer than max_regions");
            held.0.remove(&old);
        }
        Ok(name)
    }

    /// Drops region `name` if `peer`'s connection owns it.
    pub fn release(&self, peer: Option<SocketAddr>, name: &str) {
        let mut held = self.held.lock().expect("the region table's lock is not poisoned");
        if held.0.get(name).is_some_and(|(_, owner)| Some(*owner) == peer) {
            held.0.remove(name);
            held.1.retain(|n| n != name);
        }
    }

    /// Drops every region of the connection from `peer`, which has ended.
    fn release_peer(&self, peer: SocketAddr) {
        let mut held = self.held.lock().expect("the region table's lock is not poisoned");
        let (map, order) = &mut *held;
        map.retain(|_, (_, owner)| *owner != peer);
        order.retain(|n| map.contains_key(n));
    }

    /// The slot a request's header names: None for a region this server
    /// does not hold; INVALID_ARGUMENT for a malformed header or a slot
    /// outside its region.
    pub fn slot(&self, peer: SocketAddr, header: &[u8]) -> Result<Option<Slot>, Status> {
        let bad = || Status::invalid_argument(format!("the {HEADER} header is not REGION/OFFSET/CAPACITY"));
        let text = std::str::from_utf8(header).map_err(|_| bad())?;
        let mut parts = text.split('/');
        let (Some(name), Some(off), Some(cap), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(bad());
        };
        let (offset, capacity): (usize, usize) = (off.parse().map_err(|_| bad())?, cap.parse().map_err(|_| bad())?);
        let held = self.held.lock().expect("the region table's lock is not poisoned");
        let Some(region) = held.0.get(name).filter(|(_, owner)| *owner == peer).map(|(r, _)| r.clone()) else {
            return Ok(None);
        };
        if !offset.is_multiple_of(ALIGN) || offset.checked_add(capacity).is_none_or(|end| end > region.len) {
            return Err(Status::invalid_argument(format!(
                "shared-memory slot {offset}+{capacity} is not a {ALIGN}-byte aligned part of its region of {} bytes",
                region.len
            )));
        }
        Ok(Some(Slot { region, offset, capacity }))
    }
}

fn check_file(file: &File, len: usize) -> Result<(), String> {
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.file_type().is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() != len as u64 {
        return Err(format!("the file holds {} bytes, not the {len} sent", meta.len()));
    }
    // SAFETY: fstatfs fills `fs` for an open descriptor.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut fs) } != 0 {
        return Err(format!("fstatfs: {}", std::io::Error::last_os_error()));
    }
    if fs.f_type as i64 != TMPFS_MAGIC {
        return Err("not on tmpfs (/dev/shm)".into());
    }
    Ok(())
}

fn check_owner(file: &File) -> Result<(), ()> {
    let meta = file.metadata().map_err(|_| ())?;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me || meta.mode() & 0o077 != 0 { Err(()) } else { Ok(()) }
}

/// 128 random bits as hex: a region's name, not guessable by another caller.
fn random_name() -> std::io::Result<String> {
    let mut b = [0u8; 16];
    File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// A caller's slot: `capacity` bytes at `offset` of a region.
pub struct Slot {
    region: Arc<Region>,
    offset: usize,
    capacity: usize,
}

impl Slot {
    /// Writes the reply's arrays into the slot, each whole at an aligned
    /// offset, and returns the one message that points at them; None when
    /// they do not fit (the reply then goes inline).
    pub fn place(&self, msgs: &[Arrays]) -> Option<Arrays> {
        // Each array's place: its chunks arrive in order, each at its byte offset.
        let mut out: Vec<ArrayChunk> = Vec::new();
        let mut at = 0usize;
        for c in msgs.iter().flat_map(|m| &m.chunks).filter(|c| !c.name.is_empty()) {
            if out.last().is_none_or(|l| l.name != c.name) {
                at = at.next_multiple_of(ALIGN);
                out.push(ArrayChunk {
                    name: c.name.clone(),
                    dtype: c.dtype.clone(),
                    shape: c.shape.clone(),
                    offset: 0,
                    data: Default::default(),
                    shm: Some(ShmSpan { offset: (self.offset + at) as u64, length: 0 }),
                });
            }
            let span = out.last_mut().and_then(|l| l.shm.as_mut()).expect("pushed above");
            if c.offset != span.length {
                return None; // chunks out of order: not a reply `Out` makes
            }
            span.length += c.data.len() as u64;
            at += c.data.len();
        }
        if at > self.capacity {
            return None;
        }
        let mut chunks = out.iter();
        let mut cur = chunks.next();
        for c in msgs.iter().flat_map(|m| &m.chunks).filter(|c| !c.name.is_empty()) {
            while cur.is_some_and(|o| o.name != c.name) {
                cur = chunks.next();
            }
            let span = cur.and_then(|o| o.shm.as_ref()).expect("every chunk's array was laid out");
            let dst = span.offset as usize + c.offset as usize;
            assert!(dst + c.data.len() <= self.region.len, "the slot was checked against its region");
            // SAFETY: dst..dst + len lies in the mapping (asserted); the
            // source is the reply's own memory.
            unsafe { std::ptr::copy_nonoverlapping(c.data.as_ptr(), self.region.ptr.add(dst), c.data.len()) };
        }
        Some(Arrays { chunks: out })
    }
}

/// An accepted connection that drops its peer's regions when it ends.
pub struct Conn {
    stream: tokio::net::TcpStream,
    peer: Option<SocketAddr>,
    regions: Arc<ShmRegions>,
}

impl Conn {
    pub fn new(stream: tokio::net::TcpStream, regions: Arc<ShmRegions>) -> Conn {
        let peer = stream.peer_addr().ok();
        Conn { stream, peer, regions }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(p) = self.peer {
            self.regions.release_peer(p);
        }
    }
}

impl tonic::transport::server::Connected for Conn {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        tonic::transport::server::Connected::connect_info(&self.stream)
    }
}

impl tokio::io::AsyncRead for Conn {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Conn {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[std::io::IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
