//! `verify`: read every page, check every checksum and the invariants of
//! each region, stop at the first bad page and name it.

use std::path::Path;

use solidgraph_io::Volume;

use crate::adjacency::{DIR_ENTRY, DirEntry, packed_entries};
use crate::base::{Base, Direction, load_table};
use crate::error::{Result, StoreError};
use crate::gtt::Gtt;
use crate::order::OrderMaps;
use crate::page::{self, HEADER, Kind};
use crate::superblock::Superblock;

#[derive(Debug, Clone, Default)]
pub struct VerifyReport {
    pub pages: u64,
    pub edges: u64,
    pub tensor_pages: u64,
    /// Pages no region names (freed by merges, reused by later ones).
    pub free_pages: u64,
}

const BATCH: usize = 1024;

/// Checks every page `base` names on `vol` (the store at `path`);
/// `progress(done, total)` after each batch. Pages no region names (freed
/// by merges) are counted, not read.
pub(crate) fn verify(vol: &Volume, base: &Base, path: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<VerifyReport> {
    let sb = &base.sb;
    let total = sb.total_pages;
    let mut rep = VerifyReport::default();
    let corrupt = |page: u64, reason: String| StoreError::Corrupt { page, reason };
    // Both superblock copies must be intact (open used the newer one).
    let got = vol.read(&[0, 1])?;
    for which in 0..2u64 {
        Superblock::decode(which, got.page(which as usize), path)?;
    }
    rep.pages += 2;
    for (ti, t) in sb.tensors.iter().enumerate() {
        let in_rows = (t.rows * t.row_bytes()).div_ceil(crate::tensor::payload(vol.page_size()) as u64);
        let pages: Vec<u64> = (0..t.pages.max(in_rows))
            .map(|k| base.tensor_page(ti, k).ok_or_else(|| corrupt(t.start_page, format!("tensor {:?} has no page {k}", t.name))))
            .collect::<Result<_>>()?;
        scan(vol, &pages, |k, no, pg| {
            let h = page::open_kind(no, pg, Kind::Tensor)?;
            if h.key != ti as u64 || h.aux as u64 != k as u64 & u32::MAX as u64 {
                return Err(corrupt(no, format!("tensor page of {:?} out of place", t.name)));
            }
            Ok(())
        })?;
        rep.tensor_pages += pages.len() as u64;
        rep.pages += pages.len() as u64;
        progress(rep.pages, total);
    }
    let dirs = [Some((Direction::Out, sb.out)), sb.inn.map(|d| (Direction::In, d)), sb.lower.map(|l| (Direction::Lower, l.dir))];
    // The lower lists' degree table must hold the out-lists' lengths.
    // Its 4 B a vertex lie in the store: a damaged vertex count must not
    // size the array past the store's bytes.
    if let Some(l) = sb.lower.filter(|_| sb.num_nodes.saturating_mul(4) > total.saturating_mul(sb.page_size as u64)) {
        return Err(corrupt(l.degrees.start, format!("{} vertices' degrees cannot lie in the store's {total} pages", sb.num_nodes)));
    }
    let mut out_degrees = sb.lower.map(|_| vec![0u32; sb.num_nodes as usize]);
    for (dir, meta) in dirs.into_iter().flatten() {
        let gtt = base.gtt(dir)?;
        let edges = verify_adjacency(vol, gtt, sb, dir, if dir == Direction::Out { out_degrees.as_deref_mut() } else { None })?;
        if dir == Direction::Out {
            rep.edges = edges;
        }
        if dir != Direction::In && edges != base.edges(dir) {
            return Err(corrupt(meta.gtt_start, format!("{dir:?} pages hold {edges} edges, superblock says {}", base.edges(dir))));
        }
        let run: Vec<u64> = (meta.gtt_start..meta.gtt_start + meta.gtt_pages).collect();
        scan(vol, &run, |_, no, pg| page::open_kind(no, pg, Kind::Gtt).map(|_| ()))?;
        let run: Vec<u64> = (meta.gtt_start + meta.gtt_pages..meta.gtt_start + meta.gtt_pages + meta.bitmap_pages).collect();
        scan(vol, &run, |_, no, pg| page::open_kind(no, pg, Kind::Presence).map(|_| ()))?;
        rep.pages += gtt.len() as u64 + meta.gtt_pages + meta.bitmap_pages;
        progress(rep.pages, total);
    }
    if let (Some(l), Some(want)) = (sb.lower, out_degrees) {
        let words = load_table(vol, &l.degrees)?;
        let got = words.iter().flat_map(|&w| [w as u32, (w >> 32) as u32]);
        if let Some((v, (g, w))) = got.zip(&want).enumerate().find(|(_, (g, w))| g != *w) {
            return Err(corrupt(l.degrees.start, format!("degree table says vertex {v} has {g} edges, its out-list holds {w}")));
        }
        rep.pages += l.degrees.pages;
    }
    // The tensor map and tombstones were read and checked when the store
    // opened; the hot table only in part, if at all.
    rep.pages += sb.tensor_map.pages + sb.tombstones.pages;
    let mut hot = load_table(vol, &sb.hot)?;
    hot.sort_unstable();
    if let Some(&v) = hot.last().filter(|&&v| v >= sb.num_nodes) {
        return Err(corrupt(sb.hot.start, format!("hot table names vertex {v} of {}", sb.num_nodes)));
    }
    if let Some(w) = hot.windows(2).find(|w| w[0] == w[1]) {
        return Err(corrupt(sb.hot.start, format!("hot table names vertex {} twice", w[0])));
    }
    rep.pages += sb.hot.pages;
    // Both maps of the vertex order, checked against each other.
    let fresh = OrderMaps::default();
    if let (Some(ti), Some(te)) = (fresh.get(vol, &sb.order, sb.num_nodes, true)?, fresh.get(vol, &sb.order, sb.num_nodes, false)?)
        && let Some(e) = (0..ti.len()).find(|&e| te[ti[e] as usize] as usize != e)
    {
        return Err(corrupt(sb.order.start, format!("vertex order is not a permutation at vertex {e}")));
    }
    rep.pages += sb.order.pages;
    let mut named = crate::space::pages_in_use(base);
    named.sort_unstable();
    if let Some(w) = named.windows(2).find(|w| w[0] == w[1]) {
        return Err(corrupt(w[0], "named by two regions".into()));
    }
    if let Some(&p) = named.last().filter(|&&p| p >= total) {
        return Err(corrupt(p, format!("named by a region but past the store's {total} pages")));
    }
    if named.len() as u64 != rep.pages {
        return Err(corrupt(0, format!("regions name {} pages, {} were checked", named.len(), rep.pages)));
    }
    rep.free_pages = total - rep.pages;
    Ok(rep)
}

/// Reads `pages` in large batches; `f(index, page number, bytes)`.
fn scan(vol: &Volume, pages: &[u64], mut f: impl FnMut(usize, u64, &[u8]) -> Result<()>) -> Result<()> {
    for (c, chunk) in pages.chunks(BATCH).enumerate() {
        let got = vol.read(chunk)?;
        for (i, &no) in chunk.iter().enumerate() {
            f(c * BATCH + i, no, got.page(i))?;
        }
    }
    Ok(())
}

fn verify_adjacency(vol: &Volume, gtt: &Gtt, sb: &Superblock, dir: Direction, mut degrees: Option<&mut [u32]>) -> Result<u64> {
    let fmt = sb.fmt;
    let ps = sb.page_size as usize;
    let mut edges = 0u64;
    let mut i = 0usize;
    let mut last_vertex: Option<u64> = None;
    let mut listed = 0u64;
    let mut ids = Vec::new();
    let pages: Vec<u64> = (0..gtt.len()).map(|i| gtt.page(i)).collect();
    scan(vol, &pages, |_, no, pg| {
        let corrupt = |reason: String| StoreError::Corrupt { page: no, reason };
        let h = page::open(no, pg)?;
        if h.epoch > sb.epoch {
            return Err(corrupt(format!("written at epoch {}, after the superblock's {}", h.epoch, sb.epoch)));
        }
        if gtt.first_vertex(i) != h.key || gtt.is_extent(i) != (h.kind == Kind::Extent) {
            return Err(corrupt(format!("translation table says vertex {}, page says {}", gtt.first_vertex(i), h.key)));
        }
        if gtt.edges_before(i) != edges {
            return Err(corrupt(format!("translation table counts {} edges before this page, the pages hold {edges}", gtt.edges_before(i))));
        }
        // Decodes the block at the start of `block`; returns its degree
        // and length.
        let mut check_list = |v: u64, block: &[u8], ids: &mut Vec<u64>| -> Result<(usize, usize)> {
            let bad = |reason: String| corrupt(format!("list of vertex {v}: {reason}"));
            let blk = fmt.block(block, block.len()).map_err(bad)?;
            ids.clear();
            // Checked below against the vertex count, naming the vertex.
            let len = blk.push_ids(u64::MAX, ids).map_err(bad)?;
            if let Some(&bad) = ids.iter().find(|&&x| x >= sb.num_nodes) {
                return Err(corrupt(format!("vertex {v} has neighbor {bad} beyond the {} vertices", sb.num_nodes)));
            }
            if ids.windows(2).any(|w| w[0] > w[1]) {
                return Err(corrupt(format!("neighbors of vertex {v} are not sorted")));
            }
            if dir == Direction::Lower && ids.last().is_some_and(|&u| u > v) {
                return Err(corrupt(format!("lower list of vertex {v} holds a higher neighbor")));
            }
            edges += blk.d as u64;
            if let Some(d) = degrees.as_deref_mut().and_then(|d| d.get_mut(v as usize)) {
                *d = d.saturating_add(blk.d as u32);
            }
            Ok((blk.d, len))
        };
        match h.kind {
            Kind::Packed => {
                let n = h.count as usize;
                let dir_start = ps.checked_sub(n * DIR_ENTRY).filter(|&d| d >= HEADER).ok_or_else(|| corrupt(format!("directory of {n} entries")))?;
                if (h.aux as usize) < HEADER || h.aux as usize > dir_start {
                    return Err(corrupt("list data overlaps the directory".into()));
                }
                let (mut prev_end, mut before) = (HEADER, 0u64);
                for DirEntry { vertex: v, start: s, end: e, before: b } in packed_entries(pg, &h) {
                    if s != prev_end || e <= s || e > h.aux as usize || b != before {
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
                    let (d, len) = check_list(v, &pg[s..e], &mut ids)?;
                    if len != e - s {
                        return Err(corrupt(format!("list of vertex {v} takes {len} bytes, its directory entry {}", e - s)));
                    }
                    before += d as u64;
                }
                if pg[h.aux as usize..dir_start].iter().any(|&b| b != 0) {
                    return Err(corrupt("free space is not zero".into()));
                }
            }
            Kind::Extent => {
                let v = h.key;
                let first_of_extent = h.aux == 0;
                if (first_of_extent && last_vertex.is_some_and(|l| l >= v)) || (!first_of_extent && last_vertex != Some(v)) {
                    return Err(corrupt(format!("extent page {} of vertex {v} is inconsistent", h.aux)));
                }
                if first_of_extent {
                    if !gtt.is_present(v) {
                        return Err(corrupt(format!("vertex {v} has a list but the presence bitmap says none")));
                    }
                    listed += 1;
                }
                last_vertex = Some(v);
                let (d, len) = check_list(v, &pg[HEADER..], &mut ids)?;
                if d != h.count as usize {
                    return Err(corrupt(format!("extent page {} of vertex {v} holds {d} edges, its header says {}", h.aux, h.count)));
                }
                if pg[HEADER + len..].iter().any(|&b| b != 0) {
                    return Err(corrupt("free space is not zero".into()));
                }
            }
            k => return Err(corrupt(format!("{k:?} page inside the adjacency region"))),
        }
        i += 1;
        Ok(())
    })?;
    if let Some(marked) = gtt.present_count().filter(|&m| m != listed) {
        return Err(StoreError::Corrupt { page: sb.out.gtt_start, reason: format!("presence bitmap marks {marked} vertices, {listed} have lists") });
    }
    Ok(edges)
}
