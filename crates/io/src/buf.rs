//! Aligned buffers and the chunk pool that batches read into.
//!
//! O_DIRECT needs every buffer aligned to the device's logical block; 4096 is
//! safe on every device we meet. Reads land in fixed-size chunks taken from a
//! pool, so the hot path allocates nothing once the pool is warm. The first
//! `registered` chunks are registered with every io_uring ring (fixed
//! buffers); a merged I/O never crosses a chunk, so each I/O names one
//! registered buffer.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::ptr::NonNull;
use std::sync::Mutex;

use crate::sync::MutexExt;

pub const ALIGN: usize = 4096;

/// A heap buffer aligned to [`ALIGN`], zero-initialised.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: AlignedBuf owns its allocation exclusively, like Vec<u8>.
unsafe impl Send for AlignedBuf {}
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// `len` is rounded up to a multiple of [`ALIGN`] for the allocation but
    /// the slice has exactly `len` bytes.
    pub fn zeroed(len: usize) -> AlignedBuf {
        let cap = len.max(1).div_ceil(ALIGN) * ALIGN;
        let layout = Layout::from_size_align(cap, ALIGN).expect("aligned layout");
        // SAFETY: layout has non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl std::ops::Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes for the life of self.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let cap = self.len.max(1).div_ceil(ALIGN) * ALIGN;
        let layout = Layout::from_size_align(cap, ALIGN).expect("aligned layout");
        // SAFETY: allocated in `zeroed` with this same layout.
        unsafe { dealloc(self.ptr.as_ptr(), layout) }
    }
}

/// A pooled chunk. `reg` is its fixed-buffer index when registered.
pub(crate) struct Chunk {
    pub(crate) buf: AlignedBuf,
    pub(crate) reg: Option<u16>,
}

/// Pool of equally sized chunks. Chunks beyond the registered set are
/// allocated on demand and kept for reuse up to `spare_limit`.
pub(crate) struct BufferPool {
    pub(crate) chunk_bytes: usize,
    /// Free chunks: registered ones first in preference, then spares.
    free: Mutex<(Vec<Chunk>, Vec<Chunk>)>,
    /// Addresses of the registered chunks, for ring registration.
    registered: Vec<(usize, usize)>,
    spare_limit: usize,
}

impl BufferPool {
    pub(crate) fn new(chunk_bytes: usize, registered: usize, spare_limit: usize) -> BufferPool {
        assert!(chunk_bytes.is_multiple_of(ALIGN) && chunk_bytes > 0);
        assert!(registered <= u16::MAX as usize);
        let mut free = Vec::with_capacity(registered);
        let mut regs = Vec::with_capacity(registered);
        for i in 0..registered {
            let buf = AlignedBuf::zeroed(chunk_bytes);
            regs.push((buf.as_ptr() as usize, chunk_bytes));
            free.push(Chunk { buf, reg: Some(i as u16) });
        }
        BufferPool { chunk_bytes, free: Mutex::new((free, Vec::new())), registered: regs, spare_limit }
    }

    /// (address, length) of every registered chunk, in index order.
    pub(crate) fn registered(&self) -> &[(usize, usize)] {
        &self.registered
    }

    pub(crate) fn take(&self, n: usize, out: &mut Vec<Chunk>) {
        let mut guard = self.free.locked();
        let (reg, spare) = &mut *guard;
        while out.len() < n {
            match reg.pop().or_else(|| spare.pop()) {
                Some(c) => out.push(c),
                None => break,
            }
        }
        drop(guard);
        while out.len() < n {
            out.push(Chunk { buf: AlignedBuf::zeroed(self.chunk_bytes), reg: None });
        }
    }

    pub(crate) fn give_back(&self, chunks: &mut Vec<Chunk>) {
        let mut guard = self.free.locked();
        let (reg, spare) = &mut *guard;
        for c in chunks.drain(..) {
            // Registered chunks always return: the rings point at them.
            if c.reg.is_some() {
                reg.push(c);
            } else if spare.len() < self.spare_limit {
                spare.push(c);
            }
        }
    }
}
