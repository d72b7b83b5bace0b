//! Reads for whole-graph work: consecutive vertex ranges read straight from
//! the volume (large merged I/Os, no cache pollution), and the ranges that
//! cut an adjacency region into chunks of about the same number of pages.

use solidgraph_io::Pages;

use crate::adjacency::{DIR_ENTRY, packed_entries};
use crate::cache::PageRef;
use crate::error::{Result, StoreError};
use crate::gtt::Gtt;
use crate::page::{self, HEADER, Kind};
use crate::store::{Base, Csr, Direction, Store, check_columns};

/// Pages fetched for one read, in the order asked.
pub enum Fetched {
    /// Shared with the page cache.
    Cached(Vec<PageRef>),
    /// In the buffers of one volume read; `at[k]`: the slot of page k.
    Direct { got: Pages, at: Vec<u32> },
}

impl Fetched {
    /// The k-th page asked for.
    pub fn page(&self, k: usize) -> &[u8] {
        match self {
            Fetched::Cached(refs) => &refs[k],
            Fetched::Direct { got, at } => got.page(at[k] as usize),
        }
    }
}

impl Store {
    /// Splits [0, num_nodes) into vertex ranges whose lists fill about
    /// `pages_per_chunk` adjacency pages each; an extent is never split.
    pub fn chunk_ranges(&self, dir: Direction, pages_per_chunk: usize) -> Result<Vec<(u64, u64)>> {
        let gtt = self.gtt(dir)?;
        let n = self.num_nodes();
        let mut cuts = vec![0u64];
        let mut i = pages_per_chunk.max(1);
        while i < gtt.len() {
            // Move forward past the rest of an extent.
            while i < gtt.len() && gtt.is_extent(i) && gtt.first_vertex(i) == gtt.first_vertex(i - 1) {
                i += 1;
            }
            if i < gtt.len() {
                let v = gtt.first_vertex(i);
                if v > *cuts.last().expect("non-empty") {
                    cuts.push(v);
                }
            }
            i += pages_per_chunk.max(1);
        }
        cuts.push(n);
        cuts.dedup();
        Ok(cuts.windows(2).map(|w| (w[0], w[1])).collect())
    }

    /// Neighbor lists of every vertex in [lo, hi), in one batch: the pages
    /// that hold the range, decoded in page order (no per-vertex lookups).
    /// `cached`: through the page cache, or straight from the volume
    /// (consecutive pages merge into large I/Os). `spare`: a CSR whose
    /// buffers the result reuses.
    pub fn read_range(&self, dir: Direction, lo: u64, hi: u64, weights: bool, cached: bool, mut spare: Csr) -> Result<Csr> {
        let hi = hi.min(self.num_nodes());
        let lo = lo.min(hi);
        loop {
            let base = self.base();
            check_columns(&base.sb, weights, false)?;
            if !self.delta.read().unwrap().is_empty() {
                // Pending updates: the general path merges them in.
                let ids: Vec<u64> = (lo..hi).collect();
                return self.neighbors_with(&ids, dir, weights, false, cached, spare);
            }
            let gtt = base.gtt(dir)?;
            // From lo's first page if one starts with it, else from the
            // page before (it may hold lo).
            let lb = gtt.lower_bound(lo);
            let first = if lb < gtt.len() && gtt.first_vertex(lb) == lo { lb } else { lb.saturating_sub(1) };
            let pages: Vec<u64> = (first..gtt.lower_bound(hi)).map(|i| gtt.page(i)).collect();
            let fetched = if cached { self.fetch(&pages)? } else { self.fetch_direct(&pages)? };
            let csr = decode_range(&base, gtt, lo, hi, first, &pages, &fetched, weights, spare)?;
            let d = self.delta.read().unwrap();
            if d.epoch == base.sb.epoch && d.is_empty() {
                return Ok(csr);
            }
            spare = csr;
        }
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

/// Builds the CSR of [lo, hi) from the pages of GTT entries `first..`,
/// fetched in order, walking each packed page's directory in order.
#[allow(clippy::too_many_arguments)]
fn decode_range(base: &Base, gtt: &Gtt, lo: u64, hi: u64, first: usize, pages: &[u64], fetched: &Fetched, weights: bool, spare: Csr) -> Result<Csr> {
    let fmt = base.sb.fmt;
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
    // The pages' edges: exact when [lo, hi) is a chunk (chunks start pages).
    let end = first + pages.len();
    let edges = (if end < gtt.len() { gtt.edges_before(end) } else { base.sb.num_edges }) - pages.first().map_or(0, |_| gtt.edges_before(first));
    csr.indices.reserve_exact(edges as usize);
    if let Some(w) = csr.weights.as_mut() {
        w.clear();
        w.reserve_exact(edges as usize);
    }
    // The vertex whose row comes next; an extent page past the first
    // continues the row of the vertex before it.
    let mut next = lo;
    let mut extent: Option<(u64, u32)> = None;
    for (k, &pno) in pages.iter().enumerate() {
        let (pg, gi) = (fetched.page(k), first + k);
        let corrupt = |reason: String| StoreError::Corrupt { page: pno, reason };
        if gtt.is_extent(gi) {
            let h = page::open_kind_trusted(pno, pg, Kind::Extent)?;
            base.check_epoch(pno, h.epoch)?;
            let v = h.key;
            if v != gtt.first_vertex(gi) {
                return Err(corrupt(format!("extent page of vertex {v} where the translation table has {}", gtt.first_vertex(gi))));
            }
            if v < lo || v >= hi {
                continue;
            }
            let blk = fmt.block(&pg[HEADER..]).map_err(|r| corrupt(format!("extent page {} of vertex {v}: {r}", h.aux)))?;
            if blk.d != h.count as usize {
                return Err(corrupt(format!("extent page {} of vertex {v} holds {} edges, its header says {}", h.aux, blk.d, h.count)));
            }
            if h.aux == 0 {
                if v < next {
                    return Err(corrupt(format!("vertex {v} out of order")));
                }
                while next < v {
                    csr.indptr.push(csr.indices.len() as u64);
                    csr.first_edge.push(0);
                    next += 1;
                }
                csr.first_edge.push(gtt.edges_before(gi));
                csr.indptr.push(0);
                next = v + 1;
            } else if extent != Some((v, h.aux - 1)) {
                return Err(corrupt(format!("extent page {} of vertex {v} out of sequence", h.aux)));
            }
            extent = Some((v, h.aux));
            blk.push_ids(&mut csr.indices).map_err(|r| corrupt(format!("vertex {v}: {r}")))?;
            if let Some(w) = csr.weights.as_mut() {
                blk.push_weights(w);
            }
            *csr.indptr.last_mut().expect("row pushed") = csr.indices.len() as u64;
            continue;
        }
        extent = None;
        let h = page::open_kind_trusted(pno, pg, Kind::Packed)?;
        base.check_epoch(pno, h.epoch)?;
        let dir_start = pg.len().checked_sub(h.count as usize * DIR_ENTRY).filter(|&d| d >= HEADER).ok_or_else(|| corrupt(format!("directory of {} entries", h.count)))?;
        for e in packed_entries(pg, &h) {
            let v = e.vertex;
            if v < lo {
                continue;
            }
            if v >= hi {
                break;
            }
            if v < next || e.start < HEADER || e.start >= e.end || e.end > dir_start {
                return Err(corrupt(format!("bad directory entry for vertex {v}")));
            }
            while next < v {
                csr.indptr.push(csr.indices.len() as u64);
                csr.first_edge.push(0);
                next += 1;
            }
            let blk = fmt.block(&pg[e.start..e.end]).map_err(|r| corrupt(format!("vertex {v}: {r}")))?;
            csr.first_edge.push(gtt.edges_before(gi) + e.before);
            blk.push_ids(&mut csr.indices).map_err(|r| corrupt(format!("vertex {v}: {r}")))?;
            if let Some(w) = csr.weights.as_mut() {
                blk.push_weights(w);
            }
            csr.indptr.push(csr.indices.len() as u64);
            next = v + 1;
        }
    }
    while next < hi {
        csr.indptr.push(csr.indices.len() as u64);
        csr.first_edge.push(0);
        next += 1;
    }
    Ok(csr)
}
