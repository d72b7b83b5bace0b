//! The read planner: the pages a batch of lists needs (from the GTT and
//! presence bitmap, no read), fetched in one call, then walked block by
//! block into a CSR, degrees or whatever a caller folds them into.

use crate::adjacency::{Block, find_in_packed};
use crate::base::Base;
use crate::error::{Result, StoreError};
use crate::fetch::{Fetched, Fetcher};
use crate::gtt::{Gtt, Loc};
use crate::page::{self, Kind};

/// Neighbor lists of a batch in CSR form: the lists of `ids[i]` are
/// `indices[indptr[i]..indptr[i + 1]]`, sorted by neighbor id. The k-th edge
/// of list i has global edge id `first_edge[i] + k` (its position in the
/// direction's CSR order).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Csr {
    pub indptr: Vec<u64>,
    pub indices: Vec<u64>,
    pub first_edge: Vec<u64>,
    pub weights: Option<Vec<f32>>,
    pub labels: Option<Vec<u32>>,
}

/// The pages each id's list needs, in one list, plus where each id's
/// pages start in it.
pub(crate) fn plan(gtt: &Gtt, ids: &[u64]) -> (Vec<Loc>, Vec<u64>) {
    let mut locs = Vec::with_capacity(ids.len());
    let mut pages = Vec::with_capacity(ids.len());
    for &v in ids {
        let loc = gtt.locate(v);
        match loc {
            Loc::Nowhere => {}
            Loc::Packed(i) => pages.push(gtt.page(i)),
            Loc::Extent { first, len } => pages.extend((first..first + len).map(|i| gtt.page(i))),
        }
        locs.push(loc);
    }
    (locs, pages)
}

/// The lists of `ids` in one direction of a base, their pages planned and
/// fetched.
pub(crate) struct Planned<'a> {
    base: &'a Base,
    gtt: &'a Gtt,
    ids: &'a [u64],
    locs: Vec<Loc>,
    pages: Vec<u64>,
    fetched: Fetched,
}

impl<'a> Planned<'a> {
    /// Plans `ids`' lists in `gtt` (a table of `base`) and fetches their
    /// pages, through the page cache when `cached`.
    pub fn fetch(f: Fetcher, base: &'a Base, gtt: &'a Gtt, ids: &'a [u64], cached: bool) -> Result<Planned<'a>> {
        let (locs, pages) = plan(gtt, ids);
        let fetched = f.fetch(base.sb.fmt, &pages, cached)?;
        Ok(Planned { base, gtt, ids, locs, pages, fetched })
    }

    /// Calls `f(i, block, first edge id)` for every block of id i's list,
    /// in order; an `Err(reason)` from `f` (a block that does not decode)
    /// comes back as corruption of its page.
    pub fn walk(&self, mut f: impl FnMut(usize, &Block, u64) -> std::result::Result<(), String>) -> Result<()> {
        let (base, gtt, fetched) = (self.base, self.gtt, &self.fetched);
        let fmt = base.sb.fmt;
        let mut k = 0;
        for (i, (&v, loc)) in self.ids.iter().zip(&self.locs).enumerate() {
            match *loc {
                Loc::Nowhere => {}
                Loc::Packed(gi) => {
                    let (pg, pno) = (fetched.page(k), self.pages[k]);
                    k += 1;
                    let h = page::open_kind_trusted(pno, pg, Kind::Packed)?;
                    base.check_epoch(pno, h.epoch)?;
                    if let Some(e) = find_in_packed(pg, &h, v) {
                        let corrupt = |reason: String| StoreError::Corrupt { page: pno, reason: format!("vertex {v}: {reason}") };
                        let blk = fmt.packed_block(pg, &h, &e).map_err(corrupt)?;
                        f(i, &blk, gtt.edges_before(gi) + e.before).map_err(corrupt)?;
                    }
                }
                Loc::Extent { first, len } => {
                    for j in 0..len {
                        let (pg, pno) = (fetched.page(k), self.pages[k]);
                        k += 1;
                        let blk = extent_page(base, pno, pg, v, j)?;
                        f(i, &blk, gtt.edges_before(first + j))
                            .map_err(|reason| StoreError::Corrupt { page: pno, reason: format!("extent page {j} of vertex {v}: {reason}") })?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Each list's edges in the pages (its degree before any pending
    /// update).
    pub fn degrees(&self) -> Result<Vec<u64>> {
        let mut degree = vec![0u64; self.ids.len()];
        self.walk(|i, blk, _| {
            degree[i] += blk.d as u64;
            Ok(())
        })?;
        Ok(degree)
    }

    /// The lists as a CSR, decoded into `spare`'s buffers.
    pub fn csr(&self, weights: bool, labels: bool, spare: Csr) -> Result<Csr> {
        let n = self.ids.len();
        let mut csr = spare;
        csr.indptr.clear();
        csr.indptr.resize(n + 1, 0);
        csr.indices.clear();
        csr.first_edge.clear();
        csr.first_edge.resize(n, 0);
        csr.weights = emptied(csr.weights.take(), weights);
        csr.labels = emptied(csr.labels.take(), labels);
        // Counted first, so the columns are allocated once at their size:
        // grown by doubling they would hold up to twice the memory (and a
        // scan keeps several batches alive).
        self.walk(|i, blk, e| {
            if csr.indptr[i + 1] == 0 {
                csr.first_edge[i] = e;
            }
            csr.indptr[i + 1] += blk.d as u64;
            Ok(())
        })?;
        for i in 0..n {
            csr.indptr[i + 1] += csr.indptr[i];
        }
        let m = csr.indptr[n] as usize;
        csr.indices.reserve_exact(m);
        csr.weights.iter_mut().for_each(|w| w.reserve_exact(m));
        csr.labels.iter_mut().for_each(|l| l.reserve_exact(m));
        self.walk(|_, blk, _| {
            blk.push_ids(self.base.sb.num_nodes, &mut csr.indices)?;
            if let Some(w) = csr.weights.as_mut() {
                blk.push_weights(w);
            }
            if let Some(l) = csr.labels.as_mut() {
                blk.push_labels(l);
            }
            Ok(())
        })?;
        Ok(csr)
    }
}

/// An empty column, in `col`'s buffer when there is one; None unless `want`.
fn emptied<T>(col: Option<Vec<T>>, want: bool) -> Option<Vec<T>> {
    want.then(|| {
        let mut c = col.unwrap_or_default();
        c.clear();
        c
    })
}

/// Page `j` of vertex `v`'s extent, as fetched: its header, epoch and edge
/// count checked.
pub(crate) fn extent_page<'p>(base: &Base, pno: u64, pg: &'p [u8], v: u64, j: usize) -> Result<Block<'p>> {
    let corrupt = |reason: String| StoreError::Corrupt { page: pno, reason: format!("extent page {j} of vertex {v}: {reason}") };
    let h = page::open_kind_trusted(pno, pg, Kind::Extent)?;
    base.check_epoch(pno, h.epoch)?;
    if h.key != v || h.aux as usize != j {
        return Err(corrupt("inconsistent header".into()));
    }
    base.sb.fmt.extent_block(pg, &h).map_err(corrupt)
}
