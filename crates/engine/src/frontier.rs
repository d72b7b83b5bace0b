//! How algorithms read neighbor lists: a whole frontier at a time.
//!
//! The vertex range is cut into chunks of about `CHUNK_PAGES` adjacency
//! pages. For each chunk the frontier's members there are either read with
//! the chunk (one sequential run of merged large I/Os) when they would touch
//! a large share of its pages, or batched with other chunks' members into
//! selective page reads through the cache (Graphene and Blaze make the same
//! choice). A reader thread runs the I/O one job ahead of the thread that
//! applies the algorithm, so both cores work.

use std::sync::mpsc::sync_channel;

use solidgraph_store::{Csr, Direction, Store};

use crate::error::{EngineError, Result};

/// 4 MiB of 4 KiB pages per sequential chunk.
const CHUNK_PAGES: usize = 1024;
/// Vertices per selective read batch.
const SPARSE_BATCH: usize = 16 * 1024;
/// A random page read costs about this many sequential ones on our disks
/// (fio: 114K IOPS x 4 KiB at depth 64 against 1.28 GB/s sequential).
const RANDOM_COST: f64 = 2.7;

/// Neighbor lists of one direction, optionally with weights.
pub struct Lists<'a> {
    store: &'a Store,
    /// Out, or out then in: the undirected view of a directed store.
    dirs: Vec<Direction>,
    weights: bool,
    ranges: Vec<(u64, u64)>,
    /// Adjacency pages per range, for the dense/sparse choice.
    range_pages: Vec<u64>,
    /// Range reads go through the page cache: only when it can hold the
    /// whole store (else a scan would just evict everything).
    cached_ranges: bool,
}

enum Job {
    Range(u64, u64),
    Ids(Vec<u64>),
}

impl<'a> Lists<'a> {
    /// Lists of the undirected view: out-lists of an undirected store; out-
    /// then in-list (concatenated, not deduplicated) of a directed one.
    pub fn both(store: &'a Store, what: &str) -> Result<Lists<'a>> {
        if !store.directed() {
            return Lists::new(store, Direction::Out, false);
        }
        if store.gtt(Direction::In).is_err() {
            return Err(EngineError::Unsupported(format!(
                "{what} on a directed graph needs its in-edges; re-import with --in-edges (in_edges=True)"
            )));
        }
        let mut l = Lists::new(store, Direction::Out, false)?;
        l.dirs.push(Direction::In);
        Ok(l)
    }

    pub fn new(store: &'a Store, dir: Direction, weights: bool) -> Result<Lists<'a>> {
        if weights && !store.has_weights() {
            return Err(EngineError::Unsupported("this algorithm needs edge weights; import with --weights".into()));
        }
        let ranges = store.chunk_ranges(dir, CHUNK_PAGES)?;
        let gtt = store.gtt(dir)?;
        let range_pages = ranges
            .iter()
            .map(|&(lo, _)| lo)
            .chain(std::iter::once(u64::MAX))
            .map(|v| gtt.lower_bound(v) as u64)
            .collect::<Vec<_>>()
            .windows(2)
            .map(|w| (w[1] - w[0]).max(1))
            .collect();
        let cached_ranges = store.stats().cache.budget >= store.size_bytes();
        Ok(Lists { store, dirs: vec![dir], weights, ranges, range_pages, cached_ranges })
    }

    pub fn store(&self) -> &Store {
        self.store
    }

    /// Calls `f(v, neighbors, weights)` for every vertex, in id order
    /// (vertices without edges get empty lists). Weights are empty unless
    /// requested.
    pub fn scan(&self, f: impl FnMut(u64, &[u64], &[f32])) -> Result<()> {
        let jobs = self.ranges.iter().map(|&(lo, hi)| Job::Range(lo, hi)).collect();
        self.pump(jobs, None, f)
    }

    /// Calls `f` for every vertex of `frontier` (sorted, distinct), in no
    /// particular order.
    pub fn visit(&self, frontier: &[u64], f: impl FnMut(u64, &[u64], &[f32])) -> Result<()> {
        debug_assert!(frontier.windows(2).all(|w| w[0] < w[1]), "frontier must be sorted and distinct");
        let mut jobs = Vec::new();
        let mut sparse: Vec<u64> = Vec::new();
        let mut at = 0;
        for (r, &(lo, hi)) in self.ranges.iter().enumerate() {
            let start = at;
            while at < frontier.len() && frontier[at] < hi {
                at += 1;
            }
            let members = &frontier[start..at];
            if members.is_empty() {
                continue;
            }
            debug_assert!(members[0] >= lo);
            if members.len() as f64 * RANDOM_COST >= self.range_pages[r] as f64 {
                jobs.push(Job::Range(lo, hi));
            } else {
                sparse.extend_from_slice(members);
                if sparse.len() >= SPARSE_BATCH {
                    jobs.push(Job::Ids(std::mem::take(&mut sparse)));
                }
            }
        }
        if !sparse.is_empty() {
            jobs.push(Job::Ids(sparse));
        }
        self.pump(jobs, Some(frontier), f)
    }

    /// Runs the reads on a helper thread one job ahead of `f`. For range jobs
    /// under a frontier, only members are handed to `f`.
    fn pump(&self, jobs: Vec<Job>, frontier: Option<&[u64]>, mut f: impl FnMut(u64, &[u64], &[f32])) -> Result<()> {
        let (tx, rx) = sync_channel::<Result<(Job, Csr)>>(1);
        let (store, dirs, weights, cached) = (self.store, &self.dirs, self.weights, self.cached_ranges);
        std::thread::scope(|s| {
            s.spawn(move || {
                for job in jobs {
                    let read = |dir| match &job {
                        Job::Range(lo, hi) if cached => store.neighbors(&(*lo..*hi).collect::<Vec<_>>(), dir, weights, false),
                        Job::Range(lo, hi) => store.read_range(dir, *lo, *hi, weights),
                        Job::Ids(ids) => store.neighbors(ids, dir, weights, false),
                    };
                    let csr = match dirs.as_slice() {
                        [d] => read(*d),
                        [a, b] => read(*a).and_then(|x| Ok(concat(&x, &read(*b)?))),
                        _ => unreachable!("one or two directions"),
                    };
                    let stop = csr.is_err();
                    if tx.send(csr.map(|c| (job, c)).map_err(EngineError::from)).is_err() || stop {
                        return;
                    }
                }
            });
            for got in rx {
                let (job, csr) = got?;
                let w: &[f32] = csr.weights.as_deref().unwrap_or(&[]);
                let mut apply = |i: usize, v: u64| {
                    let (a, b) = (csr.indptr[i] as usize, csr.indptr[i + 1] as usize);
                    f(v, &csr.indices[a..b], if w.is_empty() { &[] } else { &w[a..b] });
                };
                match job {
                    Job::Ids(ids) => ids.iter().enumerate().for_each(|(i, &v)| apply(i, v)),
                    Job::Range(lo, hi) => match frontier {
                        None => (lo..hi).enumerate().for_each(|(i, v)| apply(i, v)),
                        Some(fr) => {
                            let a = fr.partition_point(|&x| x < lo);
                            let b = fr.partition_point(|&x| x < hi);
                            fr[a..b].iter().for_each(|&v| apply((v - lo) as usize, v));
                        }
                    },
                }
            }
            Ok(())
        })
    }
}

/// Per-vertex concatenation of two CSRs over the same ids.
fn concat(a: &Csr, b: &Csr) -> Csr {
    let n = a.indptr.len() - 1;
    // Edge ids span two directions here, so none are kept.
    let mut out = Csr { indptr: Vec::with_capacity(n + 1), indices: Vec::with_capacity(a.indices.len() + b.indices.len()), first_edge: Vec::new(), weights: None, labels: None };
    out.indptr.push(0);
    for i in 0..n {
        out.indices.extend_from_slice(&a.indices[a.indptr[i] as usize..a.indptr[i + 1] as usize]);
        out.indices.extend_from_slice(&b.indices[b.indptr[i] as usize..b.indptr[i + 1] as usize]);
        out.indptr.push(out.indices.len() as u64);
    }
    out
}
