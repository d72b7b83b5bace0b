//! io_uring backend: O_DIRECT files registered with each ring, chunk buffers
//! registered as fixed buffers, one ring per submitting thread (rings are
//! pooled, a thread takes one for the length of a batch), completions in any
//! order, per-member in-flight caps with the rest of the member's ops queued.

use std::fs::File;
use std::ops::Range;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Mutex;
use std::time::Instant;

use io_uring::{IoUring, opcode, types};

use super::{Backend, BackendKind, ExecCtx, IoOp};
use crate::error::{IoError, Result};
use crate::sync::MutexExt;

/// Ops per io_uring_enter when refilling. Handing the device a few requests
/// at a time as slots free up, as fio does by default, keeps its queue
/// steady; one submit per wake-up with every refill in it sends bursts that
/// go to the device together and come back together, which costs IOPS on
/// virtio disks (docs/PERFORMANCE.md, I/O). Two per call also stays under
/// the block layer's plugging threshold.
const SUBMIT_GROUP: usize = 2;

struct Ring {
    ring: IoUring,
    fixed_bufs: bool,
    /// Per-op scratch, reused across batches: submission time and bytes done.
    started: Vec<Instant>,
    done: Vec<u32>,
    next: Vec<usize>,
    inflight: Vec<usize>,
    /// Ops pushed since the last submit; they get one shared start time.
    fresh: Vec<usize>,
    retry: Vec<usize>,
    /// Completions reaped in one wake-up, per member, recorded together.
    tally: Vec<Tally>,
}

#[derive(Default)]
struct Tally {
    read: u64,
    written: u64,
    lat_ns: Vec<u64>,
}

pub(crate) struct UringBackend {
    files: Vec<File>,
    fds: Vec<RawFd>,
    rings: Mutex<Vec<Ring>>,
    entries: u32,
    registered: Vec<(usize, usize)>,
}

/// Checks that this process may create a ring at all (seccomp profiles and
/// `io_uring_disabled` refuse it).
pub(crate) fn probe() -> std::result::Result<(), String> {
    IoUring::new(2).map(|_| ()).map_err(|e| e.to_string())
}

impl UringBackend {
    pub(crate) fn new(files: Vec<File>, entries: u32, registered: Vec<(usize, usize)>) -> Result<UringBackend> {
        let fds = files.iter().map(|f| f.as_raw_fd()).collect();
        let b = UringBackend { files, fds, rings: Mutex::new(Vec::new()), entries, registered };
        // Build one ring now so a refusal surfaces at open, not mid-query.
        let ring = b.new_ring()?;
        b.rings.locked().push(ring);
        Ok(b)
    }

    fn new_ring(&self) -> Result<Ring> {
        // COOP_TASKRUN: completions are run when we enter the kernel anyway
        // (we always wait in io_uring_enter), so skip the interrupting IPI.
        // Kernels before 5.19 refuse the flag; build a plain ring there.
        let ring = match IoUring::builder().setup_coop_taskrun().build(self.entries) {
            Ok(r) => r,
            Err(_) => IoUring::new(self.entries).map_err(|e| IoError::UringUnavailable(e.to_string()))?,
        };
        ring.submitter().register_files(&self.fds).map_err(|e| IoError::UringUnavailable(format!("register_files: {e}")))?;
        let iov: Vec<libc::iovec> = self.registered.iter().map(|&(p, l)| libc::iovec { iov_base: p as *mut libc::c_void, iov_len: l }).collect();
        // SAFETY: the chunks live in the volume's buffer pool for as long as the
        // backend (and so every ring) lives; they are never freed before it.
        let fixed_bufs = iov.is_empty() || unsafe { ring.submitter().register_buffers(&iov) }.is_ok();
        if !fixed_bufs {
            log::warn!("io_uring: could not register buffers, using plain reads");
        }
        Ok(Ring {
            ring,
            fixed_bufs: fixed_bufs && !iov.is_empty(),
            started: Vec::new(),
            done: Vec::new(),
            next: Vec::new(),
            inflight: Vec::new(),
            fresh: Vec::new(),
            retry: Vec::new(),
            tally: Vec::new(),
        })
    }

    fn run(&self, r: &mut Ring, ops: &[IoOp], by_member: &[Range<usize>], ctx: &ExecCtx) -> Result<()> {
        let members = by_member.len();
        let t0 = Instant::now();
        r.started.clear();
        r.started.resize(ops.len(), t0);
        r.done.clear();
        r.done.resize(ops.len(), 0);
        r.next.clear();
        r.next.extend(by_member.iter().map(|m| m.start));
        r.inflight.clear();
        r.inflight.resize(members, 0);
        r.fresh.clear();
        r.retry.clear();
        if r.tally.len() < members {
            r.tally.resize_with(members, Tally::default);
        }
        // The completion queue holds twice the submission entries; never have
        // more in flight than it can hold.
        let total_cap = (2 * self.entries as usize).min(ctx.cap * members).max(1);
        let mut total = 0usize;
        let mut first_err: Option<IoError> = None;
        let res = loop {
            if first_err.is_none() {
                for k in 0..r.retry.len() {
                    let i = r.retry[k];
                    self.push(r, ops, i)?;
                }
                r.retry.clear();
                for (m, range) in by_member.iter().enumerate() {
                    let before = r.inflight[m];
                    while r.inflight[m] < ctx.cap && r.next[m] < range.end && total < total_cap {
                        let i = r.next[m];
                        r.next[m] += 1;
                        self.push(r, ops, i)?;
                        r.fresh.push(i);
                        r.inflight[m] += 1;
                        total += 1;
                        if r.fresh.len() >= SUBMIT_GROUP {
                            Self::send(r)?;
                        }
                    }
                    if r.inflight[m] > before {
                        ctx.counters[m].record_inflight(r.inflight[m]);
                    }
                }
            } else {
                // Ops queued for a retry after an error are abandoned.
                for &i in &r.retry {
                    r.inflight[ops[i].member as usize] -= 1;
                    total -= 1;
                }
                r.retry.clear();
            }
            if total == 0 {
                break Ok(());
            }
            stamp(r);
            if let Err(e) = r.ring.submit_and_wait(1) {
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                // Without a working ring we cannot wait for what is in flight;
                // the buffers stay alive with the pool, so this is memory-safe.
                break Err(IoError::UringUnavailable(format!("submit: {e}")));
            }
            // One clock read ends every op reaped in this wake-up.
            let now = Instant::now();
            let mut reaped = false;
            for cqe in r.ring.completion() {
                let i = cqe.user_data() as usize;
                let op = &ops[i];
                let m = op.member as usize;
                let res = cqe.result();
                if res == -libc::EINTR || res == -libc::EAGAIN {
                    r.retry.push(i);
                    continue;
                }
                if res < 0 {
                    first_err.get_or_insert_with(|| ctx.os_error(op, -res));
                } else if res == 0 {
                    first_err.get_or_insert_with(|| ctx.short_read(op));
                } else {
                    r.done[i] += res as u32;
                    if r.done[i] < op.len {
                        r.retry.push(i);
                        continue;
                    }
                    let t = &mut r.tally[m];
                    if op.write {
                        t.written += op.len as u64;
                    } else {
                        t.read += op.len as u64;
                    }
                    t.lat_ns.push(now.saturating_duration_since(r.started[i]).as_nanos() as u64);
                    reaped = true;
                }
                r.inflight[m] -= 1;
                total -= 1;
            }
            if reaped {
                flush(&mut r.tally, ctx);
            }
        };
        flush(&mut r.tally, ctx);
        res?;
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Submits what is queued now (at most SUBMIT_GROUP ops).
    fn send(r: &mut Ring) -> Result<()> {
        stamp(r);
        loop {
            match r.ring.submit() {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(IoError::UringUnavailable(format!("submit: {e}"))),
            }
        }
    }

    fn push(&self, r: &mut Ring, ops: &[IoOp], i: usize) -> Result<()> {
        let op = &ops[i];
        let done = r.done[i];
        let fd = types::Fixed(op.member);
        // SAFETY: op.buf is valid for op.len bytes until the batch ends.
        let buf = unsafe { op.buf.add(done as usize) };
        let len = op.len - done;
        let off = op.offset + done as u64;
        let sqe = match (op.write, op.reg.filter(|_| r.fixed_bufs)) {
            (false, Some(idx)) => opcode::ReadFixed::new(fd, buf, len, idx).offset(off).build(),
            (false, None) => opcode::Read::new(fd, buf, len).offset(off).build(),
            (true, Some(idx)) => opcode::WriteFixed::new(fd, buf, len, idx).offset(off).build(),
            (true, None) => opcode::Write::new(fd, buf, len).offset(off).build(),
        }
        .user_data(i as u64);
        loop {
            // SAFETY: the sqe's buffer stays valid until its completion is reaped.
            if unsafe { r.ring.submission().push(&sqe) }.is_ok() {
                return Ok(());
            }
            r.ring.submit().map_err(|e| IoError::UringUnavailable(format!("submit: {e}")))?;
        }
    }
}

/// One clock read stamps every op the coming submit sends.
fn stamp(r: &mut Ring) {
    if !r.fresh.is_empty() {
        let now = Instant::now();
        for &i in &r.fresh {
            r.started[i] = now;
        }
        r.fresh.clear();
    }
}

/// Hands the reaped completions' counts and latencies to the counters.
fn flush(tally: &mut [Tally], ctx: &ExecCtx) {
    for (m, t) in tally.iter_mut().enumerate() {
        if !t.lat_ns.is_empty() {
            ctx.counters[m].record_ios(t.read, t.written, &t.lat_ns);
            t.read = 0;
            t.written = 0;
            t.lat_ns.clear();
        }
    }
}

impl Backend for UringBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Uring
    }

    fn execute(&self, ops: &[IoOp], by_member: &[Range<usize>], ctx: &ExecCtx) -> Result<()> {
        let taken = self.rings.locked().pop();
        let mut ring = match taken {
            Some(r) => r,
            None => self.new_ring()?,
        };
        let res = self.run(&mut ring, ops, by_member, ctx);
        self.rings.locked().push(ring);
        res
    }

    fn files(&self) -> &[File] {
        &self.files
    }
}
