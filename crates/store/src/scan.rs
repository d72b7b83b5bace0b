//! Reads for whole-graph work: consecutive vertex ranges read straight from
//! the volume (large merged I/Os, no cache pollution), and the ranges that
//! cut an adjacency region into chunks of about the same number of pages.

use std::sync::Arc;

use solidgraph_io::Pages;

use crate::adjacency::{Block, DIR_ENTRY, packed_entries};
use crate::cache::PageRef;
use crate::error::{Result, StoreError};
use crate::page::{self, HEADER, Kind};
use crate::store::{Base, Csr, Direction, Store, check_columns};

/// Pages fetched for one read, in the order asked.
pub enum Fetched {
    /// Shared with the page cache: entries of `page_size` bytes, an extent
    /// page's followed by its checkpoints (`Block::skips`).
    Cached { refs: Vec<PageRef>, page_size: usize },
    /// In the buffers of one volume read; `at[k]`: the slot of page k.
    Direct { got: Pages, at: Vec<u32> },
}

impl Fetched {
    /// The k-th page asked for.
    pub fn page(&self, k: usize) -> &[u8] {
        match self {
            Fetched::Cached { refs, page_size } => &refs[k][..*page_size],
            Fetched::Direct { got, at } => got.page(at[k] as usize),
        }
    }

    /// The checkpoints kept with the k-th page (empty when none).
    pub fn skips(&self, k: usize) -> &[u8] {
        match self {
            Fetched::Cached { refs, page_size } => &refs[k][*page_size..],
            Fetched::Direct { .. } => &[],
        }
    }
}

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

impl Store {
    /// Splits [0, num_nodes) into vertex ranges, each within all of
    /// `limit`'s bounds except where one extent alone exceeds them (an
    /// extent is never split). Cuts fall on page boundaries, and long runs
    /// of vertices without lists (the tail of a degree-ordered store) are
    /// cut by count: a decoded range costs 16 B per vertex.
    pub fn chunk_ranges(&self, dir: Direction, limit: ChunkLimit) -> Result<Vec<(u64, u64)>> {
        self.check_lower(dir)?;
        let base = self.base();
        let gtt = base.gtt(dir)?;
        let total = base.edges(dir);
        let n = self.num_nodes();
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
        Ok(out)
    }

    /// Neighbor lists of every vertex in [lo, hi), in one batch (see
    /// `range_pages`). `spare`: a CSR whose buffers the result reuses.
    pub fn read_range(&self, dir: Direction, lo: u64, hi: u64, weights: bool, cached: bool, mut spare: Csr) -> Result<Csr> {
        check_columns(&self.base().sb, weights, false)?;
        loop {
            let Some(rp) = self.range_pages(dir, lo, hi, cached)? else {
                // Pending updates: the general path merges them in.
                let ids: Vec<u64> = (lo..hi.min(self.num_nodes())).collect();
                return self.neighbors_with(&ids, dir, weights, false, cached, spare);
            };
            let csr = rp.decode(weights, spare)?;
            let d = self.delta.read().unwrap();
            if d.epoch == rp.base.sb.epoch && d.is_empty() {
                return Ok(csr);
            }
            spare = csr;
        }
    }

    /// The pages holding the lists of [lo, hi), read in one batch, to be
    /// decoded in page order (no per-vertex lookups); None while updates
    /// are pending (they live in the delta, not in pages). `cached`:
    /// through the page cache, or straight from the volume (consecutive
    /// pages merge into large I/Os).
    pub fn range_pages(&self, dir: Direction, lo: u64, hi: u64, cached: bool) -> Result<Option<RangePages>> {
        let base = self.base();
        if !self.delta.read().unwrap().is_empty() {
            return Ok(None);
        }
        let hi = hi.min(base.sb.num_nodes);
        let lo = lo.min(hi);
        let gtt = base.gtt(dir)?;
        // From lo's first page if one starts with it, else from the page
        // before (it may hold lo).
        let lb = gtt.lower_bound(lo);
        let first = if lb < gtt.len() && gtt.first_vertex(lb) == lo { lb } else { lb.saturating_sub(1) };
        let pages: Vec<u64> = (first..gtt.lower_bound(hi)).map(|i| gtt.page(i)).collect();
        let fetched = if cached { self.fetch(&pages)? } else { self.fetch_direct(&pages)? };
        Ok(Some(RangePages { base, dir, lo, hi, first, pages, fetched }))
    }

    /// Reads pages bypassing the cache, into the volume's own buffers (a
    /// scan's pages are not copied: per-page copies doubled a batch's
    /// memory and fragmented the heap); duplicates are read once.
    pub(crate) fn fetch_direct(&self, pages: &[u64]) -> Result<Fetched> {
        let mut distinct = pages.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        let got = self.volume().read(&distinct)?;
        for (i, &p) in distinct.iter().enumerate() {
            page::open(p, got.page(i))?;
        }
        let at = pages.iter().map(|p| distinct.binary_search(p).expect("read above") as u32).collect();
        Ok(Fetched::Direct { got, at })
    }
}

/// The pages of a vertex range as read (`Store::range_pages`). A pass that
/// only folds each list (PageRank's pull) decodes blocks page by page,
/// on several threads, into a small buffer instead of a CSR: the CSR of a
/// scale-24 graph is 4 GiB of u64 writes and reads per pass.
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
            blk.push_ids(ids).map_err(|r| StoreError::Corrupt { page: self.pages[k], reason: format!("vertex {v}: {r}") })?;
            rows.push((v, ids.len()));
            Ok(())
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
        // pages).
        let end = self.first + self.pages.len();
        let edges = (if end < gtt.len() { gtt.edges_before(end) } else { self.base.edges(self.dir) }) - if self.pages.is_empty() { 0 } else { gtt.edges_before(self.first) };
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
                blk.push_ids(&mut csr.indices).map_err(corrupt)?;
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
