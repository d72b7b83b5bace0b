//! The row cache's warm-up: the rows of the highest-degree vertices read
//! into the row cache on a thread of its own once open returns.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use solidgraph_io::sync::{CondvarExt, MutexExt};

use crate::base::Base;
use crate::error::Result;
use crate::gather::Gather;

/// Whether the warm-up is over. Row gathers wait for it; adjacency reads
/// do not, so a loader's first draws run while it fills the cache, instead
/// of the open faulting in and filling the whole budget with the device
/// idle.
pub(crate) struct Warming {
    done: Mutex<bool>,
    finished: Condvar,
}

impl Warming {
    pub fn new(done: bool) -> Warming {
        Warming { done: Mutex::new(done), finished: Condvar::new() }
    }

    pub fn finish(&self) {
        *self.done.locked() = true;
        self.finished.notify_all();
    }

    pub fn wait(&self) {
        let mut done = self.done.locked();
        while !*done {
            done = self.finished.wait_locked(done);
        }
    }
}

/// Fills the row cache with the rows of `hot`, the vertices of highest
/// degree (the head of the store's hot table) it holds: a cold
/// cache otherwise spends its first mini-batches missing exactly the
/// hubs' rows that most samples contain. In a degree-ordered store the
/// hubs are the first ids, so this is one sequential pass of merged
/// reads over the budget's bytes. SIEVE evicts the rows no batch asks
/// for first. Nothing to do without a row cache.
pub(crate) fn warm_rows(g: Gather, base: &Base, hot: &[u64]) -> Result<()> {
    // Rows per read: bounds the scratch copy and the pages held.
    const PART: usize = 16 * 1024;
    let Some(rc) = g.rows else { return Ok(()) };
    // Two threads take parts in turn, so one's reads are in flight while
    // the other copies rows into the cache (one thread alone leaves the
    // device idle between parts).
    let next = AtomicUsize::new(0);
    let parts: Vec<(usize, &[u64])> = (0..base.sb.tensors.len()).flat_map(|ti| hot.chunks(PART).map(move |p| (ti, p))).collect();
    let warm = || -> Result<()> {
        let mut scratch = Vec::new();
        while let Some(&(ti, part)) = parts.get(next.fetch_add(1, Ordering::Relaxed)) {
            let mut ids = part.to_vec();
            ids.sort_unstable();
            scratch.resize(ids.len() * base.sb.tensors[ti].row_bytes() as usize, 0);
            g.pages_into(base, ti, &ids, &mut scratch, false)?;
        }
        Ok(())
    };
    std::thread::scope(|sc| {
        sc.spawn(|| rc.prefault());
        let other = sc.spawn(warm);
        let mine = warm();
        other.join().expect("row warm-up thread panicked").and(mine)
    })?;
    rc.reset_stats();
    Ok(())
}
