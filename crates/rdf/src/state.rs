//! What a query reads: the quads in pages (the base, a page store whose
//! out-lists are SPO and in-lists OPS, labelled by (graph, predicate)
//! pair) and the pending updates (the delta, in memory, replayed from the
//! update log). A snapshot pins both; an update publishes a new delta.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rustc_hash::{FxHashMap, FxHashSet};
use solidgraph_store::{Direction, Store};

use crate::error::Result;

/// A quad of ids: subject, predicate, object, graph (0: the default graph).
pub type Ids = [u64; 4];

/// Vertices per batch of a scan over every subject's list.
const SCAN_BATCH: u64 = 4096;

/// Called before each batch of a scan over every subject's list: an error
/// (the query's deadline passed, or it was cancelled) ends the scan with it.
pub type Check<'a> = &'a dyn Fn() -> Result<()>;

/// A [`Check`] that never stops a scan (compaction, pattern reads outside a query).
pub fn unchecked() -> Result<()> {
    Ok(())
}

/// Which graphs a lookup matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphSel {
    Default,
    Named(u64),
    /// Any named graph, not the default one (SPARQL's `GRAPH ?g`).
    AnyNamed,
    /// Every graph, the default one included.
    All,
}

impl GraphSel {
    fn ok(self, g: u64) -> bool {
        match self {
            GraphSel::Default => g == 0,
            GraphSel::Named(n) => g == n,
            GraphSel::AnyNamed => g != 0,
            GraphSel::All => true,
        }
    }
}

pub struct Base {
    /// `None` when no quad is in pages.
    pub store: Option<Store>,
    pub pairs: Vec<(u64, u64)>,
    /// Page-store vertex count: ids at or above it have no lists.
    pub nodes: u64,
    pub quads: u64,
    /// Lists read by scans over every subject (a test checks that a
    /// deadline stops a scan early).
    pub scanned: AtomicU64,
}

impl Base {
    pub fn empty() -> Base {
        Base { store: None, pairs: Vec::new(), nodes: 0, quads: 0, scanned: AtomicU64::new(0) }
    }

    /// Quads in pages matching the pattern, sorted, distinct; a pattern
    /// with subject and object open scans every list, calling `check`
    /// before each batch.
    fn find(&self, s: Option<u64>, p: Option<u64>, o: Option<u64>, g: GraphSel, check: Check) -> Result<Vec<Ids>> {
        let Some(store) = &self.store else { return Ok(Vec::new()) };
        let label_ok = |l: u32| {
            let Some(&(pg, pp)) = self.pairs.get(l as usize) else { return false };
            p.is_none_or(|p| p == pp) && g.ok(pg)
        };
        if !(0..self.pairs.len()).any(|l| label_ok(l as u32)) {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        let mut take = |dir: Direction, ids: &[u64], other: Option<u64>| -> Result<()> {
            let ids: Vec<u64> = ids.iter().copied().filter(|&i| i < self.nodes).collect();
            if ids.is_empty() {
                return Ok(());
            }
            let csr = store.neighbors(&ids, dir, false, true)?;
            let labels = csr.labels.as_deref().unwrap_or(&[]);
            for (k, &v) in ids.iter().enumerate() {
                let (lo, hi) = (csr.indptr[k] as usize, csr.indptr[k + 1] as usize);
                for (&n, &l) in csr.indices[lo..hi].iter().zip(&labels[lo..hi]) {
                    if !label_ok(l) || other.is_some_and(|x| x != n) {
                        continue;
                    }
                    let (pg, pp) = self.pairs[l as usize];
                    out.push(if dir == Direction::Out { [v, pp, n, pg] } else { [n, pp, v, pg] });
                }
            }
            Ok(())
        };
        match (s, o) {
            (Some(s), _) => take(Direction::Out, &[s], o)?,
            (None, Some(o)) => take(Direction::In, &[o], None)?,
            (None, None) => {
                let mut lo = 0;
                while lo < self.nodes {
                    check()?;
                    let hi = (lo + SCAN_BATCH).min(self.nodes);
                    let ids: Vec<u64> = (lo..hi).collect();
                    take(Direction::Out, &ids, None)?;
                    self.scanned.fetch_add(hi - lo, Ordering::Relaxed);
                    lo = hi;
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }
}

/// Ids per batched adjacency read of [`Snapshot::step`]: bounds the lists
/// one read holds in memory.
const STEP_BATCH: usize = 1 << 16;

impl Base {
    /// Appends (node, other end, predicate, graph) for every quad in pages
    /// leaving (`Out`) or entering (`In`) one of `nodes`, whose label
    /// passes `keep`: the lists of all of `nodes` in one batched read.
    fn step(&self, nodes: &[u64], dir: Direction, keep: &[bool], out: &mut Vec<Ids>) -> Result<()> {
        let Some(store) = &self.store else { return Ok(()) };
        if !keep.iter().any(|&k| k) {
            return Ok(());
        }
        let ids: Vec<u64> = nodes.iter().copied().filter(|&i| i < self.nodes).collect();
        for chunk in ids.chunks(STEP_BATCH) {
            let csr = store.neighbors(chunk, dir, false, true)?;
            let labels = csr.labels.as_deref().unwrap_or(&[]);
            for (k, &v) in chunk.iter().enumerate() {
                let (lo, hi) = (csr.indptr[k] as usize, csr.indptr[k + 1] as usize);
                for (&n, &l) in csr.indices[lo..hi].iter().zip(&labels[lo..hi]) {
                    if keep.get(l as usize).copied().unwrap_or(false) {
                        let (pg, pp) = self.pairs[l as usize];
                        out.push([v, n, pp, pg]);
                    }
                }
            }
        }
        Ok(())
    }
}

/// Pending updates: quads added that are not in the base, base quads removed.
#[derive(Clone, Default)]
pub struct Delta {
    spog: BTreeSet<Ids>,
    /// [p, o, s, g]
    posg: BTreeSet<Ids>,
    /// [o, s, p, g]
    ospg: BTreeSet<Ids>,
    /// [g, s, p, o]
    gspo: BTreeSet<Ids>,
    removed: FxHashSet<Ids>,
}

impl Delta {
    pub fn changes(&self) -> u64 {
        (self.spog.len() + self.removed.len()) as u64
    }

    fn add(&mut self, [s, p, o, g]: Ids) {
        self.spog.insert([s, p, o, g]);
        self.posg.insert([p, o, s, g]);
        self.ospg.insert([o, s, p, g]);
        self.gspo.insert([g, s, p, o]);
    }

    fn drop_added(&mut self, [s, p, o, g]: Ids) -> bool {
        self.posg.remove(&[p, o, s, g]);
        self.ospg.remove(&[o, s, p, g]);
        self.gspo.remove(&[g, s, p, o]);
        self.spog.remove(&[s, p, o, g])
    }

    fn find(&self, s: Option<u64>, p: Option<u64>, o: Option<u64>, g: GraphSel, out: &mut Vec<Ids>) {
        let range = |set: &BTreeSet<Ids>, k: u64| set.range([k, 0, 0, 0]..=[k, u64::MAX, u64::MAX, u64::MAX]).copied().collect::<Vec<_>>();
        let cands: Vec<Ids> = if let Some(s) = s {
            range(&self.spog, s)
        } else if let Some(o) = o {
            range(&self.ospg, o).into_iter().map(|[o, s, p, g]| [s, p, o, g]).collect()
        } else if let Some(p) = p {
            range(&self.posg, p).into_iter().map(|[p, o, s, g]| [s, p, o, g]).collect()
        } else if let GraphSel::Named(g) = g {
            range(&self.gspo, g).into_iter().map(|[g, s, p, o]| [s, p, o, g]).collect()
        } else {
            self.spog.iter().copied().collect()
        };
        out.extend(cands.into_iter().filter(|q| s.is_none_or(|x| x == q[0]) && p.is_none_or(|x| x == q[1]) && o.is_none_or(|x| x == q[2]) && g.ok(q[3])));
    }
}

/// A consistent view: the base and the delta of one moment.
#[derive(Clone)]
pub struct Snapshot {
    pub base: Arc<Base>,
    pub delta: Arc<Delta>,
}

impl Snapshot {
    /// Quads matching the pattern, sorted by (s, p, o, g), distinct.
    pub fn find(&self, s: Option<u64>, p: Option<u64>, o: Option<u64>, g: GraphSel) -> Result<Vec<Ids>> {
        self.find_checked(s, p, o, g, &unchecked)
    }

    /// [`Snapshot::find`], calling `check` between the batches of a scan
    /// over every list (subject and object open) and stopping at its error.
    pub fn find_checked(&self, s: Option<u64>, p: Option<u64>, o: Option<u64>, g: GraphSel, check: Check) -> Result<Vec<Ids>> {
        let mut out = self.base.find(s, p, o, g, check)?;
        if !self.delta.removed.is_empty() {
            out.retain(|q| !self.delta.removed.contains(q));
        }
        let before = out.len();
        self.delta.find(s, p, o, g, &mut out);
        if out.len() != before {
            out.sort_unstable();
        }
        Ok(out)
    }

    /// One step from many nodes at once: (node, other end, predicate,
    /// graph) for every quad of `g` leaving (`Out`: node is the subject)
    /// or entering (`In`: node is the object) one of `nodes` whose
    /// predicate passes `pred`. The pages of all of `nodes` are read in
    /// one batch; pending updates are applied.
    pub fn step(&self, nodes: &[u64], dir: Direction, pred: &dyn Fn(u64) -> bool, g: GraphSel) -> Result<Vec<Ids>> {
        let keep: Vec<bool> = self.base.pairs.iter().map(|&(pg, pp)| g.ok(pg) && pred(pp)).collect();
        let mut out = Vec::new();
        self.base.step(nodes, dir, &keep, &mut out)?;
        let quad = |[v, n, p, qg]: Ids| if dir == Direction::Out { [v, p, n, qg] } else { [n, p, v, qg] };
        if !self.delta.removed.is_empty() {
            out.retain(|&e| !self.delta.removed.contains(&quad(e)));
        }
        if !self.delta.spog.is_empty() {
            let mut found = Vec::new();
            for &v in nodes {
                found.clear();
                if dir == Direction::Out {
                    self.delta.find(Some(v), None, None, g, &mut found);
                } else {
                    self.delta.find(None, None, Some(v), g, &mut found);
                }
                for &[s, p, o, qg] in &found {
                    if pred(p) {
                        out.push(if dir == Direction::Out { [s, o, p, qg] } else { [o, s, p, qg] });
                    }
                }
            }
        }
        Ok(out)
    }

    pub fn len(&self) -> u64 {
        self.base.quads - self.delta.removed.len() as u64 + self.delta.spog.len() as u64
    }

    /// Named graphs holding at least one quad.
    pub fn graphs(&self) -> Result<Vec<u64>> {
        let mut gs: FxHashMap<u64, ()> = FxHashMap::default();
        let mut pair_graphs: Vec<u64> = self.base.pairs.iter().map(|&(g, _)| g).filter(|&g| g != 0).collect();
        pair_graphs.sort_unstable();
        pair_graphs.dedup();
        for g in pair_graphs {
            // A graph whose base quads were all deleted is gone.
            if self.delta.removed.is_empty() || !self.find(None, None, None, GraphSel::Named(g))?.is_empty() {
                gs.insert(g, ());
            }
        }
        for q in &self.delta.gspo {
            if q[0] != 0 {
                gs.insert(q[0], ());
            }
        }
        let mut v: Vec<u64> = gs.into_keys().collect();
        v.sort_unstable();
        Ok(v)
    }

    /// Applies one change to `delta` (this snapshot's view, updated by the
    /// caller as it goes); returns whether the store changed.
    pub fn apply(&self, delta: &mut Delta, insert: bool, q: Ids) -> Result<bool> {
        let in_base =
            !self.base.find(Some(q[0]), Some(q[1]), Some(q[2]), if q[3] == 0 { GraphSel::Default } else { GraphSel::Named(q[3]) }, &unchecked)?.is_empty();
        Ok(if insert {
            if in_base {
                delta.removed.remove(&q)
            } else if delta.spog.contains(&q) {
                false
            } else {
                delta.add(q);
                true
            }
        } else if in_base {
            delta.removed.insert(q)
        } else {
            delta.drop_added(q)
        })
    }
}
