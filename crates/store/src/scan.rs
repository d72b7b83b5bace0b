//! Reads for whole-graph work: consecutive vertex ranges read straight from
//! the volume (large merged I/Os, no cache pollution), and the ranges that
//! cut an adjacency region into chunks of about the same number of pages.

use std::sync::Arc;

use crate::adjacency::{Block, DIR_ENTRY, packed_entries};
use crate::base::{Base, Direction};
use crate::error::{Result, StoreError};
use crate::fetch::{Fetched, Fetcher};
use crate::gtt::Gtt;
use crate::page::{self, HEADER, Kind};
use crate::planner::Csr;

/// Bounds on one range of `Store::chunk_ranges`.
#[derive(Debug, Clone, Copy)]
pub struct ChunkLimit {
    /// Adjacency pages read.
    pub pages: usize,
    /// Neighbor ids decoded (8 B each, more with weights).
    pub edges: u64,
    /// Vertices spanned.
    pub vertices: u64,
}

/// Splits [0, n) into vertex ranges of `gtt`'s direction (`total` edges),
/// each within all of `limit`'s bounds except where one extent alone
/// exceeds them (an extent is never split). Cuts fall on page boundaries,
/// and long runs of vertices without lists (the tail of a degree-ordered
/// store) are cut by count: a decoded range costs 16 B per vertex.
pub(crate) fn chunk_ranges(gtt: &Gtt, total: u64, n: u64, limit: ChunkLimit) -> Vec<(u64, u64)> {
    let (pages, edges, vertices) = (limit.pages.max(1), limit.edges.max(1), limit.vertices.max(1));
    let mut cuts = vec![0u64];
    let (mut start, mut i) = (0, 0);
    while i < gtt.len() {
        // The unit starting at i: one packed page or a whole extent.
        let mut j = i + 1;
        while j < gtt.len() && gtt.is_extent(j) && gtt.first_vertex(j) == gtt.first_vertex(i) {
            j += 1;
        }
        let edges_to = |k: usize| if k < gtt.len() { gtt.edges_before(k) } else { total };
        if i > start && (j - start > pages || edges_to(j) - gtt.edges_before(start) > edges) {
            cuts.push(gtt.first_vertex(i));
            start = i;
        }
        i = j;
    }
    cuts.push(n);
    cuts.dedup();
    let mut out = Vec::with_capacity(cuts.len());
    for w in cuts.windows(2) {
        let mut lo = w[0];
        while lo < w[1] {
            let hi = w[1].min(lo + vertices);
            out.push((lo, hi));
            lo = hi;
        }
    }
    out
}

/// The pages of a vertex range as read (`Store::range_pages`). A pass that
/// only folds each list (PageRank's pull) decodes blocks page by page,
/// on several threads, into a small buffer instead of a CSR, which would
/// be 8 bytes per edge written and read back every pass.
pub struct RangePages {
    base: Arc<Base>,
    dir: Direction,
    lo: u64,
    hi: u64,
    /// GTT index of `pages[0]`.
    first: usize,
    pages: Vec<u64>,
    fetched: Fetched,
}

impl RangePages {
    /// Reads the pages holding the lists of [lo, hi) in `dir` of `base`, in
    /// one batch: through the page cache when `cached`, else straight from
    /// the volume (consecutive pages merge into large I/Os).
    pub(crate) fn read(f: Fetcher, base: Arc<Base>, dir: Direction, lo: u64, hi: u64, cached: bool) -> Result<RangePages> {
        let hi = hi.min(base.sb.num_nodes);
        let lo = lo.min(hi);
        let gtt = base.gtt(dir)?;
        // From lo's first page if one starts with it, else from the page
        // before (it may hold lo).
        let lb = gtt.lower_bound(lo);
        let first = if lb < gtt.len() && gtt.first_vertex(lb) == lo { lb } else { lb.saturating_sub(1) };
        let pages: Vec<u64> = (first..gtt.lower_bound(hi)).map(|i| gtt.page(i)).collect();
        let fetched = f.fetch(base.sb.fmt, &pages, cached)?;
        Ok(RangePages { base, dir, lo, hi, first, pages, fetched })
    }

    /// The epoch of the base the pages were read through.
    pub(crate) fn epoch(&self) -> u64 {
        self.base.sb.epoch
    }

    /// The vertices [lo, hi) the pages were read for.
    pub fn range(&self) -> (u64, u64) {
        (self.lo, self.hi)
    }

    pub fn num_pages(&self) -> usize {
        self.pages.len()
    }

    /// Decodes the lists in page `k` whose vertices are in the range, in
    /// vertex order: their ids concatenated into `ids`, and `(v, end of v's
    /// ids)` per list into `rows` (both cleared first). Each page of an
    /// extent gives a part of its vertex's list, in order.
    pub fn page_lists(&self, k: usize, ids: &mut Vec<u64>, rows: &mut Vec<(u64, usize)>) -> Result<()> {
        ids.clear();
        rows.clear();
        self.page_blocks(k, |v, blk, _| {
            blk.push_ids(self.base.sb.num_nodes, ids).map_err(|r| StoreError::Corrupt { page: self.pages[k], reason: format!("vertex {v}: {r}") })?;
            rows.push((v, ids.len()));
            Ok(())
        })
    }

    /// Decodes the lists in page `k` whose vertices are in the range and
    /// pass `want`, in vertex order, each in pieces of at most `piece` ids
    /// (`Block::pieces`, `ids` the buffer): `f(v, piece)` returns false to
    /// leave the rest of v's list undecoded. Lists `want` refuses are not
    /// decoded at all. Each page of an extent gives a part of its vertex's
    /// list.
    pub fn page_pieces(
        &self,
        k: usize,
        piece: usize,
        mut want: impl FnMut(u64) -> bool,
        ids: &mut Vec<u64>,
        mut f: impl FnMut(u64, &[u64]) -> bool,
    ) -> Result<()> {
        let below = self.base.sb.num_nodes;
        self.page_blocks(k, |v, blk, _| {
            if !want(v) {
                return Ok(());
            }
            blk.pieces(piece, below, ids, |p| f(v, p)).map_err(|r| StoreError::Corrupt { page: self.pages[k], reason: format!("vertex {v}: {r}") })
        })
    }

    /// Calls `f(v, block, first edge id)` for each block of page `k` whose
    /// vertex is in the range, in vertex order.
    fn page_blocks(&self, k: usize, mut f: impl FnMut(u64, &Block, u64) -> Result<()>) -> Result<()> {
        let gtt = self.base.gtt(self.dir)?;
        let fmt = self.base.sb.fmt;
        let (pg, pno, gi) = (self.fetched.page(k), self.pages[k], self.first + k);
        let corrupt = |reason: String| StoreError::Corrupt { page: pno, reason };
        if gtt.is_extent(gi) {
            let h = page::open_kind_trusted(pno, pg, Kind::Extent)?;
            self.base.check_epoch(pno, h.epoch)?;
            let v = h.key;
            if v != gtt.first_vertex(gi) {
                return Err(corrupt(format!("extent page of vertex {v} where the translation table has {}", gtt.first_vertex(gi))));
            }
            if v < self.lo || v >= self.hi {
                return Ok(());
            }
            let blk = fmt.extent_block(pg, &h).map_err(|r| corrupt(format!("extent page {} of vertex {v}: {r}", h.aux)))?;
            return f(v, &blk, gtt.edges_before(gi));
        }
        let h = page::open_kind_trusted(pno, pg, Kind::Packed)?;
        self.base.check_epoch(pno, h.epoch)?;
        if (h.count as usize).saturating_mul(DIR_ENTRY) > pg.len() - HEADER {
            return Err(corrupt(format!("directory of {} entries", h.count)));
        }
        let mut prev: Option<u64> = None;
        for e in packed_entries(pg, &h) {
            let v = e.vertex;
            if v < self.lo {
                continue;
            }
            if v >= self.hi {
                break;
            }
            if prev.is_some_and(|p| p >= v) {
                return Err(corrupt(format!("vertex {v} out of order")));
            }
            prev = Some(v);
            let blk = fmt.packed_block(pg, &h, &e).map_err(|r| corrupt(format!("vertex {v}: {r}")))?;
            f(v, &blk, gtt.edges_before(gi) + e.before)?;
        }
        Ok(())
    }

    /// The CSR of the range, every vertex a row, decoding into `spare`'s
    /// buffers.
    pub fn decode(&self, weights: bool, spare: Csr) -> Result<Csr> {
        let gtt = self.base.gtt(self.dir)?;
        let (lo, hi) = (self.lo, self.hi);
        let mut csr = spare;
        let n = (hi - lo) as usize;
        csr.indptr.clear();
        csr.indptr.reserve_exact(n + 1);
        csr.indptr.push(0);
        csr.first_edge.clear();
        csr.first_edge.reserve_exact(n);
        csr.indices.clear();
        csr.weights = weights.then(|| csr.weights.take().unwrap_or_default());
        csr.labels = None;
        // The pages' edges: exact when the range is a chunk (chunks start
        // pages); bounded at open (`base::check_gtt_edges`).
        let end = self.first + self.pages.len();
        let edges = if self.pages.is_empty() {
            0
        } else {
            (if end < gtt.len() { gtt.edges_before(end) } else { self.base.edges(self.dir) }).saturating_sub(gtt.edges_before(self.first))
        };
        csr.indices.reserve_exact(edges as usize);
        if let Some(w) = csr.weights.as_mut() {
            w.clear();
            w.reserve_exact(edges as usize);
        }
        // The vertex whose row comes next; a block of the vertex before it
        // continues that row (an extent's later pages).
        let mut next = lo;
        for k in 0..self.pages.len() {
            self.page_blocks(k, |v, blk, first_edge| {
                let corrupt = |reason: String| StoreError::Corrupt { page: self.pages[k], reason: format!("vertex {v}: {reason}") };
                if v + 1 == next && next > lo {
                    // Continues the last row.
                } else if v >= next {
                    while next < v {
                        csr.indptr.push(csr.indices.len() as u64);
                        csr.first_edge.push(0);
                        next += 1;
                    }
                    csr.first_edge.push(first_edge);
                    csr.indptr.push(0);
                    next = v + 1;
                } else {
                    return Err(corrupt("lists out of order".into()));
                }
                blk.push_ids(self.base.sb.num_nodes, &mut csr.indices).map_err(corrupt)?;
                if let Some(w) = csr.weights.as_mut() {
                    blk.push_weights(w);
                }
                *csr.indptr.last_mut().expect("row pushed") = csr.indices.len() as u64;
                Ok(())
            })?;
        }
        while next < hi {
            csr.indptr.push(csr.indices.len() as u64);
            csr.first_edge.push(0);
            next += 1;
        }
        Ok(csr)
    }
}
