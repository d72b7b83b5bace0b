//! Adjacency pages: packed pages shared by the short lists of consecutive
//! vertices, and extents of whole pages owned by one long list.
//!
//! A vertex's list is one block: neighbor ids (4 or 8 bytes each), then the
//! f32 weights, then the u32 labels, so an edge column costs no extra read.
//!
//! Packed page: blocks grow from the header up; the directory grows down from
//! the page end, entry i (8 bytes) at `page_size - 8 (i + 1)`:
//! `(vertex - first_vertex: u32, block offset: u32)`, sorted by vertex. The
//! header's `aux` is the end of the last block, so a list's length is the gap
//! to the next offset. Vertices without an entry have no edges here.
//!
//! Extent page: `count` edges of one vertex (header key), ids then weights
//! then labels; `aux` is the page's index in the extent. Every page but the
//! last is full.

use crate::page::{HEADER, Header, Kind, seal, u32_at, u64_at};

pub const DIR_ENTRY: usize = 8;

/// What one edge costs in a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeFormat {
    pub id_bytes: usize,
    pub weights: bool,
    pub labels: bool,
}

impl EdgeFormat {
    pub fn edge_bytes(&self) -> usize {
        self.id_bytes + 4 * self.weights as usize + 4 * self.labels as usize
    }

    /// Edges in one extent page.
    pub fn per_extent_page(&self, page_size: usize) -> usize {
        (page_size - HEADER) / self.edge_bytes()
    }

    /// Largest list a packed page can hold (alone in the page).
    pub fn max_packed_degree(&self, page_size: usize) -> usize {
        (page_size - HEADER - DIR_ENTRY) / self.edge_bytes()
    }

    /// Writes `ids`/`weights`/`labels` as one block at `out`.
    fn put_block(&self, out: &mut [u8], ids: &[u64], weights: &[f32], labels: &[u32]) {
        let d = ids.len();
        let mut o = 0;
        if self.id_bytes == 4 {
            for &v in ids {
                out[o..o + 4].copy_from_slice(&(v as u32).to_le_bytes());
                o += 4;
            }
        } else {
            for &v in ids {
                out[o..o + 8].copy_from_slice(&v.to_le_bytes());
                o += 8;
            }
        }
        if self.weights {
            for &w in &weights[..d] {
                out[o..o + 4].copy_from_slice(&w.to_le_bytes());
                o += 4;
            }
        }
        if self.labels {
            for &l in &labels[..d] {
                out[o..o + 4].copy_from_slice(&l.to_le_bytes());
                o += 4;
            }
        }
    }

    /// Appends a block of `d` edges starting at `block` to the outputs.
    pub fn get_block(&self, block: &[u8], d: usize, ids: &mut Vec<u64>, weights: Option<&mut Vec<f32>>, labels: Option<&mut Vec<u32>>) {
        let idb = self.id_bytes;
        if idb == 4 {
            ids.extend(block[..4 * d].chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4")) as u64));
        } else {
            ids.extend(block[..8 * d].chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8"))));
        }
        let mut o = idb * d;
        if self.weights {
            if let Some(w) = weights {
                w.extend(block[o..o + 4 * d].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4"))));
            }
            o += 4 * d;
        }
        if self.labels
            && let Some(l) = labels
        {
            l.extend(block[o..o + 4 * d].chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4"))));
        }
    }

    /// The neighbor id at position `i` of a block of `d` edges.
    pub fn id_at(&self, block: &[u8], i: usize) -> u64 {
        if self.id_bytes == 4 { u32_at(block, 4 * i) as u64 } else { u64_at(block, 8 * i) }
    }

    pub fn label_at(&self, block: &[u8], d: usize, i: usize) -> u32 {
        u32_at(block, (self.id_bytes + 4 * self.weights as usize) * d + 4 * i)
    }

    /// Position of neighbor `want` in a block of `d` sorted ids.
    pub fn find(&self, block: &[u8], d: usize, want: u64) -> Option<usize> {
        let (mut lo, mut hi) = (0, d);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.id_at(block, mid) < want { lo = mid + 1 } else { hi = mid }
        }
        (lo < d && self.id_at(block, lo) == want).then_some(lo)
    }

    pub fn weight_at(&self, block: &[u8], d: usize, i: usize) -> f32 {
        f32::from_bits(u32_at(block, self.id_bytes * d + 4 * i))
    }
}

/// Builds one packed page.
pub struct PackedBuilder {
    pub fmt: EdgeFormat,
    page_size: usize,
    /// Bytes of blocks + directory allowed (fill factor applied).
    budget: usize,
    first: u64,
    dir: Vec<(u32, u32)>,
    end: usize,
}

impl PackedBuilder {
    pub fn new(fmt: EdgeFormat, page_size: usize, fill: f64) -> PackedBuilder {
        let budget = (((page_size - HEADER) as f64) * fill) as usize;
        PackedBuilder { fmt, page_size, budget, first: 0, dir: Vec::new(), end: HEADER }
    }

    pub fn is_empty(&self) -> bool {
        self.dir.is_empty()
    }

    pub fn first(&self) -> u64 {
        self.first
    }

    /// Whether a list of `d` edges for `v` can join this page. An empty page
    /// takes any list that fits physically, whatever the fill factor.
    pub fn fits(&self, v: u64, d: usize) -> bool {
        let need = d * self.fmt.edge_bytes() + DIR_ENTRY;
        if self.dir.is_empty() {
            return need <= self.page_size - HEADER;
        }
        let used = (self.end - HEADER) + self.dir.len() * DIR_ENTRY;
        v - self.first <= u32::MAX as u64 && used + need <= self.budget
    }

    /// Adds the list into `page` (the page buffer being built).
    pub fn add(&mut self, page: &mut [u8], v: u64, ids: &[u64], weights: &[f32], labels: &[u32]) {
        debug_assert!(self.fits(v, ids.len()));
        if self.dir.is_empty() {
            self.first = v;
        }
        let bytes = ids.len() * self.fmt.edge_bytes();
        self.fmt.put_block(&mut page[self.end..self.end + bytes], ids, weights, labels);
        self.dir.push(((v - self.first) as u32, self.end as u32));
        self.end += bytes;
    }

    /// Writes the directory and header, seals the page, and resets.
    pub fn finish(&mut self, page: &mut [u8], page_no: u64, epoch: u64) {
        let ps = self.page_size;
        // Zero the gap so the same input always gives the same bytes.
        let dir_start = ps - self.dir.len() * DIR_ENTRY;
        page[self.end..dir_start].fill(0);
        for (i, &(dv, off)) in self.dir.iter().enumerate() {
            let at = ps - DIR_ENTRY * (i + 1);
            page[at..at + 4].copy_from_slice(&dv.to_le_bytes());
            page[at + 4..at + 8].copy_from_slice(&off.to_le_bytes());
        }
        let h = Header { kind: Kind::Packed, epoch, key: self.first, count: self.dir.len() as u32, aux: self.end as u32 };
        seal(page_no, page, &h);
        self.dir.clear();
        self.end = HEADER;
    }
}

/// Writes one extent page holding `ids[..]` (a chunk of vertex `v`'s list).
pub fn write_extent_page(fmt: &EdgeFormat, page: &mut [u8], page_no: u64, epoch: u64, v: u64, index: u32, ids: &[u64], weights: &[f32], labels: &[u32]) {
    let bytes = ids.len() * fmt.edge_bytes();
    fmt.put_block(&mut page[HEADER..HEADER + bytes], ids, weights, labels);
    page[HEADER + bytes..].fill(0);
    let h = Header { kind: Kind::Extent, epoch, key: v, count: ids.len() as u32, aux: index };
    seal(page_no, page, &h);
}

/// Finds `v` in a packed page (header already checked): the block's byte
/// range, or None when `v` has no edges here.
pub fn find_in_packed(page: &[u8], h: &Header, v: u64) -> Option<(usize, usize)> {
    if v < h.key || v - h.key > u32::MAX as u64 {
        return None;
    }
    let dv = (v - h.key) as u32;
    let ps = page.len();
    let n = h.count as usize;
    let entry = |i: usize| {
        let at = ps - DIR_ENTRY * (i + 1);
        (u32_at(page, at), u32_at(page, at + 4) as usize)
    };
    let (mut lo, mut hi) = (0usize, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if entry(mid).0 < dv { lo = mid + 1 } else { hi = mid }
    }
    if lo == n || entry(lo).0 != dv {
        return None;
    }
    let start = entry(lo).1;
    let end = if lo + 1 < n { entry(lo + 1).1 } else { h.aux as usize };
    Some((start, end))
}

/// Every (vertex, block range) of a packed page, in vertex order.
pub fn packed_entries<'a>(page: &'a [u8], h: &Header) -> impl Iterator<Item = (u64, usize, usize)> + 'a {
    let ps = page.len();
    let n = h.count as usize;
    let key = h.key;
    let aux = h.aux as usize;
    (0..n).map(move |i| {
        let at = ps - DIR_ENTRY * (i + 1);
        let dv = u32_at(page, at) as u64;
        let start = u32_at(page, at + 4) as usize;
        let end = if i + 1 < n { u32_at(page, ps - DIR_ENTRY * (i + 2) + 4) as usize } else { aux };
        (key + dv, start, end)
    })
}
