//! Where request work runs: on tokio's blocking threads, at most
//! `max_concurrent` at once, never on the reactor. A request waits for a
//! slot (bounded by `max_queued` and its deadline); the slot is held by the
//! work itself, so work a dropped request leaves behind (a client gone or
//! past its deadline) still counts until it ends and cannot pile up, and
//! work whose call was dropped before it started is skipped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use tokio::sync::Semaphore;
use tonic::Status;

use crate::limits::Limits;
use crate::telemetry;

pub struct Gate {
    slots: Arc<Semaphore>,
    queued: AtomicUsize,
    pub limits: Limits,
}

/// Counts a waiting request while it waits.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Set when the call's future is dropped (the client went away, or its
/// deadline passed): work that has not started yet is skipped.
struct Abandoned(Arc<AtomicBool>);

impl Drop for Abandoned {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl Gate {
    pub fn new(limits: Limits) -> Gate {
        Gate { slots: Arc::new(Semaphore::new(limits.max_concurrent)), queued: AtomicUsize::new(0), limits }
    }

    /// Runs `work` on a blocking thread once a slot is free, and records
    /// the call's outcome and latency under `method`.
    pub async fn run<T: Send + 'static>(&self, method: &'static str, work: impl FnOnce() -> Result<T, Status> + Send + 'static) -> Result<T, Status> {
        let start = Instant::now();
        let res = self.run_inner(work).await;
        telemetry::request(method, res.as_ref().err().map(|s| s.code()), start.elapsed());
        res
    }

    /// Runs `work` right here on the reactor, without a slot: only for a
    /// small read of a warm store (a few ids, its pages almost surely
    /// cached), where the hop to a blocking thread and back costs more
    /// than the read.
    pub fn run_inline<T>(&self, method: &'static str, work: impl FnOnce() -> Result<T, Status>) -> Result<T, Status> {
        let start = Instant::now();
        let res = work();
        telemetry::request(method, res.as_ref().err().map(|s| s.code()), start.elapsed());
        res
    }

    async fn run_inner<T: Send + 'static>(&self, work: impl FnOnce() -> Result<T, Status> + Send + 'static) -> Result<T, Status> {
        let permit = {
            if self.queued.fetch_add(1, Ordering::Relaxed) >= self.limits.max_queued {
                self.queued.fetch_sub(1, Ordering::Relaxed);
                return Err(Status::resource_exhausted(format!("the server is busy ({} requests waiting); retry later", self.limits.max_queued)));
            }
            let _w = Waiting(&self.queued);
            self.slots.clone().acquire_owned().await.map_err(|_| Status::unavailable("the server is shutting down"))?
        };
        let abandoned = Abandoned(Arc::new(AtomicBool::new(false)));
        let flag = abandoned.0.clone();
        let job = tokio::task::spawn_blocking(move || {
            let _slot = permit;
            if flag.load(Ordering::Relaxed) {
                return Err(Status::cancelled("the call was abandoned before its work started"));
            }
            work()
        });
        let res = job.await;
        drop(abandoned);
        match res {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(error = %e, "request work panicked");
                Err(Status::internal("the request's work failed inside the server (a bug): see the server log"))
            }
        }
    }
}
