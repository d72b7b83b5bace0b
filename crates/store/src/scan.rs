//! Reads for whole-graph work: consecutive vertex ranges read straight from
//! the volume (large merged I/Os, no cache pollution), and the ranges that
//! cut an adjacency region into chunks of about the same number of pages.

use std::sync::Arc;

use crate::cache::PageRef;
use crate::error::Result;
use crate::page;
use crate::store::{Csr, Direction, Store};

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
    pub fn read_range(&self, dir: Direction, lo: u64, hi: u64, weights: bool) -> Result<Csr> {
        let ids: Vec<u64> = (lo..hi.min(self.num_nodes())).collect();
        self.neighbors_with(&ids, dir, weights, false, false)
    }

    /// Reads pages bypassing the cache; duplicates share one copy.
    pub fn fetch_direct(&self, pages: &[u64]) -> Result<Vec<PageRef>> {
        let mut distinct = pages.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        let got = self.volume().read(&distinct)?;
        let mut refs: Vec<PageRef> = Vec::with_capacity(distinct.len());
        for (i, &p) in distinct.iter().enumerate() {
            page::open(p, got.page(i))?;
            refs.push(Arc::from(got.page(i)));
        }
        Ok(pages.iter().map(|p| refs[distinct.binary_search(p).expect("read above")].clone()).collect())
    }
}
