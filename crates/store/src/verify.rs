//! `verify`: read every page, check every checksum and the invariants of
//! each region, stop at the first bad page and name it.

use crate::adjacency::{DIR_ENTRY, packed_entries};
use crate::error::{Result, StoreError};
use crate::gtt::Gtt;
use crate::page::{self, HEADER, Kind};
use crate::store::{Direction, Store};
use crate::superblock::Superblock;

#[derive(Debug, Clone, Default)]
pub struct VerifyReport {
    pub pages: u64,
    pub edges: u64,
    pub tensor_pages: u64,
}

const BATCH: u64 = 1024;

impl Store {
    /// Checks the whole store; `progress(done, total)` after each batch.
    pub fn verify(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<VerifyReport> {
        let sb = self.superblock().clone();
        let total = sb.total_pages;
        let mut rep = VerifyReport::default();
        let corrupt = |page: u64, reason: String| StoreError::Corrupt { page, reason };
        // Both superblock copies must be intact (open used the newer one).
        let got = self.volume().read(&[0, 1])?;
        for which in 0..2u64 {
            Superblock::decode(which, got.page(which as usize), self.path())?;
        }
        rep.pages += 2;
        for (ti, t) in sb.tensors.iter().enumerate() {
            self.scan(t.start_page, t.pages, |no, pg| {
                let h = page::open_kind(no, pg, Kind::Tensor)?;
                if h.key != ti as u64 || h.aux as u64 != no - t.start_page {
                    return Err(corrupt(no, format!("tensor page of {:?} out of place", t.name)));
                }
                Ok(())
            })?;
            rep.tensor_pages += t.pages;
            rep.pages += t.pages;
            progress(rep.pages, total);
        }
        let dirs = [Some((Direction::Out, sb.out)), sb.inn.map(|d| (Direction::In, d))];
        for (dir, meta) in dirs.into_iter().flatten() {
            let gtt = self.gtt(dir)?;
            let edges = self.verify_adjacency(gtt, meta.adj_start, meta.adj_pages, &sb)?;
            if dir == Direction::Out {
                rep.edges = edges;
                if edges != sb.num_edges {
                    return Err(corrupt(meta.adj_start, format!("out-edge pages hold {edges} edges, superblock says {}", sb.num_edges)));
                }
            }
            self.scan(meta.gtt_start, meta.gtt_pages, |no, pg| page::open_kind(no, pg, Kind::Gtt).map(|_| ()))?;
            self.scan(meta.gtt_start + meta.gtt_pages, meta.bitmap_pages, |no, pg| page::open_kind(no, pg, Kind::Presence).map(|_| ()))?;
            rep.pages += meta.adj_pages + meta.gtt_pages + meta.bitmap_pages;
            progress(rep.pages, total);
        }
        if rep.pages != total {
            return Err(corrupt(rep.pages, format!("regions cover {} pages, superblock says {total}", rep.pages)));
        }
        Ok(rep)
    }

    /// Reads pages [first, first + n) in large batches.
    fn scan(&self, first: u64, n: u64, mut f: impl FnMut(u64, &[u8]) -> Result<()>) -> Result<()> {
        let mut p = first;
        let mut ids = Vec::with_capacity(BATCH as usize);
        while p < first + n {
            let k = BATCH.min(first + n - p);
            ids.clear();
            ids.extend(p..p + k);
            let got = self.volume().read(&ids)?;
            for (i, &no) in ids.iter().enumerate() {
                f(no, got.page(i))?;
            }
            p += k;
        }
        Ok(())
    }

    fn verify_adjacency(&self, gtt: &Gtt, start: u64, pages: u64, sb: &Superblock) -> Result<u64> {
        let fmt = sb.fmt;
        let eb = fmt.edge_bytes();
        let ps = sb.page_size as usize;
        let per = fmt.per_extent_page(ps);
        let mut edges = 0u64;
        let mut i = 0usize;
        let mut last_vertex: Option<u64> = None;
        let mut listed = 0u64;
        let mut ids = Vec::new();
        self.scan(start, pages, |no, pg| {
            let corrupt = |reason: String| StoreError::Corrupt { page: no, reason };
            let h = page::open(no, pg)?;
            if i >= gtt.len() || gtt.page(i) != no {
                return Err(corrupt("adjacency page is not where the translation table says".into()));
            }
            if gtt.first_vertex(i) != h.key || gtt.is_extent(i) != (h.kind == Kind::Extent) {
                return Err(corrupt(format!("translation table says vertex {}, page says {}", gtt.first_vertex(i), h.key)));
            }
            if gtt.edges_before(i) != edges {
                return Err(corrupt(format!("translation table counts {} edges before this page, the pages hold {edges}", gtt.edges_before(i))));
            }
            let mut check_list = |v: u64, block: &[u8], d: usize, ids: &mut Vec<u64>| -> Result<()> {
                ids.clear();
                fmt.get_block(block, d, ids, None, None);
                if let Some(&bad) = ids.iter().find(|&&x| x >= sb.num_nodes) {
                    return Err(corrupt(format!("vertex {v} has neighbor {bad} beyond the {} vertices", sb.num_nodes)));
                }
                if ids.windows(2).any(|w| w[0] > w[1]) {
                    return Err(corrupt(format!("neighbors of vertex {v} are not sorted")));
                }
                edges += d as u64;
                Ok(())
            };
            match h.kind {
                Kind::Packed => {
                    let n = h.count as usize;
                    let dir_start = ps.checked_sub(n * DIR_ENTRY).filter(|&d| d >= HEADER).ok_or_else(|| corrupt(format!("directory of {n} entries")))?;
                    if (h.aux as usize) < HEADER || h.aux as usize > dir_start {
                        return Err(corrupt("list data overlaps the directory".into()));
                    }
                    let mut prev_end = HEADER;
                    for (v, s, e) in packed_entries(pg, &h) {
                        if s != prev_end || e < s || e > h.aux as usize || (e - s) % eb != 0 {
                            return Err(corrupt(format!("bad directory entry for vertex {v}")));
                        }
                        if last_vertex.is_some_and(|l| l >= v) || v >= sb.num_nodes {
                            return Err(corrupt(format!("vertex {v} out of order or out of range")));
                        }
                        if !gtt.is_present(v) {
                            return Err(corrupt(format!("vertex {v} has a list but the presence bitmap says none")));
                        }
                        listed += 1;
                        last_vertex = Some(v);
                        prev_end = e;
                        check_list(v, &pg[s..e], (e - s) / eb, &mut ids)?;
                    }
                    if pg[h.aux as usize..dir_start].iter().any(|&b| b != 0) {
                        return Err(corrupt("free space is not zero".into()));
                    }
                }
                Kind::Extent => {
                    let d = h.count as usize;
                    let v = h.key;
                    let first_of_extent = h.aux == 0;
                    if d == 0 || d > per || (first_of_extent && last_vertex.is_some_and(|l| l >= v)) || (!first_of_extent && last_vertex != Some(v)) {
                        return Err(corrupt(format!("extent page {} of vertex {v} is inconsistent", h.aux)));
                    }
                    if first_of_extent {
                        if !gtt.is_present(v) {
                            return Err(corrupt(format!("vertex {v} has a list but the presence bitmap says none")));
                        }
                        listed += 1;
                    }
                    last_vertex = Some(v);
                    check_list(v, &pg[HEADER..HEADER + d * eb], d, &mut ids)?;
                }
                k => return Err(corrupt(format!("{k:?} page inside the adjacency region"))),
            }
            i += 1;
            Ok(())
        })?;
        if i != gtt.len() {
            return Err(StoreError::Corrupt { page: start + pages, reason: format!("translation table has {} entries, region {i} pages", gtt.len()) });
        }
        if let Some(marked) = gtt.present_count().filter(|&m| m != listed) {
            return Err(StoreError::Corrupt { page: start + pages, reason: format!("presence bitmap marks {marked} vertices, {listed} have lists") });
        }
        Ok(edges)
    }
}
