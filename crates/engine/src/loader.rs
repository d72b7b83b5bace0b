//! Pipelined mini-batch loader: worker threads run the neighbor sampler
//! (sample + feature gather, one engine call per batch) ahead of the
//! consumer, which receives the batches of one epoch in order.
//!
//! - `workers` threads claim batch indices in order; a worker may claim
//!   batch `j` only while `j < consumed + prefetch`, so at most `prefetch`
//!   batches are in the making or finished and waiting: memory is bounded
//!   whatever the speed of the consumer.
//! - Batch `i` is sampled with a seed derived from (seed, i), so the epoch is
//!   the same whatever the number of workers or the timing.
//! - An error in a worker is handed to the consumer at its batch's place,
//!   and ends the epoch (later batches are not produced).
//! - Dropping the prefetcher cancels it: workers stop after the batch they
//!   are on and are joined.
//! - Fork: threads do not survive `fork()`, and the store's I/O state (rings,
//!   locks held by other threads) must not be shared with the parent. The
//!   prefetcher records its pid; when `next` runs in another process, the
//!   parent's threads and store handle are abandoned (leaked, never touched),
//!   the store is reopened through the reopen hook and the workers restart
//!   at the first batch not yet consumed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use solidgraph_store::{OpenOptions, Store};

use crate::error::{EngineError, Result};
use crate::sampler::{Sample, SampleOptions, sample_neighbors};

/// Opens the store anew (in a forked child).
pub type Reopen = Arc<dyn Fn() -> Result<Arc<Store>> + Send + Sync>;

#[derive(Clone)]
pub struct PrefetchOptions {
    /// Sampler threads.
    pub workers: usize,
    /// Batches in the making or finished but not yet consumed.
    pub prefetch: usize,
    /// How a forked child gets its own store; by default the store is
    /// reopened from its path with the cache budget it had.
    pub reopen: Option<Reopen>,
}

impl Default for PrefetchOptions {
    fn default() -> Self {
        PrefetchOptions { workers: 2, prefetch: 4, reopen: None }
    }
}

/// The seed of batch `i` of an epoch sampled with `seed`.
pub fn batch_seed(seed: u64, i: u64) -> u64 {
    let mut z = seed.wrapping_add((i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

struct State {
    /// Next batch a worker may claim.
    next_claim: usize,
    /// Batches handed to the consumer.
    consumed: usize,
    /// Finished batches not yet consumed.
    done: BTreeMap<usize, Result<Sample>>,
    /// A worker failed: nothing after this batch is claimed.
    failed_at: Option<usize>,
}

struct Shared {
    store: Arc<Store>,
    batches: Arc<Vec<Vec<u64>>>,
    opts: Arc<SampleOptions>,
    prefetch: usize,
    cancel: AtomicBool,
    state: Mutex<State>,
    /// Workers wait here for room in the window.
    room: Condvar,
    /// The consumer waits here for its next batch.
    ready: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A worker never panics while holding the lock (sampling runs outside
        // it); recover the state anyway rather than propagate a poison.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn work(&self) {
        loop {
            let i = {
                let mut st = self.lock();
                loop {
                    if self.cancel.load(Ordering::Acquire) || st.failed_at.is_some() || st.next_claim >= self.batches.len() {
                        return;
                    }
                    if st.next_claim < st.consumed + self.prefetch {
                        break;
                    }
                    st = self.room.wait(st).unwrap_or_else(|e| e.into_inner());
                }
                st.next_claim += 1;
                st.next_claim - 1
            };
            let mut o = (*self.opts).clone();
            o.seed = batch_seed(self.opts.seed, i as u64);
            // A panic in the sampler is a bug, but it must reach the
            // consumer as an error, not leave it waiting forever.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sample_neighbors(&self.store, &self.batches[i], &o)))
                .unwrap_or_else(|p| {
                    let msg = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
                    Err(EngineError::Invalid(format!("sampler worker panicked: {}", msg.unwrap_or_else(|| "unknown cause".into()))))
                });
            let mut st = self.lock();
            if r.is_err() {
                st.failed_at = Some(st.failed_at.map_or(i, |f| f.min(i)));
            }
            st.done.insert(i, r);
            drop(st);
            self.ready.notify_all();
        }
    }
}

struct Running {
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<()>>,
}

impl Running {
    fn start(shared: Arc<Shared>, workers: usize) -> Running {
        let handles = (0..workers.max(1))
            .map(|k| {
                let s = shared.clone();
                std::thread::Builder::new().name(format!("sg-loader-{k}")).spawn(move || s.work()).expect("spawn a loader thread")
            })
            .collect();
        Running { shared, handles }
    }

    fn stop(mut self) {
        self.shared.cancel.store(true, Ordering::Release);
        // Take the lock so no worker is between its check and its wait.
        drop(self.shared.lock());
        self.shared.room.notify_all();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// Samples the batches of one epoch on worker threads, handing them out in
/// order. See the module documentation.
pub struct Prefetcher {
    store: Arc<Store>,
    batches: Arc<Vec<Vec<u64>>>,
    opts: Arc<SampleOptions>,
    cfg: PrefetchOptions,
    cache_bytes: u64,
    pid: u32,
    /// Batches handed out so far.
    next: usize,
    finished: bool,
    run: Option<Running>,
}

impl Prefetcher {
    /// Starts sampling `batches` (seed lists) with `opts`; batch `i` uses the
    /// seed `batch_seed(opts.seed, i)`. Options are checked here, so a bad
    /// fanout or tensor name is an error now rather than at the first batch.
    pub fn new(store: Arc<Store>, batches: Vec<Vec<u64>>, opts: SampleOptions, cfg: PrefetchOptions) -> Result<Prefetcher> {
        if cfg.workers == 0 || cfg.prefetch == 0 {
            return Err(EngineError::Invalid(format!("workers ({}) and prefetch ({}) must be at least 1", cfg.workers, cfg.prefetch)));
        }
        check_options(&store, &opts)?;
        let cache_bytes = store.stats().cache.budget;
        let mut p = Prefetcher {
            store,
            batches: Arc::new(batches),
            opts: Arc::new(opts),
            cfg,
            cache_bytes,
            pid: std::process::id(),
            next: 0,
            finished: false,
            run: None,
        };
        p.start();
        Ok(p)
    }

    pub fn len(&self) -> usize {
        self.batches.len()
    }

    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// Batches handed out so far.
    pub fn position(&self) -> usize {
        self.next
    }

    fn start(&mut self) {
        if self.next >= self.batches.len() {
            return;
        }
        let shared = Arc::new(Shared {
            store: self.store.clone(),
            batches: self.batches.clone(),
            opts: self.opts.clone(),
            prefetch: self.cfg.prefetch,
            cancel: AtomicBool::new(false),
            state: Mutex::new(State { next_claim: self.next, consumed: self.next, done: BTreeMap::new(), failed_at: None }),
            room: Condvar::new(),
            ready: Condvar::new(),
        });
        let workers = self.cfg.workers.min(self.batches.len() - self.next);
        self.run = Some(Running::start(shared, workers));
    }

    /// In a forked child: abandon the parent's threads and store (their
    /// locks may be held by threads that do not exist here), reopen the
    /// store and restart at the first batch not yet consumed.
    fn restart_after_fork(&mut self) -> Result<()> {
        std::mem::forget(self.run.take());
        let store = match &self.cfg.reopen {
            Some(f) => f()?,
            None => Arc::new(Store::open(self.store.path(), &OpenOptions { cache_bytes: self.cache_bytes, ..Default::default() })?),
        };
        std::mem::forget(std::mem::replace(&mut self.store, store));
        self.pid = std::process::id();
        if !self.finished {
            self.start();
        }
        Ok(())
    }

    /// The next batch in order, `None` after the last (or after an error).
    /// Blocks until the batch is ready.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Result<Sample>> {
        if self.pid != std::process::id()
            && let Err(e) = self.restart_after_fork()
        {
            self.finished = true;
            return Some(Err(e));
        }
        if self.finished || self.next >= self.batches.len() {
            self.finish();
            return None;
        }
        let run = self.run.as_ref().expect("running while batches remain");
        let sh = &run.shared;
        let i = self.next;
        let r = {
            let mut st = sh.lock();
            loop {
                if let Some(r) = st.done.remove(&i) {
                    break r;
                }
                st = sh.ready.wait(st).unwrap_or_else(|e| e.into_inner());
            }
        };
        {
            let mut st = sh.lock();
            st.consumed = i + 1;
        }
        sh.room.notify_all();
        self.next += 1;
        if r.is_err() || self.next >= self.batches.len() {
            self.finish();
        }
        Some(r)
    }

    fn finish(&mut self) {
        self.finished = true;
        if let Some(run) = self.run.take() {
            run.stop();
        }
    }
}

impl Iterator for Prefetcher {
    type Item = Result<Sample>;
    fn next(&mut self) -> Option<Result<Sample>> {
        Prefetcher::next(self)
    }
}

impl Drop for Prefetcher {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            // The threads belong to the parent: never join them here.
            std::mem::forget(self.run.take());
            return;
        }
        if let Some(run) = self.run.take() {
            run.stop();
        }
    }
}

/// The checks `sample_neighbors` makes that do not depend on the seeds.
fn check_options(store: &Store, o: &SampleOptions) -> Result<()> {
    if o.fanouts.is_empty() {
        return Err(EngineError::Invalid("fanouts must name at least one hop".into()));
    }
    if let Some(&bad) = o.fanouts.iter().find(|&&k| (k <= 0 && k != crate::sampler::ALL) || k > o.max_fanout) {
        return Err(EngineError::Invalid(format!("fanout {bad} must be -1 (all) or in 1..={}", o.max_fanout)));
    }
    if o.weighted && !store.has_weights() {
        return Err(EngineError::Invalid("weighted sampling needs edge weights; import with weights".into()));
    }
    store.gtt(o.direction)?;
    for t in &o.tensors {
        store.tensor_meta(t)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use solidgraph_store::{DType, Direction, EdgeInput, ImportOptions, TensorData, TensorInput, import};

    use super::*;

    fn store(n: u64, in_edges: bool) -> (tempfile::TempDir, Arc<Store>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g");
        let src: Vec<u64> = (0..n * 8).map(|i| (i * 7919) % n).collect();
        let dst: Vec<u64> = (0..n * 8).map(|i| (i * 104_729 + 1) % n).collect();
        let x: Vec<u8> = (0..n * 2).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let t = TensorInput { name: "x".into(), data: TensorData::Memory { dtype: DType::F32, rows: n, dim: 2, bytes: x } };
        let o = ImportOptions { in_edges, dedup: true, num_nodes: Some(n), ..Default::default() };
        import(&path, &[EdgeInput::Memory { src, dst, weights: None, labels: None }], &[t], &o, &|_, _, _| {}).unwrap();
        let s = Store::open(&path, &OpenOptions { cache_bytes: 1 << 20, ..Default::default() }).unwrap();
        (dir, Arc::new(s))
    }

    fn opts(seed: u64) -> SampleOptions {
        SampleOptions { fanouts: vec![3, 2], direction: Direction::Out, seed, tensors: vec!["x".into()], ..Default::default() }
    }

    fn batches(n: u64, k: usize) -> Vec<Vec<u64>> {
        (0..k).map(|i| (0..16).map(|j| (i as u64 * 16 + j) % n).collect()).collect()
    }

    #[test]
    fn in_order_and_same_as_direct_calls_whatever_the_workers() {
        let (_d, s) = store(500, false);
        let b = batches(500, 40);
        let want: Vec<Sample> = b
            .iter()
            .enumerate()
            .map(|(i, seeds)| {
                let mut o = opts(7);
                o.seed = batch_seed(7, i as u64);
                sample_neighbors(&s, seeds, &o).unwrap()
            })
            .collect();
        for (workers, prefetch) in [(1, 1), (2, 4), (4, 2), (3, 16)] {
            let p = Prefetcher::new(s.clone(), b.clone(), opts(7), PrefetchOptions { workers, prefetch, reopen: None }).unwrap();
            let got: Vec<Sample> = p.map(|r| r.unwrap()).collect();
            assert_eq!(got, want, "workers {workers}, prefetch {prefetch}");
        }
    }

    #[test]
    fn window_bounds_the_work_ahead() {
        let (_d, s) = store(500, false);
        let mut p = Prefetcher::new(s, batches(500, 50), opts(1), PrefetchOptions { workers: 3, prefetch: 2, reopen: None }).unwrap();
        p.next().unwrap().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let st = p.run.as_ref().unwrap().shared.lock();
        assert!(st.next_claim <= 1 + 2, "claimed {} with 1 consumed and prefetch 2", st.next_claim);
        assert!(st.done.len() <= 2);
    }

    #[test]
    fn errors_reach_the_consumer_in_place_and_end_the_epoch() {
        let (_d, s) = store(100, false);
        let mut b = batches(100, 10);
        b[3] = vec![5, 100]; // out of range
        let mut p = Prefetcher::new(s.clone(), b, opts(0), PrefetchOptions::default()).unwrap();
        for _ in 0..3 {
            p.next().unwrap().unwrap();
        }
        let e = p.next().unwrap().unwrap_err();
        assert!(e.to_string().contains("seed 100 is not in the graph"), "{e}");
        assert!(p.next().is_none());
        // Empty seed lists too.
        let mut p = Prefetcher::new(s, vec![vec![]], opts(0), PrefetchOptions::default()).unwrap();
        assert!(p.next().unwrap().unwrap_err().to_string().contains("empty seed list"));
    }

    #[test]
    fn bad_options_fail_at_creation() {
        let (_d, s) = store(100, false);
        let mk = |o: SampleOptions| Prefetcher::new(s.clone(), batches(100, 2), o, PrefetchOptions::default()).err().unwrap().to_string();
        assert!(mk(SampleOptions { fanouts: vec![0], ..opts(0) }).contains("fanout 0"));
        assert!(mk(SampleOptions { fanouts: vec![1 << 40], ..opts(0) }).contains("fanout"));
        assert!(mk(SampleOptions { tensors: vec!["nope".into()], ..opts(0) }).contains("no tensor named"));
        assert!(mk(SampleOptions { direction: Direction::In, ..opts(0) }).contains("no in edges"));
        assert!(mk(SampleOptions { weighted: true, ..opts(0) }).contains("edge weights"));
        let e = Prefetcher::new(s.clone(), batches(100, 2), opts(0), PrefetchOptions { workers: 0, ..Default::default() });
        assert!(e.is_err());
    }

    #[test]
    fn drop_stops_the_workers_quickly() {
        let (_d, s) = store(2000, true);
        let b: Vec<Vec<u64>> = (0..10_000).map(|i| vec![i % 2000]).collect();
        let mut p = Prefetcher::new(s.clone(), b, opts(3), PrefetchOptions { workers: 2, prefetch: 8, reopen: None }).unwrap();
        p.next().unwrap().unwrap();
        let t = Instant::now();
        drop(p);
        assert!(t.elapsed() < Duration::from_secs(1));
        // Workers held the store; after the join only our handle is left.
        assert_eq!(Arc::strong_count(&s), 1);
    }

    #[test]
    fn empty_epoch() {
        let (_d, s) = store(10, false);
        let mut p = Prefetcher::new(s, vec![], opts(0), PrefetchOptions::default()).unwrap();
        assert!(p.is_empty() && p.next().is_none() && p.next().is_none());
    }
}
