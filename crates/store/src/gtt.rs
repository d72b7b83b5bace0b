//! Graph translation table: for every adjacency page of one direction, the
//! smallest vertex it holds and where the page is. Sorted by vertex, so a
//! lookup is a binary search; one entry per page, not per vertex, so it stays
//! in memory. Extent pages repeat their owner vertex, flagged. A sampler
//! locates every vertex it draws, so a coarse index built on first use
//! (`Top`) narrows each binary search to a few entries.
//!
//! Each entry also holds the number of edges stored before its page, so a
//! list's position in the direction's CSR order (its global edge id) is known
//! without reading anything else.
//!
//! A presence bitmap (one bit per vertex: has a list in this direction)
//! lets a batch skip vertices without edges, which would otherwise cost the
//! read of the page their id falls in. 1 MiB per 8M vertices.
//!
//! On disk: GTT pages of 24-byte entries `(key, page number, edges before)`,
//! key's top bit set for extent pages, header `count` = entries in the page;
//! then the bitmap pages (kind Presence, `aux` = index), little-endian u64
//! words.

use std::sync::OnceLock;

use crate::error::{Result, StoreError};
use crate::page::{HEADER, Header, Kind, seal, u64_at};

const EXTENT: u64 = 1 << 63;
pub const ENTRY: usize = 24;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gtt {
    /// First vertex of each page, EXTENT bit set on extent pages.
    keys: Vec<u64>,
    pages: Vec<u64>,
    edges_before: Vec<u64>,
    /// Presence bitmap; `None` when the store has none (ids far sparser
    /// than edges, where n/8 bytes would dwarf the graph): every vertex
    /// then counts as present and costs its page read.
    present: Option<Vec<u64>>,
    top: TopIndex,
}

/// Where to search for a vertex: `starts[b]` is the first entry whose first
/// vertex is >= `b << shift`, so the entries whose first vertex is at most
/// v begin with every entry before `starts[v >> shift]` and end before
/// `starts[(v >> shift) + 1]`. About one bucket per two entries: 2 bytes an
/// entry beside the entry's 24.
#[derive(Debug, Clone)]
struct Top {
    shift: u32,
    starts: Vec<u32>,
}

impl Top {
    /// None past 2^32 entries (16 TiB of pages in one direction): the
    /// plain binary search then serves.
    fn build(keys: &[u64]) -> Option<Top> {
        let n = u32::try_from(keys.len()).ok()?;
        let last = keys.last().map_or(0, |&k| k & !EXTENT);
        let mut shift = 0;
        while (last >> shift) > u64::from(n / 2) {
            shift += 1;
        }
        let buckets = (last >> shift) as usize + 2;
        let mut starts = Vec::with_capacity(buckets);
        let mut i = 0;
        for b in 0..buckets as u64 {
            while i < keys.len() && keys[i] & !EXTENT < b << shift {
                i += 1;
            }
            starts.push(i as u32);
        }
        Some(Top { shift, starts })
    }

    /// The entries a search for `v` needs to look at.
    fn range(&self, v: u64, len: usize) -> (usize, usize) {
        let b = (v >> self.shift).min(self.starts.len() as u64 - 1) as usize;
        (self.starts[b] as usize, self.starts.get(b + 1).map_or(len, |&e| e as usize))
    }
}

/// Built on first use, dropped when entries change. Not part of a table's
/// identity: equal tables compare equal whether or not it was built.
#[derive(Debug, Clone, Default)]
struct TopIndex(OnceLock<Option<Top>>);

impl PartialEq for TopIndex {
    fn eq(&self, _: &TopIndex) -> bool {
        true
    }
}

impl Eq for TopIndex {}

/// Where a vertex's list lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loc {
    /// No adjacency page can hold it: degree 0.
    Nowhere,
    /// In the packed page at this GTT index (it may still be absent).
    Packed(usize),
    /// Owns `len` pages from GTT index `first`.
    Extent { first: usize, len: usize },
}

impl Gtt {
    pub fn push(&mut self, first_vertex: u64, page: u64, extent: bool, edges_before: u64) {
        debug_assert!(first_vertex < EXTENT);
        debug_assert!(self.keys.last().is_none_or(|&k| k & !EXTENT <= first_vertex));
        debug_assert!(self.edges_before.last().is_none_or(|&e| e <= edges_before));
        self.keys.push(first_vertex | if extent { EXTENT } else { 0 });
        self.pages.push(page);
        self.edges_before.push(edges_before);
        self.top = TopIndex::default();
    }

    /// Edges stored in pages before page `i` (the global id of its first edge).
    pub fn edges_before(&self, i: usize) -> u64 {
        self.edges_before[i]
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    pub fn page(&self, i: usize) -> u64 {
        self.pages[i]
    }

    pub fn first_vertex(&self, i: usize) -> u64 {
        self.keys[i] & !EXTENT
    }

    pub fn is_extent(&self, i: usize) -> bool {
        self.keys[i] & EXTENT != 0
    }

    pub fn memory_bytes(&self) -> usize {
        self.keys.len() * (ENTRY + 2)
    }

    /// The first index in `keys` whose first vertex is not `below` v (below:
    /// first vertex < v, or <= v), searching only where the index says.
    fn search(&self, v: u64, below: impl Fn(u64) -> bool) -> usize {
        let (lo, hi) = match self.top.0.get_or_init(|| Top::build(&self.keys)) {
            Some(t) => t.range(v, self.keys.len()),
            None => (0, self.keys.len()),
        };
        lo + self.keys[lo..hi].partition_point(|&k| below(k & !EXTENT))
    }

    /// Index of the first page whose first vertex is >= v.
    pub fn lower_bound(&self, v: u64) -> usize {
        self.search(v, |f| f < v)
    }

    /// Index one past the last page whose first vertex is <= v.
    pub fn upper_bound(&self, v: u64) -> usize {
        self.search(v, |f| f <= v)
    }

    /// Edges in the pages of entry `i`; `total` is the direction's count.
    pub fn entry_edges(&self, i: usize, total: u64) -> u64 {
        self.edges_before.get(i + 1).copied().unwrap_or(total) - self.edges_before[i]
    }

    /// Takes over `other`'s presence bitmap (a merge then edits it).
    pub fn presence_from(&mut self, other: &Gtt) {
        self.present = other.present.clone();
    }

    /// Adds `other`'s present vertices to this one's (an import joins the
    /// bitmaps of vertex ranges laid out apart).
    pub fn presence_or(&mut self, other: &Gtt) {
        if let (Some(p), Some(q)) = (self.present.as_mut(), other.present.as_ref()) {
            if p.len() < q.len() {
                p.resize(q.len(), 0);
            }
            p.iter_mut().zip(q).for_each(|(a, b)| *a |= b);
        }
    }

    /// Records that `v` has no list any more.
    pub fn mark_absent(&mut self, v: u64) {
        if let Some(w) = self.present.as_mut().and_then(|p| p.get_mut((v / 64) as usize)) {
            *w &= !(1 << (v % 64));
        }
    }

    /// Starts a presence bitmap (import, or open of a store that has one).
    pub fn enable_presence(&mut self) {
        self.present.get_or_insert_with(Vec::new);
    }

    pub fn has_presence(&self) -> bool {
        self.present.is_some()
    }

    /// Records that `v` has a list in this direction.
    pub fn mark_present(&mut self, v: u64) {
        if let Some(p) = self.present.as_mut() {
            let w = (v / 64) as usize;
            if w >= p.len() {
                p.resize(w + 1, 0);
            }
            p[w] |= 1 << (v % 64);
        }
    }

    pub fn is_present(&self, v: u64) -> bool {
        match &self.present {
            None => true,
            Some(p) => p.get((v / 64) as usize).is_some_and(|w| w & (1 << (v % 64)) != 0),
        }
    }

    pub fn locate(&self, v: u64) -> Loc {
        if !self.is_present(v) {
            return Loc::Nowhere;
        }
        // Last page whose first vertex <= v.
        let hi = self.upper_bound(v);
        if hi == 0 {
            return Loc::Nowhere;
        }
        let i = hi - 1;
        if !self.is_extent(i) {
            return Loc::Packed(i);
        }
        if self.first_vertex(i) != v {
            // v falls after an extent and before the next page: no edges.
            return Loc::Nowhere;
        }
        let first = self.lower_bound(v);
        Loc::Extent { first, len: hi - first }
    }

    /// Adjacency pages holding `v`'s list (0: no list), without a read:
    /// lets callers cut a batch into reads of bounded size.
    pub fn list_pages(&self, v: u64) -> usize {
        match self.locate(v) {
            Loc::Nowhere => 0,
            Loc::Packed(_) => 1,
            Loc::Extent { len, .. } => len,
        }
    }

    pub fn entries_per_page(page_size: usize) -> usize {
        (page_size - HEADER) / ENTRY
    }

    pub fn pages_needed(&self, page_size: usize) -> u64 {
        self.keys.len().div_ceil(Self::entries_per_page(page_size)) as u64
    }

    fn words_per_page(page_size: usize) -> usize {
        (page_size - HEADER) / 8
    }

    /// Pages of the presence bitmap for `num_nodes` vertices.
    pub fn bitmap_pages(num_nodes: u64, page_size: usize) -> u64 {
        num_nodes.div_ceil(64).div_ceil(Self::words_per_page(page_size) as u64)
    }

    /// Serialises the presence bitmap for `num_nodes` vertices.
    pub fn encode_bitmap(&self, num_nodes: u64, page_size: usize, first_page: u64, epoch: u64, out: &mut [u8]) {
        let per = Self::words_per_page(page_size);
        let words = num_nodes.div_ceil(64) as usize;
        let Some(present) = self.present.as_deref() else { return };
        for p in 0..Self::bitmap_pages(num_nodes, page_size) as usize {
            let page = &mut out[p * page_size..(p + 1) * page_size];
            page.fill(0);
            let lo = p * per;
            let hi = (lo + per).min(words);
            for (j, w) in (lo..hi).enumerate() {
                let x = present.get(w).copied().unwrap_or(0);
                page[HEADER + 8 * j..HEADER + 8 * j + 8].copy_from_slice(&x.to_le_bytes());
            }
            seal(first_page + p as u64, page, &Header { kind: Kind::Presence, epoch, key: 0, count: (hi - lo) as u32, aux: p as u32 });
        }
    }

    /// Appends the words of one bitmap page (header already checked).
    pub fn decode_bitmap_page(&mut self, page_no: u64, page: &[u8], h: &Header) -> Result<()> {
        let n = h.count as usize;
        let present = self.present.get_or_insert_with(Vec::new);
        if n > Self::words_per_page(page.len()) || h.aux as usize * Self::words_per_page(page.len()) != present.len() {
            return Err(StoreError::Corrupt { page: page_no, reason: "presence bitmap page out of place".into() });
        }
        present.extend((0..n).map(|j| u64_at(page, HEADER + 8 * j)));
        Ok(())
    }

    /// Vertices marked present (None without a bitmap).
    pub fn present_count(&self) -> Option<u64> {
        self.present.as_ref().map(|p| p.iter().map(|w| w.count_ones() as u64).sum())
    }

    /// Serialises into consecutive sealed pages numbered from `first_page`.
    pub fn encode(&self, page_size: usize, first_page: u64, epoch: u64, out: &mut [u8]) {
        let per = Self::entries_per_page(page_size);
        for (p, chunk) in self.keys.chunks(per).enumerate() {
            let page = &mut out[p * page_size..(p + 1) * page_size];
            page.fill(0);
            for (j, &k) in chunk.iter().enumerate() {
                let at = HEADER + j * ENTRY;
                page[at..at + 8].copy_from_slice(&k.to_le_bytes());
                page[at + 8..at + 16].copy_from_slice(&self.pages[p * per + j].to_le_bytes());
                page[at + 16..at + 24].copy_from_slice(&self.edges_before[p * per + j].to_le_bytes());
            }
            seal(first_page + p as u64, page, &Header { kind: Kind::Gtt, epoch, key: 0, count: chunk.len() as u32, aux: 0 });
        }
    }

    /// Appends the entries of one GTT page (header already checked).
    /// Room for `entries` entries, so that loading a large table does not
    /// leave it with up to twice the memory it needs.
    pub fn reserve_exact(&mut self, entries: usize) {
        self.keys.reserve_exact(entries);
        self.pages.reserve_exact(entries);
        self.edges_before.reserve_exact(entries);
    }

    pub fn decode_page(&mut self, page_no: u64, page: &[u8], h: &Header) -> Result<()> {
        let n = h.count as usize;
        if n > Self::entries_per_page(page.len()) {
            return Err(StoreError::Corrupt { page: page_no, reason: format!("GTT page claims {n} entries") });
        }
        for j in 0..n {
            let at = HEADER + j * ENTRY;
            let k = u64_at(page, at);
            if let Some(&last) = self.keys.last()
                && last & !EXTENT > k & !EXTENT
            {
                return Err(StoreError::Corrupt { page: page_no, reason: "GTT entries out of order".into() });
            }
            let eb = u64_at(page, at + 16);
            if self.edges_before.last().is_some_and(|&last| last > eb) {
                return Err(StoreError::Corrupt { page: page_no, reason: "GTT edge counts decrease".into() });
            }
            self.keys.push(k);
            self.pages.push(u64_at(page, at + 8));
            self.edges_before.push(eb);
        }
        self.top = TopIndex::default();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_packed_extent_and_gaps() {
        let mut g = Gtt::default();
        g.enable_presence();
        for v in [0, 1, 2, 3, 4, 5, 9, 1000] {
            g.mark_present(v);
        }
        g.push(0, 10, false, 0); // vertices 0..5
        g.push(5, 11, true, 40); // 5 owns 3 pages
        g.push(5, 12, true, 540);
        g.push(5, 13, true, 1040);
        g.push(9, 14, false, 1100);
        assert_eq!(g.locate(0), Loc::Packed(0));
        assert_eq!(g.locate(4), Loc::Packed(0));
        assert_eq!(g.locate(5), Loc::Extent { first: 1, len: 3 });
        assert_eq!(g.locate(6), Loc::Nowhere);
        assert_eq!(g.locate(9), Loc::Packed(4));
        assert_eq!(g.locate(1000), Loc::Packed(4));
        let mut e = Gtt::default();
        e.push(3, 1, false, 0);
        assert_eq!(e.locate(2), Loc::Nowhere);

        let ps = 4096;
        let mut buf = vec![0u8; ps * g.pages_needed(ps) as usize];
        g.encode(ps, 100, 1, &mut buf);
        let mut back = Gtt::default();
        let h = crate::page::open_kind(100, &buf[..ps], Kind::Gtt).unwrap();
        back.decode_page(100, &buf[..ps], &h).unwrap();
        let mut g2 = g.clone();
        g2.present = None;
        assert_eq!(back, g2);
        assert_eq!(g.locate(7), Loc::Nowhere, "absent vertex needs no read");
    }

    proptest::proptest! {
        /// The index only narrows the search: bounds and locations equal a
        /// plain binary search over the whole table, for any spacing.
        #[test]
        fn indexed_search_equals_full_search(gaps in proptest::collection::vec((0u64..5000, proptest::bool::ANY), 0..300), probes in proptest::collection::vec(0u64..2_000_000, 1..50)) {
            let mut g = Gtt::default();
            let mut v = 0;
            for (k, &(gap, extent)) in gaps.iter().enumerate() {
                v += gap;
                g.push(v, k as u64, extent, k as u64);
            }
            let last = g.keys.last().map_or(0, |&k| k & !EXTENT);
            for &p in probes.iter().chain(&[0, last, last + 1]) {
                let p = p % (last + 2);
                proptest::prop_assert_eq!(g.lower_bound(p), g.keys.partition_point(|&k| k & !EXTENT < p));
                proptest::prop_assert_eq!(g.upper_bound(p), g.keys.partition_point(|&k| k & !EXTENT <= p));
            }
        }
    }
}
