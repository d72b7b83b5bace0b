//! POSIX backend: pread/pwrite on a pool of worker threads, for hosts that
//! refuse io_uring. A batch becomes "lanes": up to `cap` per member, each a
//! job that takes the member's next op (an atomic index), runs it and takes
//! another until the member's ops run out. So the in-flight cap holds and a
//! thread hand-off costs once per lane, not twice per I/O (two hand-offs and
//! two context switches per I/O would bound the backend at depth 64).
//! Batches at or below the inline watermark run in the caller's thread: one
//! page read should not pay for two thread hand-offs.

use std::fs::File;
use std::ops::Range;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, unbounded};

use super::{Backend, BackendKind, ExecCtx, IoOp};
use crate::error::Result;

/// One batch as the lanes see it.
struct Batch {
    ops: Vec<IoOp>,
    ranges: Vec<Range<usize>>,
    next: Vec<AtomicUsize>,
    fds: Vec<RawFd>,
    /// Set by the first failing op: lanes stop taking ops.
    stop: AtomicBool,
    done: Sender<LaneDone>,
}

/// A worker's job: run member `member`'s ops until none are left.
struct Lane {
    batch: Arc<Batch>,
    member: usize,
}

struct LaneDone {
    member: usize,
    read: u64,
    written: u64,
    lat_ns: Vec<u64>,
    /// (op index, errno); errno 0 means the file ended early.
    err: Option<(usize, i32)>,
}

pub(crate) struct PosixBackend {
    files: Vec<File>,
    jobs: Sender<Lane>,
    workers: Vec<std::thread::JoinHandle<()>>,
}

/// Runs one op to completion with pread/pwrite, resuming after short
/// transfers.
fn run_op(fd: RawFd, op: &IoOp) -> std::result::Result<Duration, i32> {
    let t = Instant::now();
    let mut done = 0usize;
    while done < op.len as usize {
        // SAFETY: op.buf is valid for op.len bytes for the life of the batch.
        let r = unsafe {
            let p = op.buf.add(done);
            let n = op.len as usize - done;
            let off = (op.offset + done as u64) as libc::off_t;
            if op.write { libc::pwrite(fd, p as *const libc::c_void, n, off) } else { libc::pread(fd, p as *mut libc::c_void, n, off) }
        };
        if r < 0 {
            let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
            if errno == libc::EINTR || errno == libc::EAGAIN {
                continue;
            }
            return Err(errno);
        }
        if r == 0 {
            return Err(0);
        }
        done += r as usize;
    }
    Ok(t.elapsed())
}

fn run_lane(lane: Lane) {
    let b = &*lane.batch;
    let m = lane.member;
    let range = &b.ranges[m];
    let mut d = LaneDone { member: m, read: 0, written: 0, lat_ns: Vec::new(), err: None };
    while !b.stop.load(Ordering::Relaxed) {
        let i = b.next[m].fetch_add(1, Ordering::Relaxed);
        if i >= range.end {
            break;
        }
        let op = &b.ops[i];
        match run_op(b.fds[m], op) {
            Ok(lat) => {
                if op.write {
                    d.written += op.len as u64;
                } else {
                    d.read += op.len as u64;
                }
                d.lat_ns.push(lat.as_nanos() as u64);
            }
            Err(errno) => {
                d.err = Some((i, errno));
                b.stop.store(true, Ordering::Relaxed);
                break;
            }
        }
    }
    // The submitter waits for every lane it handed out, so it is listening.
    let _ = b.done.send(d);
}

fn worker(rx: Receiver<Lane>) {
    while let Ok(lane) = rx.recv() {
        run_lane(lane);
    }
}

impl PosixBackend {
    pub(crate) fn new(files: Vec<File>, threads: usize) -> std::io::Result<PosixBackend> {
        let (tx, rx) = unbounded::<Lane>();
        let mut workers = Vec::with_capacity(threads);
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            workers.push(std::thread::Builder::new().name(format!("sg-pread-{i}")).stack_size(64 * 1024).spawn(move || worker(rx))?);
        }
        Ok(PosixBackend { files, jobs: tx, workers })
    }
}

impl Drop for PosixBackend {
    fn drop(&mut self) {
        // Closing the job channel ends every worker's loop.
        let (dead, _) = unbounded();
        self.jobs = dead;
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl Backend for PosixBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Posix
    }

    fn execute(&self, ops: &[IoOp], by_member: &[Range<usize>], ctx: &ExecCtx) -> Result<()> {
        let mut first_err = None;
        let mut fail = |op: &IoOp, errno: i32| {
            if first_err.is_none() {
                first_err = Some(if errno == 0 { ctx.short_read(op) } else { ctx.os_error(op, errno) });
            }
        };
        if ops.len() <= ctx.inline_watermark {
            for op in ops {
                let m = op.member as usize;
                ctx.counters[m].record_inflight(1);
                match run_op(self.files[m].as_raw_fd(), op) {
                    Ok(lat) => ctx.counters[m].record_io(op.write, op.len as u64, lat),
                    Err(errno) => fail(op, errno),
                }
            }
            return first_err.map_or(Ok(()), Err);
        }
        let (done_tx, done_rx) = unbounded::<LaneDone>();
        let batch = Arc::new(Batch {
            ops: ops.to_vec(),
            ranges: by_member.to_vec(),
            next: by_member.iter().map(|r| AtomicUsize::new(r.start)).collect(),
            fds: self.files.iter().map(|f| f.as_raw_fd()).collect(),
            stop: AtomicBool::new(false),
            done: done_tx,
        });
        let mut lanes = 0usize;
        for (m, range) in by_member.iter().enumerate() {
            let n = range.len().min(ctx.cap);
            for _ in 0..n {
                self.jobs.send(Lane { batch: batch.clone(), member: m }).expect("posix workers live as long as the backend");
            }
            if n > 0 {
                ctx.counters[m].record_inflight(n);
            }
            lanes += n;
        }
        for _ in 0..lanes {
            let d = done_rx.recv().expect("every lane reports");
            ctx.counters[d.member].record_ios(d.read, d.written, &d.lat_ns);
            if let Some((i, errno)) = d.err {
                fail(&ops[i], errno);
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    fn files(&self) -> &[File] {
        &self.files
    }
}
