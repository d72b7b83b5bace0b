//! Tensor gather: rows copied out of their pages, each page read once per
//! batch, and the row cache's protocol (hits copied from it, misses read
//! once and offered to it, with the upcoming rows beside them).

use crate::base::Base;
use crate::error::{Result, StoreError};
use crate::fetch::Fetcher;
use crate::page::{self, HEADER, Kind};
use crate::rowcache::RowCache;
use crate::tensor;

/// Pages a gather visits at most per volume batch: a huge gather pins a
/// bounded number of pages (not one page per row of the whole batch) while
/// each part is still one sorted, merged volume batch.
const TENSOR_PART_PAGES: u64 = 4096;

/// Where a gather's rows come from: pages, and the row cache when the
/// store has one.
#[derive(Clone, Copy)]
pub(crate) struct Gather<'a> {
    pub fetch: Fetcher<'a>,
    pub rows: Option<&'a RowCache>,
}

impl Gather<'_> {
    /// Copies the rows `ids` of tensor `ti` held in pages into `data`
    /// (row-major); rows without a page yet are left as they are. With a
    /// row cache, hits are copied from it and each missing row is read once,
    /// straight into `data` where it is first asked for; only the rows the
    /// cache takes are copied into entries of their own. `co_page`: also
    /// offer the upcoming rows beside them (`CoPage`); the warm-up does not,
    /// so the rows it fills the cache with are the hubs' alone.
    pub fn pages_into(&self, base: &Base, ti: usize, ids: &[u64], data: &mut [u8], co_page: bool) -> Result<()> {
        let Some(rc) = self.rows else { return self.rows_from_pages(base, ti, ids, None, data, true, None) };
        let t = &base.sb.tensors[ti];
        let rb = t.row_bytes() as usize;
        let have: Vec<usize> = (0..ids.len()).filter(|&i| ids[i] < t.rows).collect();
        let rows: Vec<u64> = have.iter().map(|&i| ids[i]).collect();
        let missed = rc.lookup_into(ti, &rows, &have, data);
        // The distinct missing rows, sorted, and where each lands first.
        let mut by_row: Vec<(u64, usize)> = missed.iter().map(|&j| (rows[j], have[j])).collect();
        by_row.sort_unstable();
        let (mut missing, mut first, mut later) = (Vec::new(), Vec::new(), Vec::new());
        for &(r, i) in &by_row {
            if missing.last() == Some(&r) {
                later.push((missing.len() - 1, i));
            } else {
                missing.push(r);
                first.push(i);
            }
        }
        let mut co = CoPage { rc, ids: Vec::new(), bytes: Vec::new() };
        self.rows_from_pages(base, ti, &missing, Some(&first), data, false, co_page.then_some(&mut co))?;
        for (m, i) in later {
            data.copy_within(first[m] * rb..(first[m] + 1) * rb, i * rb);
        }
        rc.insert(ti, &missing, |m| &data[first[m] * rb..(first[m] + 1) * rb]);
        rc.insert(ti, &co.ids, |j| &co.bytes[j * rb..(j + 1) * rb]);
        Ok(())
    }

    /// Copies rows `ids` from the tensor's pages, read through the page
    /// cache or straight from the volume, into row `at[i]` of `data` (row
    /// `i` without `at`), in row order, in parts of at most
    /// `TENSOR_PART_PAGES` pages. With `co`, also copies out the other rows
    /// wholly on the pages read that upcoming batches ask for and the row
    /// cache lacks.
    // Private to the gather and called from two places: a struct for the
    // arguments would only rename them.
    #[allow(clippy::too_many_arguments)]
    fn rows_from_pages(
        &self,
        base: &Base,
        ti: usize,
        ids: &[u64],
        at: Option<&[usize]>,
        data: &mut [u8],
        cached: bool,
        mut co: Option<&mut CoPage>,
    ) -> Result<()> {
        let t = &base.sb.tensors[ti];
        let ps = self.fetch.page_size();
        let rb = t.row_bytes();
        let pl = tensor::payload(ps) as u64;
        let mut order: Vec<usize> = (0..ids.len()).filter(|&i| ids[i] < t.rows).collect();
        order.sort_unstable_by_key(|&i| ids[i]);
        let part = (TENSOR_PART_PAGES / (rb.div_ceil(pl) + 1)).max(1) as usize;
        let mut pages = Vec::new();
        let mut index = Vec::new();
        for rows in order.chunks(part) {
            pages.clear();
            index.clear();
            for &i in rows {
                for k in tensor::row_pages(ids[i], rb, ps) {
                    let p = base
                        .tensor_page(ti, k)
                        .ok_or_else(|| StoreError::Corrupt { page: t.start_page, reason: format!("tensor {:?} has no page {k}", t.name) })?;
                    pages.push(p);
                    index.push(k);
                }
            }
            let fetched = self.fetch.fetch(base.sb.fmt, &pages, cached)?;
            let mut k = 0;
            for &i in rows {
                let mut off = ids[i] * rb;
                let end = off + rb;
                let mut o = at.map_or(i, |at| at[i]) * rb as usize;
                while off < end {
                    let (pg, pno) = (fetched.page(k), pages[k]);
                    let h = page::open_kind_trusted(pno, pg, Kind::Tensor)?;
                    base.check_epoch(pno, h.epoch)?;
                    if h.aux as u64 != index[k] & u32::MAX as u64 || h.key != ti as u64 {
                        return Err(StoreError::Corrupt { page: pno, reason: "tensor page out of place".into() });
                    }
                    let in_page = (off % pl) as usize;
                    let n = ((pl - off % pl).min(end - off)) as usize;
                    data[o..o + n].copy_from_slice(&pg[HEADER + in_page..HEADER + in_page + n]);
                    o += n;
                    off += n as u64;
                    k += 1;
                }
            }
            if let Some(co) = co.as_deref_mut() {
                co.collect(ti, &index, |k| fetched.page(k), rb, pl, t.rows);
            }
        }
        Ok(())
    }
}

/// The rows a gather's pages hold beside the ones it asked for, which
/// upcoming batches (`Store::expect_rows`) will ask for: the page is read
/// already, so they enter the row cache now rather than cost a read of the
/// same page later. In a degree-ordered store a page's rows belong to
/// vertices of about the same degree, so the rows beside a missed one are
/// often wanted soon too.
struct CoPage<'a> {
    rc: &'a RowCache,
    ids: Vec<u64>,
    bytes: Vec<u8>,
}

impl CoPage<'_> {
    /// `index[k]`: the tensor page number of fetched page `page(k)`, in
    /// order, repeated for consecutive rows on one page; pages were checked
    /// by the caller. Rows straddling a page boundary are left out.
    fn collect<'p>(&mut self, ti: usize, index: &[u64], page: impl Fn(usize) -> &'p [u8], rb: u64, pl: u64, rows: u64) {
        let (mut cand, mut from) = (Vec::new(), Vec::new());
        for (k, &tp) in index.iter().enumerate() {
            if k > 0 && index[k - 1] == tp {
                continue;
            }
            for r in (tp * pl).div_ceil(rb)..((tp + 1) * pl / rb).min(rows) {
                cand.push(r);
                from.push(k);
            }
        }
        for j in self.rc.upcoming_uncached(ti, &cand) {
            let (r, k) = (cand[j], from[j]);
            let off = HEADER + (r * rb - index[k] * pl) as usize;
            self.ids.push(r);
            self.bytes.extend_from_slice(&page(k)[off..off + rb as usize]);
        }
    }
}
