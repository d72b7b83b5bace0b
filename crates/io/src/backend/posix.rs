//! POSIX backend: pread/pwrite on a pool of worker threads, for hosts that
//! refuse io_uring. The submitting thread keeps up to `cap` ops per member
//! with the workers and hands out the member's next op as each completes.
//! Batches at or below the inline watermark run in the caller's thread: one
//! page read should not pay for two thread hand-offs.

use std::fs::File;
use std::ops::Range;
use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, unbounded};

use super::{Backend, BackendKind, ExecCtx, IoOp, file_len, grow_file, sync_file};
use crate::error::Result;

struct Job {
    fd: RawFd,
    op: IoOp,
    idx: usize,
    done: Sender<Done>,
}

struct Done {
    idx: usize,
    /// Ok(elapsed) or Err(errno); errno 0 means the file ended early.
    res: std::result::Result<Duration, i32>,
}

pub(crate) struct PosixBackend {
    files: Vec<File>,
    jobs: Sender<Job>,
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

fn worker(rx: Receiver<Job>) {
    while let Ok(job) = rx.recv() {
        let res = run_op(job.fd, &job.op);
        // The submitter waits for every job it handed out, so it is listening.
        let _ = job.done.send(Done { idx: job.idx, res });
    }
}

impl PosixBackend {
    pub(crate) fn new(files: Vec<File>, threads: usize) -> std::io::Result<PosixBackend> {
        let (tx, rx) = unbounded::<Job>();
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
        let (done_tx, done_rx) = unbounded::<Done>();
        let mut next: Vec<usize> = by_member.iter().map(|r| r.start).collect();
        let mut inflight = vec![0usize; by_member.len()];
        let mut total = 0usize;
        let mut stop = false;
        loop {
            if !stop {
                for (m, range) in by_member.iter().enumerate() {
                    while inflight[m] < ctx.cap && next[m] < range.end {
                        let idx = next[m];
                        next[m] += 1;
                        let job = Job { fd: self.files[m].as_raw_fd(), op: ops[idx], idx, done: done_tx.clone() };
                        self.jobs.send(job).expect("posix workers live as long as the backend");
                        inflight[m] += 1;
                        total += 1;
                    }
                    ctx.counters[m].record_inflight(inflight[m]);
                }
            }
            if total == 0 {
                break;
            }
            let d = done_rx.recv().expect("done_tx is held here");
            let op = &ops[d.idx];
            let m = op.member as usize;
            inflight[m] -= 1;
            total -= 1;
            match d.res {
                Ok(lat) => ctx.counters[m].record_io(op.write, op.len as u64, lat),
                Err(errno) => {
                    fail(op, errno);
                    stop = true;
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    fn sync(&self, member: usize, metadata: bool, path: &Path) -> Result<()> {
        sync_file(&self.files[member], metadata, path)
    }

    fn member_len(&self, member: usize, path: &Path) -> Result<u64> {
        file_len(&self.files[member], path)
    }

    fn grow_member(&self, member: usize, len: u64, path: &Path) -> Result<()> {
        grow_file(&self.files[member], len, path)
    }
}
