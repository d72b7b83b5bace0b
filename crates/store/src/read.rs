//! The store's batched reads. Each takes the current base, reads its pages
//! holding no lock, then patches in the pending updates under the delta's
//! read lock; a delta of another epoch means a merge swapped the base
//! during the read, and the read starts again.

use solidgraph_io::sync::RwLockExt;

use crate::base::{Base, Direction, load_table};
use crate::cache::{ImageKey, image_bytes};
use crate::error::{Result, StoreError};
use crate::planner::{Csr, Planned};
use crate::scan::{self, ChunkLimit, RangePages};
use crate::store::Store;
use crate::tensor;

/// Bytes of vertex state a whole-graph pass keeps at least per vertex.
const PASS_STATE: u64 = 8;

/// Rows gathered from a tensor, in request order, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Rows {
    pub dtype: tensor::DType,
    pub dim: u64,
    pub data: Vec<u8>,
}

impl Store {
    /// The store has lower lists (`Direction::Lower`) that hold every edge:
    /// imported with them, and no updates since.
    pub fn has_lower_lists(&self) -> bool {
        self.base().lower.is_some() && self.delta.read_locked().is_empty()
    }

    /// Every vertex's out-degree as the lower lists' import counted it
    /// (one sequential read of 4 bytes per vertex): a pass over the lower
    /// lists sees only part of each. None without lower lists (or with
    /// updates pending).
    pub fn lower_degrees(&self) -> Result<Option<Vec<u32>>> {
        let base = self.base();
        let Some(l) = base.sb.lower.filter(|_| self.has_lower_lists()) else { return Ok(None) };
        let n = base.sb.num_nodes as usize;
        if l.degrees.words != n.div_ceil(2) as u64 {
            return Err(StoreError::Corrupt { page: l.degrees.start, reason: format!("degree table of {} words for {n} vertices", l.degrees.words) });
        }
        let words = load_table(self.volume(), &l.degrees)?;
        let mut d: Vec<u32> = Vec::with_capacity(n);
        crate::mem::advise_huge(&d);
        d.extend(words.iter().flat_map(|&w| [w as u32, (w >> 32) as u32]).take(n));
        Ok(Some(d))
    }

    pub fn neighbors(&self, ids: &[u64], dir: Direction, weights: bool, labels: bool) -> Result<Csr> {
        self.neighbors_with(ids, dir, weights, labels, true, Csr::default())
    }

    /// Like `neighbors`, choosing whether pages go through the cache (whole
    /// graph scans bypass it: large merged reads, no cache pollution), and
    /// decoding into `spare`'s buffers: a scan that hands back each batch's
    /// CSR allocates nothing per batch (fresh multi-MiB buffers per batch
    /// fragment the heap past the memory budget).
    pub fn neighbors_with(&self, ids: &[u64], dir: Direction, weights: bool, labels: bool, cached: bool, mut spare: Csr) -> Result<Csr> {
        self.check_lower(dir)?;
        self.check_ids(ids)?;
        loop {
            let base = self.base();
            base.check_columns(weights, labels)?;
            let gtt = base.gtt(dir)?;
            let csr = Planned::fetch(self.fetcher(), &base, gtt, ids, cached)?.csr(weights, labels, spare)?;
            let out_dir = dir == Direction::Out || !base.sb.directed;
            let d = self.delta.read_locked();
            // A merge swapped the base during the read: read again.
            if d.epoch == base.sb.epoch {
                return Ok(d.patch(ids, csr, out_dir));
            }
            spare = csr;
        }
    }

    pub fn degree(&self, ids: &[u64], dir: Direction) -> Result<Vec<u64>> {
        self.check_lower(dir)?;
        self.check_ids(ids)?;
        loop {
            let base = self.base();
            {
                let d = self.delta.read_locked();
                if d.epoch == base.sb.epoch && !d.is_empty() {
                    drop(d);
                    let csr = self.neighbors(ids, dir, false, false)?;
                    return Ok(csr.indptr.windows(2).map(|w| w[1] - w[0]).collect());
                }
            }
            let gtt = base.gtt(dir)?;
            let deg = Planned::fetch(self.fetcher(), &base, gtt, ids, true)?.degrees()?;
            let d = self.delta.read_locked();
            if d.epoch == base.sb.epoch && d.is_empty() {
                return Ok(deg);
            }
        }
    }

    /// Weight of edge src[i] -> dst[i], NaN where there is no such edge.
    pub fn edge_weights(&self, src: &[u64], dst: &[u64]) -> Result<Vec<f32>> {
        if src.len() != dst.len() {
            return Err(StoreError::Invalid(format!("{} sources but {} destinations", src.len(), dst.len())));
        }
        self.check_columns(true, false)?;
        self.check_ids(src)?;
        self.check_ids(dst)?;
        // Lists come back sorted by neighbor id: binary search each one.
        let csr = self.neighbors(src, Direction::Out, true, false)?;
        let w = csr.weights.as_ref().expect("asked for weights");
        Ok((0..src.len())
            .map(|i| {
                let (a, b) = (csr.indptr[i] as usize, csr.indptr[i + 1] as usize);
                csr.indices[a..b].binary_search(&dst[i]).map_or(f32::NAN, |k| w[a + k])
            })
            .collect())
    }

    /// Whether each out-edge src[i] -> dst[i] exists now, with its label:
    /// a binary search in each source's pages, no lists decoded (the
    /// validation read of every update batch).
    pub(crate) fn find_edges(&self, src: &[u64], dst: &[u64]) -> Result<Vec<Option<u32>>> {
        // Edges grouped by source: uniq[i]'s edges are order[starts[i]..starts[i + 1]].
        let mut order: Vec<usize> = (0..src.len()).collect();
        order.sort_unstable_by_key(|&e| src[e]);
        let mut uniq: Vec<u64> = Vec::new();
        let mut starts = Vec::new();
        for (k, &e) in order.iter().enumerate() {
            if uniq.last() != Some(&src[e]) {
                uniq.push(src[e]);
                starts.push(k);
            }
        }
        starts.push(order.len());
        loop {
            let base = self.base();
            let fmt = base.sb.fmt;
            let lists = Planned::fetch(self.fetcher(), &base, &base.out, &uniq, true)?;
            let mut found: Vec<Option<u32>> = vec![None; src.len()];
            // An extent's list comes in several blocks: search each.
            lists.walk(|i, blk, _| {
                for &e in &order[starts[i]..starts[i + 1]] {
                    if let Some(j) = blk.find(dst[e])? {
                        found[e] = Some(if fmt.labels { blk.label_at(j) } else { 0 });
                    }
                }
                Ok(())
            })?;
            let d = self.delta.read_locked();
            if d.epoch != base.sb.epoch {
                continue;
            }
            if !d.is_empty() {
                for (e, f) in found.iter_mut().enumerate() {
                    if let Some(over) = d.edge(src[e], dst[e]) {
                        *f = over;
                    }
                }
            }
            return Ok(found);
        }
    }

    /// Splits [0, num_nodes) into vertex ranges for whole-graph passes (see
    /// `scan::chunk_ranges`).
    pub fn chunk_ranges(&self, dir: Direction, limit: ChunkLimit) -> Result<Vec<(u64, u64)>> {
        self.check_lower(dir)?;
        self.check_pass_state()?;
        let base = self.base();
        Ok(scan::chunk_ranges(base.gtt(dir)?, base.edges(dir), self.num_nodes(), limit))
    }

    /// Refuses a whole-graph pass over more vertices than the machine can
    /// keep state for (at least `PASS_STATE` bytes a vertex: levels,
    /// labels, ranks), before anything is sized or walked by the count:
    /// such a pass would abort on its allocation or walk billions of
    /// ranges.
    fn check_pass_state(&self) -> Result<()> {
        let (n, memory) = (self.num_nodes(), crate::mem::machine_memory());
        let need = n.saturating_mul(PASS_STATE);
        if memory != 0 && need > memory {
            return Err(StoreError::Invalid(format!(
                "a whole-graph pass over {n} vertices needs at least {need} bytes of vertex state, more than this machine's memory ({memory} bytes)"
            )));
        }
        Ok(())
    }

    /// Neighbor lists of every vertex in [lo, hi), in one batch (see
    /// `range_pages`). `spare`: a CSR whose buffers the result reuses.
    pub fn read_range(&self, dir: Direction, lo: u64, hi: u64, weights: bool, cached: bool, mut spare: Csr) -> Result<Csr> {
        self.check_columns(weights, false)?;
        loop {
            let Some(rp) = self.range_pages(dir, lo, hi, cached)? else {
                // Pending updates: the general path merges them in.
                let ids: Vec<u64> = (lo..hi.min(self.num_nodes())).collect();
                return self.neighbors_with(&ids, dir, weights, false, cached, spare);
            };
            let csr = rp.decode(weights, spare)?;
            let d = self.delta.read_locked();
            if d.epoch == rp.epoch() && d.is_empty() {
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
        if !self.delta.read_locked().is_empty() {
            return Ok(None);
        }
        if cached {
            self.hold_whole(&base, dir)?;
        }
        RangePages::read(self.fetcher(), base, dir, lo, hi, cached).map(Some)
    }

    /// A pass through the cache reads whole ranges: the cache keeps the
    /// direction as an image if its budget holds it (`cache::Image`), so
    /// that every pass after the first reads memory by position.
    fn hold_whole(&self, base: &Base, dir: Direction) -> Result<()> {
        let gtt = base.gtt(dir)?;
        let cache = self.fetcher().cache;
        if cache.budget() < image_bytes(gtt.len(), self.volume().page_size()) {
            return Ok(());
        }
        if gtt.is_empty() {
            return Ok(());
        }
        let key = ImageKey { epoch: base.sb.epoch, first: gtt.page(0), pages: gtt.len() };
        cache.image_for(key, || {
            let mut pages: Vec<u64> = (0..gtt.len()).map(|i| gtt.page(i)).collect();
            pages.sort_unstable();
            pages.dedup();
            pages
        });
        Ok(())
    }

    /// Gathers rows `ids` of tensor `name` (`gather.rs`): each page read
    /// once for the batch, rows written since the last merge taken from the
    /// delta.
    pub fn tensor(&self, name: &str, ids: &[u64]) -> Result<Rows> {
        let meta = self.tensor_meta(name)?;
        // Fresh memory reads as zeros: rows without a page need no clearing.
        let mut data = crate::mem::zeroed(ids.len().saturating_mul(meta.row_bytes() as usize));
        self.gather_rows(name, ids, &mut data, false)?;
        Ok(Rows { dtype: meta.dtype, dim: meta.dim, data })
    }

    /// `tensor` into the caller's buffer `out` of `ids.len()` rows
    /// (`tensor_meta(name).row_bytes()` each), row-major, in request order:
    /// a caller that owns where the rows must end up (a reply's shared
    /// memory) gathers them there with no copy after. Every byte of `out`
    /// is written; rows no page holds yet read as zeros.
    pub fn tensor_into(&self, name: &str, ids: &[u64], out: &mut [u8]) -> Result<()> {
        self.gather_rows(name, ids, out, true)
    }

    /// The gather of `tensor` and `tensor_into`; `clear`: zero the rows
    /// that no page holds (`out` is not fresh memory).
    fn gather_rows(&self, name: &str, ids: &[u64], out: &mut [u8], mut clear: bool) -> Result<()> {
        self.check_ids(ids)?;
        self.warming().wait();
        loop {
            let base = self.base();
            let ti = base.tensor_index(name)?;
            let t = &base.sb.tensors[ti];
            let rb = t.row_bytes() as usize;
            if ids.len().checked_mul(rb) != Some(out.len()) {
                return Err(StoreError::Invalid(format!("a buffer of {} bytes for {} rows of tensor {name:?} ({rb} bytes a row)", out.len(), ids.len())));
            }
            if clear {
                for (i, _) in ids.iter().enumerate().filter(|&(_, &r)| r >= t.rows) {
                    out[i * rb..(i + 1) * rb].fill(0);
                }
            }
            self.gather().pages_into(&base, ti, ids, out, true)?;
            let delta = self.delta.read_locked();
            if delta.epoch != base.sb.epoch {
                // The next pass writes over this one's rows.
                clear = true;
                continue;
            }
            if delta.rows.contains_key(name) {
                for (i, &r) in ids.iter().enumerate() {
                    if let Some(row) = delta.row(name, r) {
                        out[i * rb..(i + 1) * rb].copy_from_slice(row);
                    }
                }
            }
            return Ok(());
        }
    }
}
