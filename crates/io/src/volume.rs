//! A volume: one or more members striped with a fixed stripe unit, read and
//! written in batches of pages.
//!
//! A batch is planned once (Falcon's per-drive processing): each page is
//! mapped to (member, offset), the batch is sorted per member by offset,
//! duplicates dropped, and runs of adjacent pages merged into one I/O of at
//! most `max_io_bytes`. The backend then keeps at most `inflight_per_member`
//! I/Os in flight on each member, queueing the rest.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::backend::posix::PosixBackend;
use crate::backend::sim::{SimBackend, SimDisk};
use crate::backend::uring::{self, UringBackend};
use crate::backend::{Backend, BackendKind, ExecCtx, IoOp, open_member};
use crate::buf::{ALIGN, BufferPool, Chunk};
use crate::error::{IoError, Result};
use crate::stats::{MemberCounters, MemberStats};
use crate::sync::MutexExt;

/// Smallest pooled read chunk: a batch of single-page reads packs 64 pages
/// into one chunk, so the registered (fixed) buffers cover whole batches.
const MIN_CHUNK_BYTES: usize = 256 * 1024;

/// Largest stripe unit: a row's bytes (unit x page size) then fit in a
/// u64 with room for the member count (a damaged superblock's unit made
/// the row wrap to 0, a division by zero at open).
const MAX_STRIPE_PAGES: u64 = 1 << 24;

fn chunk_bytes(opts: &VolumeOptions) -> usize {
    opts.max_io_bytes.max(MIN_CHUNK_BYTES)
}

/// How to choose the backend.
#[derive(Clone, Default)]
pub enum BackendChoice {
    /// `SOLIDGRAPH_IO_BACKEND` if set, else io_uring if the kernel allows it,
    /// else POSIX.
    #[default]
    Auto,
    Force(BackendKind),
    /// In-memory simulated disk; member paths are only names.
    Sim(Arc<SimDisk>),
}

#[derive(Clone)]
pub struct VolumeOptions {
    pub page_size: usize,
    /// Stripe unit in pages.
    pub stripe_pages: u64,
    pub backend: BackendChoice,
    pub inflight_per_member: usize,
    /// Largest merged I/O. Reads land in pooled chunks of this size, or of
    /// 256 KiB when that is larger (many small I/Os share one chunk).
    pub max_io_bytes: usize,
    /// Unwanted pages a read may span to join two wanted runs into one
    /// I/O. An I/O costs the device far more than one more page in it, and
    /// the kernel's CPU per I/O is spent once, so bridging a few pages
    /// costs less than a second I/O (figures: docs/PERFORMANCE.md, I/O).
    /// 0 merges adjacent pages only.
    pub read_gap_pages: usize,
    /// Batches of at most this many I/Os skip the thread hand-off (POSIX).
    pub inline_watermark: usize,
    /// Chunks registered with io_uring as fixed buffers. The default, 64
    /// (16 MiB), covers two threads' batches of 4096 pages (the sampler's
    /// and the tensor gather's parts): a read into an unregistered chunk
    /// pins its pages in the kernel per I/O, and chunks past the pool's
    /// spares are allocated and freed per batch.
    pub registered_chunks: usize,
    pub posix_threads: usize,
    pub writable: bool,
}

impl std::fmt::Debug for BackendChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BackendChoice::Auto => f.write_str("Auto"),
            BackendChoice::Force(k) => write!(f, "Force({})", k.name()),
            BackendChoice::Sim(_) => f.write_str("Sim"),
        }
    }
}

impl Default for VolumeOptions {
    fn default() -> Self {
        VolumeOptions {
            page_size: 4096,
            stripe_pages: 64,
            backend: BackendChoice::Auto,
            inflight_per_member: 64,
            max_io_bytes: 256 * 1024,
            read_gap_pages: 4,
            inline_watermark: 1,
            registered_chunks: 64,
            posix_threads: 64,
            writable: false,
        }
    }
}

impl VolumeOptions {
    fn check(&self) -> Result<()> {
        let ps = self.page_size;
        if !(4096..=65536).contains(&ps) || !ps.is_power_of_two() {
            return Err(IoError::Config(format!("page size {ps} must be a power of two in 4096..=65536")));
        }
        if self.stripe_pages == 0 || self.stripe_pages > MAX_STRIPE_PAGES {
            return Err(IoError::Config(format!("stripe unit of {} pages must be in 1..={MAX_STRIPE_PAGES}", self.stripe_pages)));
        }
        if self.inflight_per_member == 0 || self.inflight_per_member > 4096 {
            return Err(IoError::Config(format!("in-flight cap {} must be in 1..=4096", self.inflight_per_member)));
        }
        if self.max_io_bytes < ps || !self.max_io_bytes.is_multiple_of(ps) || self.max_io_bytes > (64 << 20) {
            return Err(IoError::Config(format!("max I/O size {} must be a multiple of the page size ({ps}) up to 64 MiB", self.max_io_bytes)));
        }
        Ok(())
    }
}

/// Logical page <-> (member, byte offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stripe {
    pub members: u64,
    pub unit: u64,
    pub page_size: u64,
}

impl Stripe {
    pub fn locate(&self, page: u64) -> (usize, u64) {
        let stripe = page / self.unit;
        let member = stripe % self.members;
        let member_page = (stripe / self.members) * self.unit + page % self.unit;
        (member as usize, member_page * self.page_size)
    }

    pub fn page_of(&self, member: usize, offset: u64) -> u64 {
        let member_page = offset / self.page_size;
        let stripe = (member_page / self.unit) * self.members + member as u64;
        stripe * self.unit + member_page % self.unit
    }

    /// Bytes of one stripe row on one member; member sizes are multiples of it.
    pub fn row_bytes(&self) -> u64 {
        self.unit * self.page_size
    }
}

pub struct Volume {
    paths: Vec<PathBuf>,
    stripe: Stripe,
    opts: VolumeOptions,
    backend: Box<dyn Backend>,
    pool: Arc<BufferPool>,
    counters: Vec<MemberCounters>,
    num_pages: AtomicU64,
    grow_lock: Mutex<()>,
}

/// Pages read by one batch. `page(i)` is the i-th requested page; duplicate
/// requests share one copy. Buffers go back to the pool on drop.
pub struct Pages {
    chunks: Vec<Chunk>,
    slot_of: Vec<u32>,
    page_size: usize,
    pages_per_chunk: usize,
    pool: Arc<BufferPool>,
}

impl Pages {
    pub fn len(&self) -> usize {
        self.slot_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slot_of.is_empty()
    }

    pub fn page(&self, i: usize) -> &[u8] {
        let s = self.slot_of[i] as usize;
        let c = &self.chunks[s / self.pages_per_chunk];
        let o = (s % self.pages_per_chunk) * self.page_size;
        &c.buf[o..o + self.page_size]
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        self.pool.give_back(&mut self.chunks);
    }
}

impl Volume {
    /// Creates the members (they must not exist) with `pages` logical pages
    /// in all, rounded up to whole stripe rows.
    pub fn create(paths: &[PathBuf], pages: u64, opts: VolumeOptions) -> Result<Volume> {
        opts.check()?;
        let mut opts = opts;
        opts.writable = true;
        let files = match &opts.backend {
            BackendChoice::Sim(_) => Vec::new(),
            _ => paths.iter().map(|p| open_member(p, true, true)).collect::<Result<Vec<_>>>()?,
        };
        let v = Self::assemble(paths, files, opts)?;
        v.grow_to(pages)?;
        Ok(v)
    }

    /// Opens existing members; all must exist with the same size, a whole
    /// number of stripe rows.
    pub fn open(paths: &[PathBuf], opts: VolumeOptions) -> Result<Volume> {
        opts.check()?;
        let files = match &opts.backend {
            BackendChoice::Sim(_) => Vec::new(),
            _ => paths.iter().map(|p| open_member(p, false, opts.writable)).collect::<Result<Vec<_>>>()?,
        };
        let v = Self::assemble(paths, files, opts)?;
        let row = v.stripe.row_bytes();
        let mut size = None;
        for (m, p) in v.paths.iter().enumerate() {
            let len = v.backend.member_len(m, p)?;
            if len % row != 0 {
                return Err(IoError::UnalignedSize { path: p.clone(), size: len, row });
            }
            match size {
                None => size = Some(len),
                Some(s) if s != len => return Err(IoError::MemberSize { path: p.clone(), actual: len, expected: s }),
                Some(_) => {}
            }
        }
        let per_member = size.unwrap_or(0) / v.stripe.page_size;
        v.num_pages.store(per_member * v.stripe.members, Ordering::Release);
        Ok(v)
    }

    fn assemble(paths: &[PathBuf], files: Vec<std::fs::File>, opts: VolumeOptions) -> Result<Volume> {
        if paths.is_empty() {
            return Err(IoError::Config("a volume needs at least one member".into()));
        }
        // Registered chunks exist for io_uring's fixed buffers; the simulated
        // disk has no ring, so its chunks come on demand (a fuzz input or a
        // crash trial opens a store each time, and zeroing 64 chunks per
        // open was most of its cost).
        let registered = if matches!(opts.backend, BackendChoice::Sim(_)) { 0 } else { opts.registered_chunks };
        let pool = Arc::new(BufferPool::new(chunk_bytes(&opts), registered, 64));
        let backend: Box<dyn Backend> = match &opts.backend {
            BackendChoice::Sim(disk) => {
                if disk.members() != paths.len() {
                    return Err(IoError::Config(format!("simulated disk has {} members, volume names {}", disk.members(), paths.len())));
                }
                Box::new(SimBackend { disk: disk.clone() })
            }
            choice => {
                let kind = match choice {
                    BackendChoice::Force(k) => Some(*k),
                    _ => match std::env::var("SOLIDGRAPH_IO_BACKEND") {
                        Ok(s) if !s.is_empty() => Some(s.parse()?),
                        _ => None,
                    },
                };
                let entries = (opts.inflight_per_member * paths.len()).clamp(8, 4096).next_power_of_two() as u32;
                let want_uring = kind != Some(BackendKind::Posix);
                let uring = if want_uring {
                    match uring::probe().map_err(IoError::UringUnavailable) {
                        Ok(()) => {
                            let fs = files.iter().map(|f| f.try_clone()).collect::<std::io::Result<Vec<_>>>();
                            let fs = fs.map_err(|e| IoError::Os { path: paths[0].clone(), source: e })?;
                            UringBackend::new(fs, entries, pool.registered().to_vec()).map(Some)
                        }
                        Err(e) => Err(e),
                    }
                } else {
                    Ok(None)
                };
                match uring {
                    Ok(Some(u)) => {
                        log::info!("I/O backend: io_uring ({} members)", paths.len());
                        Box::new(u)
                    }
                    Err(e) if kind == Some(BackendKind::Uring) => return Err(e),
                    other => {
                        if let Err(e) = other {
                            log::warn!("{e}; falling back to the POSIX backend");
                        }
                        log::info!("I/O backend: posix ({} threads)", opts.posix_threads);
                        let p = PosixBackend::new(files, opts.posix_threads).map_err(|e| IoError::Os { path: paths[0].clone(), source: e })?;
                        Box::new(p)
                    }
                }
            }
        };
        Ok(Volume {
            paths: paths.to_vec(),
            stripe: Stripe { members: paths.len() as u64, unit: opts.stripe_pages, page_size: opts.page_size as u64 },
            backend,
            pool,
            counters: paths.iter().map(|_| MemberCounters::new()).collect(),
            num_pages: AtomicU64::new(0),
            grow_lock: Mutex::new(()),
            opts,
        })
    }

    pub fn backend(&self) -> BackendKind {
        self.backend.kind()
    }

    pub fn page_size(&self) -> usize {
        self.opts.page_size
    }

    pub fn num_pages(&self) -> u64 {
        self.num_pages.load(Ordering::Acquire)
    }

    pub fn stripe(&self) -> Stripe {
        self.stripe
    }

    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Grows the volume to at least `pages` pages (whole stripe rows on every
    /// member), allocating their space. Pages already there are untouched;
    /// readers may go on.
    pub fn grow_to(&self, pages: u64) -> Result<()> {
        self.grow(pages, true)
    }

    /// `grow_to` without allocating: the new pages are a hole until written
    /// (where the filesystem has holes), so a region laid out now and
    /// written later takes no disk meanwhile; a later `grow_to` allocates
    /// only past it.
    pub fn reserve(&self, pages: u64) -> Result<()> {
        self.grow(pages, false)
    }

    fn grow(&self, pages: u64, allocate: bool) -> Result<()> {
        let _g = self.grow_lock.locked();
        if pages <= self.num_pages() {
            return Ok(());
        }
        let row_pages = self.stripe.unit * self.stripe.members;
        let rows = pages.div_ceil(row_pages);
        let member_len = rows * self.stripe.row_bytes();
        for (m, p) in self.paths.iter().enumerate() {
            if allocate {
                self.backend.grow_member(m, member_len, p)?;
            } else {
                self.backend.extend_member(m, member_len, p)?;
            }
        }
        self.num_pages.store(rows * row_pages, Ordering::Release);
        Ok(())
    }

    /// (member, offset, request index) of every page, sorted: each member's
    /// requests form one run in offset order.
    fn plan(&self, pages: &[u64]) -> Result<Vec<(u32, u64, u32)>> {
        let n = self.num_pages();
        let mut order: Vec<(u32, u64, u32)> = Vec::with_capacity(pages.len());
        for (i, &p) in pages.iter().enumerate() {
            if p >= n {
                return Err(IoError::PastEnd { page: p, num_pages: n });
            }
            let (m, off) = self.stripe.locate(p);
            order.push((m as u32, off, i as u32));
        }
        order.sort_unstable();
        Ok(order)
    }

    /// Reads a batch of pages in one go.
    pub fn read(&self, pages: &[u64]) -> Result<Pages> {
        let ps = self.opts.page_size;
        let ppc = chunk_bytes(&self.opts) / ps;
        let order = self.plan(pages)?;
        let mut slot_of = vec![0u32; pages.len()];
        let mut slots = 0usize;
        let mut ops: Vec<IoOp> = Vec::new();
        let mut by_member: Vec<Range<usize>> = vec![0..0; self.paths.len()];
        let mut chunks = Vec::new();
        let mut last: Option<(u32, u64)> = None;
        // Gap pages in this batch: at most one per requested page, so a
        // batch's buffers stay within twice its pages.
        let mut bridged = 0;
        for &(m, off, i) in &order {
            if last == Some((m, off)) {
                slot_of[i as usize] = (slots - 1) as u32;
                continue;
            }
            // Extend the previous op to this page when it is on the same
            // member at most `read_gap_pages` pages on and its slot stays in
            // the op's chunk: the pages between are read into slots nobody
            // names (slots of one member are consecutive).
            let gap = match (last, ops.last()) {
                (Some((lm, loff)), Some(op)) if lm == m => {
                    let g = ((off - loff) / ps as u64 - 1) as usize;
                    let fits = (slots + g) / ppc == (slots - 1) / ppc && op.len as usize + (g + 1) * ps <= self.opts.max_io_bytes;
                    (g <= self.opts.read_gap_pages && fits && bridged + g <= pages.len()).then_some(g)
                }
                _ => None,
            };
            let s = slots + gap.unwrap_or(0);
            slots = s + 1;
            slot_of[i as usize] = s as u32;
            if let Some(g) = gap {
                bridged += g;
                ops.last_mut().expect("a gap implies an op").len += ((g + 1) * ps) as u32;
                self.counters[m as usize].record_merged(1, g as u64);
            } else {
                if s.is_multiple_of(ppc) {
                    self.pool.take(s / ppc + 1, &mut chunks);
                }
                let chunk = &mut chunks[s / ppc];
                let ptr = unsafe { chunk.buf.as_mut_ptr().add((s % ppc) * ps) };
                if by_member[m as usize].is_empty() {
                    by_member[m as usize] = ops.len()..ops.len();
                }
                ops.push(IoOp { member: m, write: false, reg: chunk.reg, len: ps as u32, offset: off, buf: ptr });
            }
            by_member[m as usize].end = ops.len();
            last = Some((m, off));
        }
        let result = Pages { chunks, slot_of, page_size: ps, pages_per_chunk: ppc, pool: self.pool.clone() };
        self.execute(&ops, &by_member)?;
        Ok(result)
    }

    /// Writes pages; `data` holds them back to back in the order of `pages`
    /// and must be aligned to 4096. A page may appear once per batch.
    pub fn write(&self, pages: &[u64], data: &[u8]) -> Result<()> {
        let ps = self.opts.page_size;
        if !self.opts.writable {
            return Err(IoError::BadWrite("volume is open read-only".into()));
        }
        if data.len() != pages.len() * ps {
            return Err(IoError::BadWrite(format!("{} bytes of data for {} pages of {ps}", data.len(), pages.len())));
        }
        if !(data.as_ptr() as usize).is_multiple_of(ALIGN) {
            return Err(IoError::BadWrite("data buffer is not 4096-aligned (use AlignedBuf)".into()));
        }
        let order = self.plan(pages)?;
        let mut ops: Vec<IoOp> = Vec::new();
        let mut by_member: Vec<Range<usize>> = vec![0..0; self.paths.len()];
        let mut last: Option<(u32, u64, u32)> = None;
        let base = data.as_ptr() as *mut u8;
        for &(m, off, i) in &order {
            if let Some((lm, loff, _)) = last
                && lm == m
                && loff == off
            {
                return Err(IoError::BadWrite(format!("page {} appears twice in one write batch", pages[i as usize])));
            }
            // Merge when adjacent on the member and adjacent in `data`.
            let merge = match (last, ops.last()) {
                (Some((lm, loff, li)), Some(op)) => lm == m && loff + ps as u64 == off && li + 1 == i && (op.len as usize) < self.opts.max_io_bytes,
                _ => false,
            };
            if merge {
                ops.last_mut().expect("merge implies an op").len += ps as u32;
                self.counters[m as usize].record_merged(1, 0);
            } else {
                if by_member[m as usize].is_empty() {
                    by_member[m as usize] = ops.len()..ops.len();
                }
                // SAFETY: i < pages.len() and data holds pages.len() pages.
                let ptr = unsafe { base.add(i as usize * ps) };
                ops.push(IoOp { member: m, write: true, reg: None, len: ps as u32, offset: off, buf: ptr });
            }
            by_member[m as usize].end = ops.len();
            last = Some((m, off, i));
        }
        self.execute(&ops, &by_member)
    }

    fn execute(&self, ops: &[IoOp], by_member: &[Range<usize>]) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let ctx = ExecCtx { cap: self.opts.inflight_per_member, inline_watermark: self.opts.inline_watermark, paths: &self.paths, counters: &self.counters };
        self.backend.execute(ops, by_member, &ctx)
    }

    /// fdatasync every member (fsync when `metadata`, e.g. after growing).
    pub fn sync(&self, metadata: bool) -> Result<()> {
        for (m, p) in self.paths.iter().enumerate() {
            self.backend.sync(m, metadata, p)?;
        }
        Ok(())
    }

    pub fn stats(&self) -> Vec<MemberStats> {
        self.counters.iter().map(|c| c.snapshot()).collect()
    }

    pub fn reset_stats(&self) {
        self.counters.iter().for_each(|c| c.reset());
    }

    pub fn path(&self, member: usize) -> &Path {
        &self.paths[member]
    }
}
