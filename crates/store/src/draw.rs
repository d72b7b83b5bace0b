//! The sampler's partial reads: neighbors at drawn positions, reading only
//! the extent pages that hold them or decoding a list only up to its last
//! drawn position. All refuse while updates are pending (positions index
//! the pages' lists), and the sampler then reads whole patched lists.

use solidgraph_io::sync::RwLockExt;

use crate::base::Direction;
use crate::error::{Result, StoreError};
use crate::gtt::Loc;
use crate::planner::{Planned, extent_page};
use crate::store::Store;

/// Neighbors drawn from lists (`Store::neighbors_drawn`): list i's are
/// `counts[i]` consecutive entries of `ids` and `edges`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Drawn {
    pub ids: Vec<u64>,
    pub edges: Vec<u64>,
    pub counts: Vec<usize>,
}

impl Store {
    /// The degree of each id whose list is an extent (None otherwise, and
    /// for every id while updates are pending): known from the GTT's edge
    /// counts without a read, so a sampler can draw positions first and
    /// read only the pages that hold them (`neighbors_at`).
    pub fn extent_degrees(&self, ids: &[u64], dir: Direction) -> Result<Vec<Option<u64>>> {
        self.check_lower(dir)?;
        let base = self.base();
        let gtt = base.gtt(dir)?;
        if !self.delta.read_locked().is_empty() {
            return Ok(vec![None; ids.len()]);
        }
        let total = base.edges(dir);
        Ok(ids
            .iter()
            .map(|&v| match gtt.locate(v) {
                Loc::Extent { first, len } => Some((first..first + len).map(|i| gtt.entry_edges(i, total)).sum()),
                _ => None,
            })
            .collect())
    }
    /// For each `(v, degree, positions)`: the neighbors at those positions
    /// of v's extent list (sorted as `neighbors` returns it) and their edge
    /// ids, flattened, reading only the pages that hold them. None when a
    /// list is no longer the extent of that degree (a merge or an update
    /// came between): read the whole lists instead.
    pub fn neighbors_at(&self, dir: Direction, req: &[(u64, u64, &[usize])]) -> Result<Option<(Vec<u64>, Vec<u64>)>> {
        let base = self.base();
        let gtt = base.gtt(dir)?;
        let total = base.edges(dir);
        let mut pages = Vec::new();
        let mut at = Vec::new(); // (gtt index, page in extent, offset) per position
        for &(v, degree, positions) in req {
            let Loc::Extent { first, len } = gtt.locate(v) else { return Ok(None) };
            if (first..first + len).map(|i| gtt.entry_edges(i, total)).sum::<u64>() != degree {
                return Ok(None);
            }
            let start = gtt.edges_before(first);
            for &p in positions {
                if p as u64 >= degree {
                    return Err(StoreError::Invalid(format!("position {p} past the {degree} edges of vertex {v}")));
                }
                // Pages hold varying edge counts: the last page starting at
                // or before p holds it.
                let (mut lo, mut hi) = (0, len);
                while hi - lo > 1 {
                    let mid = (lo + hi) / 2;
                    if gtt.edges_before(first + mid) - start <= p as u64 { lo = mid } else { hi = mid }
                }
                pages.push(gtt.page(first + lo));
                at.push((first + lo, lo, (p as u64 - (gtt.edges_before(first + lo) - start)) as usize, v));
            }
        }
        let fetched = self.fetcher().cached(base.sb.fmt, &pages)?;
        let (mut ids, mut edges) = (vec![0; at.len()], vec![0; at.len()]);
        // A cached page with checkpoints decodes at most SKIP ids per
        // position; one without decodes once, up to its last position.
        let mut order: Vec<usize> = (0..at.len()).collect();
        order.sort_unstable_by_key(|&k| (pages[k], at[k].2));
        let mut buf = Vec::new();
        for group in order.chunk_by(|&a, &b| pages[a] == pages[b]) {
            let (gi, j, _, v) = at[group[0]];
            let (pg, pno) = (fetched.page(group[0]), pages[group[0]]);
            let corrupt = |reason: String| StoreError::Corrupt { page: pno, reason: format!("extent page {j} of vertex {v}: {reason}") };
            let blk = extent_page(&base, pno, pg, v, j)?;
            let skips = fetched.skips(group[0]);
            if skips.is_empty() {
                let last = at[*group.last().expect("a group")].2;
                buf.clear();
                blk.push_range(&[], 0, (last + 1).min(blk.d), base.sb.num_nodes, &mut buf).map_err(corrupt)?;
            }
            for &k in group {
                let off = at[k].2;
                ids[k] = if skips.is_empty() {
                    *buf.get(off).ok_or_else(|| corrupt(format!("no position {off}")))?
                } else {
                    buf.clear();
                    blk.push_range(skips, off, off + 1, base.sb.num_nodes, &mut buf).map_err(corrupt)?;
                    buf[0]
                };
                edges[k] = gtt.edges_before(gi) + off as u64;
            }
        }
        let d = self.delta.read_locked();
        if d.epoch != base.sb.epoch || !d.is_empty() {
            return Ok(None);
        }
        Ok(Some((ids, edges)))
    }

    /// Neighbors at drawn positions of whole lists: `draw(i, degree, out)`
    /// fills `out` with positions (each below the degree, in any order,
    /// repeats allowed) in `ids[i]`'s list, sorted as `neighbors` returns
    /// it, and the neighbors there and their edge ids come back flattened
    /// in the order drawn. Each list is decoded into one scratch buffer, up
    /// to its last drawn position, instead of whole into a CSR of the batch
    /// that a sampler then draws a few entries from: less memory and fewer
    /// page faults. None while updates are pending (positions would index
    /// the pages' lists, not the patched ones): read whole lists then.
    pub fn neighbors_drawn(&self, ids: &[u64], dir: Direction, mut draw: impl FnMut(usize, u64, &mut Vec<usize>)) -> Result<Option<Drawn>> {
        self.check_ids(ids)?;
        let base = self.base();
        let gtt = base.gtt(dir)?;
        if !self.delta.read_locked().is_empty() {
            return Ok(None);
        }
        let lists = Planned::fetch(self.fetcher(), &base, gtt, ids, true)?;
        let degree = lists.degrees()?;
        let mut out = Drawn { ids: Vec::new(), edges: Vec::new(), counts: Vec::with_capacity(ids.len()) };
        // List i's positions are positions[starts[i]..starts[i + 1]].
        let (mut positions, mut starts, mut pos) = (Vec::new(), Vec::with_capacity(ids.len() + 1), Vec::new());
        starts.push(0);
        for (i, &d) in degree.iter().enumerate() {
            pos.clear();
            draw(i, d, &mut pos);
            if let Some(&p) = pos.iter().find(|&&p| p as u64 >= d) {
                return Err(StoreError::Invalid(format!("position {p} past the {d} edges of vertex {}", ids[i])));
            }
            out.counts.push(pos.len());
            positions.extend_from_slice(&pos);
            starts.push(positions.len());
        }
        let drawn = |i: usize| &positions[starts[i]..starts[i + 1]];
        // The decoded prefix of the current list, and where its edges start.
        let (mut prefix, mut at, mut first_edge) = (Vec::new(), usize::MAX, 0);
        let flush = |i: usize, prefix: &[u64], first_edge: u64, out: &mut Drawn| {
            for &p in drawn(i) {
                out.ids.push(prefix[p]);
                out.edges.push(first_edge + p as u64);
            }
        };
        lists.walk(|i, blk, e| {
            if i != at {
                if at != usize::MAX {
                    flush(at, &prefix, first_edge, &mut out);
                }
                (at, first_edge) = (i, e);
                prefix.clear();
            }
            let need = drawn(i).iter().max().map_or(0, |&p| p + 1);
            let take = need.saturating_sub(prefix.len()).min(blk.d);
            if take > 0 {
                blk.push_range(&[], 0, take, base.sb.num_nodes, &mut prefix)?;
            }
            Ok(())
        })?;
        if at != usize::MAX {
            flush(at, &prefix, first_edge, &mut out);
        }
        let d = self.delta.read_locked();
        if d.epoch != base.sb.epoch || !d.is_empty() {
            return Ok(None);
        }
        Ok(Some(out))
    }
}
