//! Array replies through shared memory, for a caller on the same host.
//!
//! Sending a sampled batch's ~9 MB over loopback TCP costs the server the
//! kernel's copy into the receiver and the caller the copy out of it. A
//! caller on this host instead creates a file on tmpfs, registers it
//! (`RegisterShm`), and names a slot of it per call (header
//! `solidgraph-shm`); the call's work thread writes each array into the
//! slot, already faulted in on both sides, and the reply holds offsets.
//! A sample's or a Tensor call's feature rows are gathered straight into
//! the slot (`Slot::carve`), so the largest part of a reply is written
//! once, where the caller reads it; smaller arrays are copied in
//! (`Slot::place`).
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
//! does not hold for its connection is answered inline with the reply
//! header `solidgraph-shm: unknown-region`, so that a caller whose server
//! restarted, or whose channel reconnected, registers a region again
//! rather than take every reply inline from then on. A slot is lent to
//! one call at a time (`Region::busy`): a second call naming it while the
//! first writes there is answered inline.

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

use crate::arrays::Out;
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
    /// The slots calls are writing now, as (offset, end): a slot is lent
    /// to one call at a time, so each writes through the only reference to
    /// its bytes in this process.
    busy: Mutex<Vec<(usize, usize)>>,
}

// SAFETY: the mapping is plain memory for the life of `Region`; the server
// writes only slots a caller named, each through one `Slot` at a time.
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
        Ok(Region { ptr: ptr.cast(), len, busy: Mutex::new(Vec::new()) })
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

    /// The slot a request's header names: `Unknown` for a region this
    /// server does not hold for `peer`'s connection, `Busy` for a slot
    /// another call is writing; INVALID_ARGUMENT for a malformed header or
    /// a slot outside its region.
    pub fn slot(&self, peer: SocketAddr, header: &[u8]) -> Result<Lent, Status> {
        let bad = || Status::invalid_argument(format!("the {HEADER} header is not REGION/OFFSET/CAPACITY"));
        let text = std::str::from_utf8(header).map_err(|_| bad())?;
        let mut parts = text.split('/');
        let (Some(name), Some(off), Some(cap), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
            return Err(bad());
        };
        let (offset, capacity): (usize, usize) = (off.parse().map_err(|_| bad())?, cap.parse().map_err(|_| bad())?);
        let held = self.held.lock().expect("the region table's lock is not poisoned");
        let Some(region) = held.0.get(name).filter(|(_, owner)| *owner == peer).map(|(r, _)| r.clone()) else {
            return Ok(Lent::Unknown);
        };
        if !offset.is_multiple_of(ALIGN) || offset.checked_add(capacity).is_none_or(|end| end > region.len) {
            return Err(Status::invalid_argument(format!(
                "shared-memory slot {offset}+{capacity} is not a {ALIGN}-byte aligned part of its region of {} bytes",
                region.len
            )));
        }
        {
            let mut busy = region.busy.lock().expect("the busy list's lock is not poisoned");
            let end = offset + capacity;
            if busy.iter().any(|&(a, z)| a < end && offset < z) {
                // Another call of this connection writes there now: a
                // caller lends a slot to one call at a time, so this one
                // is answered inline.
                return Ok(Lent::Busy);
            }
            busy.push((offset, end));
        }
        Ok(Lent::Slot(Slot { region, offset, capacity }))
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

/// What a request's slot header gets.
pub enum Lent {
    Slot(Slot),
    /// The region is not this connection's (the caller registered it with
    /// an earlier server process, or on another connection): the reply
    /// goes inline and says so (`UNKNOWN`), so the caller can register a
    /// region again.
    Unknown,
    /// Another call writes the slot now: the reply goes inline.
    Busy,
}

/// The reply header (`HEADER: UNKNOWN`) telling a caller its region is
/// not held for this connection.
pub const UNKNOWN: &str = "unknown-region";

/// A caller's slot: `capacity` bytes at `offset` of a region, lent to one
/// call (held in the region's busy list until dropped).
pub struct Slot {
    region: Arc<Region>,
    offset: usize,
    capacity: usize,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut busy = self.region.busy.lock().expect("the busy list's lock is not poisoned");
        if let Some(i) = busy.iter().position(|&(a, _)| a == self.offset) {
            busy.swap_remove(i);
        }
    }
}

/// Bytes `lens` take laid out one after another, each at a multiple of
/// `ALIGN`.
pub fn laid_out(lens: impl IntoIterator<Item = usize>) -> Option<usize> {
    lens.into_iter().try_fold(0usize, |at, n| at.checked_next_multiple_of(ALIGN)?.checked_add(n))
}

impl Slot {
    /// Whether arrays of `lens` bytes fit, laid out as `Carve` lays them.
    pub fn fits(&self, lens: impl IntoIterator<Item = usize>) -> bool {
        laid_out(lens).is_some_and(|n| n <= self.capacity)
    }

    /// The slot's bytes, to be cut into arrays front to back.
    pub fn carve(&mut self) -> Carve<'_> {
        assert!(self.offset + self.capacity <= self.region.len, "the slot was checked against its region");
        // SAFETY: the bytes lie in the mapping (asserted), which lives as
        // long as `self.region`; the busy list lends them to this `Slot`
        // alone, and `&mut self` to one `Carve` at a time. The caller's
        // process does not touch a slot while its call is out.
        let bytes = unsafe { std::slice::from_raw_parts_mut(self.region.ptr.add(self.offset), self.capacity) };
        Carve { rest: bytes, at: self.offset }
    }

    /// Writes `out`'s arrays into the slot, each whole at an aligned
    /// offset, and returns the message that points at them; `out` back
    /// when they do not fit (the reply then goes inline).
    pub fn place(&mut self, out: Out) -> Result<Arrays, Out> {
        if !self.fits(out.arrays().map(|a| a.3.len())) {
            return Err(out);
        }
        let mut carve = self.carve();
        let mut msg = Arrays::default();
        for (name, dtype, shape, data) in out.into_arrays() {
            let (at, dst) = carve.take(data.len()).expect("the arrays fit (checked above)");
            dst.copy_from_slice(&data);
            msg.chunks.push(span(name, dtype, shape, at, data.len()));
        }
        Ok(msg)
    }
}

/// The chunk that says where array `name` lies in the region.
pub fn span(name: String, dtype: &str, shape: Vec<u64>, at: u64, len: usize) -> ArrayChunk {
    ArrayChunk { name, dtype: dtype.into(), shape, offset: 0, data: Default::default(), shm: Some(ShmSpan { offset: at, length: len as u64 }) }
}

/// A slot's bytes handed out front to back, each piece at a multiple of
/// `ALIGN` into the region.
pub struct Carve<'a> {
    rest: &'a mut [u8],
    /// The region offset of `rest`'s first byte.
    at: usize,
}

impl<'a> Carve<'a> {
    /// The next `len` bytes at an aligned offset, and that offset in the
    /// region; None past the slot's end.
    pub fn take(&mut self, len: usize) -> Option<(u64, &'a mut [u8])> {
        let pad = self.at.next_multiple_of(ALIGN) - self.at;
        if pad.checked_add(len)? > self.rest.len() {
            return None;
        }
        let rest = std::mem::take(&mut self.rest);
        let (piece, rest) = rest[pad..].split_at_mut(len);
        self.rest = rest;
        let at = self.at + pad;
        self.at = at + len;
        Some((at as u64, piece))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces are aligned in the region, do not overlap, and stop at the
    /// slot's end; `laid_out` agrees with what `take` hands out.
    #[test]
    fn carve_lays_out_as_fits_says() {
        let mut bytes = vec![0u8; 1000];
        let lens = [3usize, 0, 64, 130, 7];
        let need = laid_out(lens).unwrap();
        assert_eq!(need, 320 + 7);
        let start = 128; // the slot's offset in its region
        let mut carve = Carve { rest: &mut bytes[..need], at: start };
        let mut ends = Vec::new();
        for (k, n) in lens.into_iter().enumerate() {
            let (at, piece) = carve.take(n).unwrap();
            assert_eq!(piece.len(), n);
            assert!(at.is_multiple_of(ALIGN as u64) && at as usize >= ends.last().copied().unwrap_or(start));
            piece.fill(k as u8 + 1);
            ends.push(at as usize + n);
        }
        assert_eq!(*ends.last().unwrap(), start + need);
        assert!(carve.take(1).is_none());
        assert_eq!(&bytes[..4], &[1, 1, 1, 0]);
        assert_eq!((bytes[127], bytes[128], bytes[257], bytes[258]), (3, 4, 4, 0));
        assert_eq!(laid_out([usize::MAX, 1]), None);
    }
}
