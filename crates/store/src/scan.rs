//! Reads for whole-graph work: consecutive vertex ranges read straight from
//! the volume (large merged I/Os, no cache pollution), and the ranges that
//! cut an adjacency region into chunks of about the same number of pages.

use solidgraph_io::Pages;

use crate::cache::PageRef;
use crate::error::Result;
use crate::page;
use crate::store::{Csr, Direction, Store};

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

    /// Neighbor lists of every vertex in [lo, hi), read directly from the
    /// volume in one batch (consecutive pages merge into large I/Os).
    /// `spare`: a CSR whose buffers the result reuses.
    pub fn read_range(&self, dir: Direction, lo: u64, hi: u64, weights: bool, spare: Csr) -> Result<Csr> {
        let ids: Vec<u64> = (lo..hi.min(self.num_nodes())).collect();
        self.neighbors_with(&ids, dir, weights, false, false, spare)
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
