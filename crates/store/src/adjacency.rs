//! Adjacency pages: packed pages shared by the short lists of consecutive
//! vertices, and extents of whole pages owned by one long list.
//!
//! A list in a page is one block: its degree d (LEB128 varint), the d
//! neighbor ids in ascending order as varints of their gaps (the first id as
//! it is), then d f32 weights, then d u32 labels. Sorted lists have small
//! gaps, so most ids take one to three bytes instead of four or eight, and a
//! whole-graph pass reads that much less. Ids of any width (u64 included)
//! use the same encoding.
//!
//! Packed page: blocks grow from the header up; the directory grows down from
//! the page end, entry i (8 bytes) at `page_size - 8 (i + 1)`:
//! `(vertex - first_vertex: u32, block offset: u16, edges before: u16)`,
//! sorted by vertex ("edges before" counts the edges of the page's earlier
//! blocks, so an edge id needs no decoding of other lists). The header's
//! `aux` is the end of the last block, `count` the directory's entries.
//! Vertices without an entry have no edges here. Pages are at most 64 KiB
//! (checked at import), so offsets and edge counts fit in 16 bits.
//!
//! Extent page: one block of vertex `key`'s list, the next `count` edges;
//! `aux` is the page's index in the extent. Each page is filled with as many
//! edges as their block fits.

use crate::page::{HEADER, Header, Kind, seal, u32_at};
use crate::varint;

pub const DIR_ENTRY: usize = 8;

/// The columns an edge carries besides its neighbor id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeFormat {
    pub weights: bool,
    pub labels: bool,
}

impl EdgeFormat {
    fn col_bytes(&self) -> usize {
        4 * self.weights as usize + 4 * self.labels as usize
    }

    /// Bytes of a block of `n` edges whose ids' varints take `id_bytes`.
    pub fn sized(&self, n: usize, id_bytes: usize) -> usize {
        varint::len(n as u64) + id_bytes + n * self.col_bytes()
    }

    /// Varint bytes of the ids of `ids` (ascending): their gaps, the first
    /// id whole.
    pub fn id_bytes(ids: &[u64]) -> usize {
        let mut prev = 0;
        ids.iter()
            .map(|&x| {
                let g = varint::len(x - prev);
                prev = x;
                g
            })
            .sum()
    }

    /// Varint bytes of one gap.
    pub fn gap_bytes(gap: u64) -> usize {
        varint::len(gap)
    }

    /// Bytes of the block holding `ids` (ascending).
    pub fn block_bytes(&self, ids: &[u64]) -> usize {
        self.sized(ids.len(), EdgeFormat::id_bytes(ids))
    }

    /// How many ids from the front of `ids` (ascending) one block of at most
    /// `room` bytes holds.
    pub fn fitting(&self, ids: &[u64], room: usize) -> usize {
        let (mut prev, mut gaps) = (0, 0);
        for (n, &x) in ids.iter().enumerate() {
            gaps += varint::len(x - prev);
            prev = x;
            if self.sized(n + 1, gaps) > room {
                return n;
            }
        }
        ids.len()
    }

    /// A list's block must fit here to share a packed page (alone in it).
    pub fn packed_room(&self, page_size: usize) -> usize {
        page_size - HEADER - DIR_ENTRY
    }

    /// Room for the block of one extent page.
    pub fn extent_room(&self, page_size: usize) -> usize {
        page_size - HEADER
    }

    /// Writes the block of `ids` (ascending) with their weights and labels
    /// (used when the format has them) at the start of `out`; returns its
    /// length.
    fn put_block(&self, out: &mut [u8], ids: &[u64], weights: &[f32], labels: &[u32]) -> usize {
        let d = ids.len();
        let mut o = varint::put(out, d as u64);
        let mut prev = 0;
        for &x in ids {
            debug_assert!(x >= prev, "lists are sorted");
            o += varint::put(&mut out[o..], x - prev);
            prev = x;
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
        o
    }

    /// Reads the block in `b[..len]`; decoders may read ahead into the rest
    /// of `b`. Errors name what is malformed; callers add the page.
    pub fn block<'a>(&self, b: &'a [u8], len: usize) -> Result<Block<'a>, String> {
        let mut at = 0;
        let d = varint::get(&b[..len], &mut at).ok_or("truncated list length")? as usize;
        if d == 0 || d > len {
            return Err(format!("list length {d} in a block of {len} bytes"));
        }
        let cols = self.col_bytes() * d;
        if cols == 0 {
            return Ok(Block { d, head: at, ids: &b[at..], limit: len - at, cols: &[], weights: self.weights });
        }
        // The columns start after the d-th byte that ends a varint.
        let (mut e, mut k) = (at, 0);
        while k < d {
            let byte = *b[..len].get(e).ok_or("list ids run past the block")?;
            k += (byte < 0x80) as usize;
            e += 1;
        }
        let c = b[..len].get(e..e + cols).ok_or("list columns run past the block")?;
        Ok(Block { d, head: at, ids: &b[at..], limit: e - at, cols: c, weights: self.weights })
    }
}

impl EdgeFormat {
    /// The block of packed page `page`'s directory entry `e` (header `h`),
    /// checked to lie between the header and the directory.
    pub fn packed_block<'a>(&self, page: &'a [u8], h: &Header, e: &DirEntry) -> Result<Block<'a>, String> {
        let dir_start = page.len().saturating_sub(h.count as usize * DIR_ENTRY);
        if e.start < HEADER || e.start >= e.end || e.end > dir_start {
            return Err("bad directory entry".into());
        }
        self.block(&page[e.start..], e.end - e.start)
    }

    /// The block of an extent page (header `h`), checked against the
    /// header's edge count.
    pub fn extent_block<'a>(&self, page: &'a [u8], h: &Header) -> Result<Block<'a>, String> {
        let blk = self.block(&page[HEADER..], page.len() - HEADER)?;
        if blk.d != h.count as usize {
            return Err(format!("holds {} edges, its header says {}", blk.d, h.count));
        }
        Ok(blk)
    }
}

/// Ids between two checkpoints of `Block::skips`: a sampler that wants a
/// few positions of a hub's page decodes at most this many ids per
/// position, not the whole page (~1700 ids).
pub const SKIP: usize = 64;
/// Bytes of one checkpoint: the id before it (u64), then its byte offset
/// in the ids (u32).
pub const SKIP_RECORD: usize = 12;

/// One list's block in a page, parsed lazily: the ids are decoded by the
/// caller's method of choice.
pub struct Block<'a> {
    pub d: usize,
    /// Bytes of the length prefix.
    head: usize,
    /// The ids' varints, in the first `limit` bytes; what follows is only
    /// read ahead.
    ids: &'a [u8],
    limit: usize,
    cols: &'a [u8],
    weights: bool,
}

impl Block<'_> {
    /// Appends the d ids to `out`; returns the bytes of the whole block.
    /// An id at or past `below` (the vertex count) is damage that the
    /// checksum did not catch: readers index arrays by these ids. Lists are
    /// sorted, so the last id decides.
    pub fn push_ids(&self, below: u64, out: &mut Vec<u64>) -> Result<usize, String> {
        let n = varint::push_gaps(self.ids, self.limit, self.d, out).ok_or("list ids run past the block")?;
        check_below(out, below)?;
        Ok(self.head + n + self.cols.len())
    }

    /// Decodes the ids `piece` at a time into `buf` (cleared before each
    /// piece) and hands each piece to `f` until it returns false: the rest
    /// of the list is then never decoded. A bottom-up BFS probe stops at
    /// the first neighbor in the frontier and WCC's sampling takes a list's
    /// first ids, where decoding whole lists is most of their pass.
    /// Checks ids against `below` as `push_ids` does.
    pub fn pieces(&self, piece: usize, below: u64, buf: &mut Vec<u64>, mut f: impl FnMut(&[u64]) -> bool) -> Result<(), String> {
        let piece = piece.max(1);
        let (mut at, mut x, mut done) = (0usize, 0u64, 0usize);
        while done < self.d {
            let k = piece.min(self.d - done);
            buf.clear();
            at += varint::push_gaps_from(&self.ids[at..], self.limit - at, k, x, buf).ok_or("list ids run past the block")?;
            check_below(buf, below)?;
            debug_assert_eq!(buf.len(), k);
            x = buf[k - 1];
            done += k;
            if !f(buf) {
                break;
            }
        }
        Ok(())
    }

    pub fn push_weights(&self, out: &mut Vec<f32>) {
        out.extend(self.cols[..4 * self.d].chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4"))));
    }

    pub fn push_labels(&self, out: &mut Vec<u32>) {
        let at = 4 * self.d * self.weights as usize;
        out.extend(self.cols[at..at + 4 * self.d].chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4"))));
    }

    /// Position of neighbor `want`, decoding up to the first id not below it.
    pub fn find(&self, want: u64) -> Result<Option<usize>, String> {
        let (mut at, mut x) = (0, 0u64);
        for k in 0..self.d {
            let gap = varint::get(&self.ids[..self.limit], &mut at).ok_or("list ids run past the block")?;
            x = x.checked_add(gap).ok_or("list ids sum past 2^64")?;
            if x >= want {
                return Ok((x == want).then_some(k));
            }
        }
        Ok(None)
    }

    /// Checkpoints of the ids for `push_range`: for positions SKIP, 2 SKIP,
    /// ... below d, where that id's varint starts and the id before it, as
    /// `SKIP_RECORD`-byte records appended to `out`. `ids` is scratch.
    /// The ids are decoded by `push_ids`; the offsets come from counting
    /// the bytes that end a varint (top bit clear) a word at a time.
    pub fn skips(&self, ids: &mut Vec<u64>, out: &mut Vec<u8>) -> Result<(), String> {
        ids.clear();
        // Checkpoints only: the reads that return ids check them.
        self.push_ids(u64::MAX, ids)?;
        let b = &self.ids[..self.limit];
        let (mut ended, mut next) = (0, SKIP);
        for (w, word) in b.chunks(8).enumerate() {
            if next >= self.d {
                break;
            }
            let mut x = [0x80u8; 8];
            x[..word.len()].copy_from_slice(word);
            let ends = !u64::from_le_bytes(x) & 0x8080_8080_8080_8080;
            if ended + (ends.count_ones() as usize) < next {
                ended += ends.count_ones() as usize;
                continue;
            }
            for (i, &byte) in word.iter().enumerate() {
                if byte < 0x80 {
                    ended += 1;
                    if ended == next && next < self.d {
                        out.extend_from_slice(&ids[next - 1].to_le_bytes());
                        out.extend_from_slice(&((8 * w + i + 1) as u32).to_le_bytes());
                        next += SKIP;
                    }
                }
            }
        }
        Ok(())
    }

    /// Appends the ids at positions [from, to) to `out`, decoding from the
    /// last checkpoint in `skips` (from `skips`, or none) at or before
    /// `from`, rather than from the list's start.
    pub fn push_range(&self, skips: &[u8], from: usize, to: usize, below: u64, out: &mut Vec<u64>) -> Result<(), String> {
        if from >= to || to > self.d {
            return Err(format!("positions {from}..{to} of a list of {}", self.d));
        }
        let c = (from / SKIP).min(skips.len() / SKIP_RECORD);
        let (x, at) = match c {
            0 => (0, 0),
            c => {
                let r = &skips[(c - 1) * SKIP_RECORD..c * SKIP_RECORD];
                (u64::from_le_bytes(r[..8].try_into().expect("8")), u32_at(r, 8) as usize)
            }
        };
        if at > self.limit {
            return Err("checkpoint past the block".into());
        }
        let base = out.len();
        varint::push_gaps_from(&self.ids[at..], self.limit - at, to - c * SKIP, x, out).ok_or("list ids run past the block")?;
        out.drain(base..base + from - c * SKIP);
        check_below(out, below)
    }

    pub fn label_at(&self, i: usize) -> u32 {
        u32_at(self.cols, 4 * self.d * self.weights as usize + 4 * i)
    }
}

/// The last id pushed (the largest of a sorted list) names a vertex;
/// `below` u64::MAX checks nothing (skip checkpoints, verify, which reports
/// such ids itself).
fn check_below(out: &[u64], below: u64) -> Result<(), String> {
    match out.last() {
        Some(&x) if below != u64::MAX && x >= below => Err(format!("neighbor id {x} is past the vertex count {below}")),
        _ => Ok(()),
    }
}

/// Builds one packed page.
pub struct PackedBuilder {
    pub fmt: EdgeFormat,
    page_size: usize,
    /// Bytes of blocks + directory allowed (fill factor applied).
    budget: usize,
    first: u64,
    /// (vertex - first, block offset, edges before) per list.
    dir: Vec<(u32, u16, u16)>,
    end: usize,
    edges: usize,
}

impl PackedBuilder {
    pub fn new(fmt: EdgeFormat, page_size: usize, fill: f64) -> PackedBuilder {
        assert!(page_size <= 1 << 16, "directory offsets are 16 bits");
        let budget = (((page_size - HEADER) as f64) * fill) as usize;
        PackedBuilder { fmt, page_size, budget, first: 0, dir: Vec::new(), end: HEADER, edges: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.dir.is_empty()
    }

    pub fn first(&self) -> u64 {
        self.first
    }

    /// Whether a list for `v` whose block takes `bytes` can join this page.
    /// An empty page takes any list that fits physically, whatever the fill
    /// factor.
    pub fn fits(&self, v: u64, bytes: usize) -> bool {
        let need = bytes + DIR_ENTRY;
        if self.dir.is_empty() {
            return need <= self.page_size - HEADER;
        }
        let used = (self.end - HEADER) + self.dir.len() * DIR_ENTRY;
        v - self.first <= u32::MAX as u64 && used + need <= self.budget
    }

    /// Adds the list into `page` (the page buffer being built).
    pub fn add(&mut self, page: &mut [u8], v: u64, ids: &[u64], weights: &[f32], labels: &[u32]) {
        if self.dir.is_empty() {
            self.first = v;
        }
        let bytes = self.fmt.put_block(&mut page[self.end..self.page_size - (self.dir.len() + 1) * DIR_ENTRY], ids, weights, labels);
        self.dir.push(((v - self.first) as u32, self.end as u16, self.edges as u16));
        self.end += bytes;
        self.edges += ids.len();
    }

    /// Writes the directory and header, seals the page, and resets.
    pub fn finish(&mut self, page: &mut [u8], page_no: u64, epoch: u64) {
        let ps = self.page_size;
        // Zero the gap so the same input always gives the same bytes.
        let dir_start = ps - self.dir.len() * DIR_ENTRY;
        page[self.end..dir_start].fill(0);
        for (i, &(dv, off, before)) in self.dir.iter().enumerate() {
            let at = ps - DIR_ENTRY * (i + 1);
            page[at..at + 4].copy_from_slice(&dv.to_le_bytes());
            page[at + 4..at + 6].copy_from_slice(&off.to_le_bytes());
            page[at + 6..at + 8].copy_from_slice(&before.to_le_bytes());
        }
        let h = Header { kind: Kind::Packed, epoch, key: self.first, count: self.dir.len() as u32, aux: self.end as u32 };
        seal(page_no, page, &h);
        self.dir.clear();
        self.end = HEADER;
        self.edges = 0;
    }
}

/// Writes one extent page holding `ids` (a chunk of vertex `v`'s list whose
/// block fits `extent_room`).
// The header's fields and the block's three columns, each needed by the
// page: a struct for them would only rename the arguments.
#[allow(clippy::too_many_arguments)]
pub fn write_extent_page(fmt: &EdgeFormat, page: &mut [u8], page_no: u64, epoch: u64, v: u64, index: u32, ids: &[u64], weights: &[f32], labels: &[u32]) {
    let bytes = fmt.put_block(&mut page[HEADER..], ids, weights, labels);
    page[HEADER + bytes..].fill(0);
    let h = Header { kind: Kind::Extent, epoch, key: v, count: ids.len() as u32, aux: index };
    seal(page_no, page, &h);
}

/// One directory entry of a packed page: vertex, block byte range, edges of
/// the page's earlier blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirEntry {
    pub vertex: u64,
    pub start: usize,
    pub end: usize,
    pub before: u64,
}

fn dir_entry(page: &[u8], h: &Header, i: usize) -> DirEntry {
    let ps = page.len();
    let at = ps - DIR_ENTRY * (i + 1);
    let start = u16::from_le_bytes([page[at + 4], page[at + 5]]) as usize;
    let before = u16::from_le_bytes([page[at + 6], page[at + 7]]) as u64;
    let end = if i + 1 < h.count as usize {
        let next = at - DIR_ENTRY;
        u16::from_le_bytes([page[next + 4], page[next + 5]]) as usize
    } else {
        h.aux as usize
    };
    DirEntry { vertex: h.key + u32_at(page, at) as u64, start, end, before }
}

/// Finds `v` in a packed page (header already checked), or None when `v`
/// has no edges here.
pub fn find_in_packed(page: &[u8], h: &Header, v: u64) -> Option<DirEntry> {
    if v < h.key || v - h.key > u32::MAX as u64 {
        return None;
    }
    let dv = (v - h.key) as u32;
    let ps = page.len();
    let n = h.count as usize;
    let key = |i: usize| u32_at(page, ps - DIR_ENTRY * (i + 1));
    let (mut lo, mut hi) = (0usize, n);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if key(mid) < dv { lo = mid + 1 } else { hi = mid }
    }
    (lo < n && key(lo) == dv).then(|| dir_entry(page, h, lo))
}

/// Every directory entry of a packed page, in vertex order.
pub fn packed_entries<'a>(page: &'a [u8], h: &'a Header) -> impl Iterator<Item = DirEntry> + 'a {
    (0..h.count as usize).map(move |i| dir_entry(page, h, i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn blocks_round_trip(
            gaps in proptest::collection::vec((0u32..64, any::<u64>()), 1..300),
            short: bool,
            from: usize,
            to: usize,
            weights: bool,
            labels: bool,
        ) {
            // Gaps of every varint length, 1 to 10 bytes, mixed in a list,
            // or (short) only those of up to four bytes, which the decoder
            // takes four at a time.
            let mut x = 0u64;
            let ids: Vec<u64> = gaps
                .iter()
                .map(|&(bits, r)| {
                    let bits = if short { bits % 29 } else { bits };
                    x = x.saturating_add(if bits == 0 { 0 } else { r >> (64 - bits) });
                    x
                })
                .collect();
            let fmt = EdgeFormat { weights, labels };
            let ws: Vec<f32> = (0..ids.len()).map(|i| i as f32 * 0.5).collect();
            let ls: Vec<u32> = (0..ids.len()).map(|i| i as u32 * 3).collect();
            // Bytes after the block (read ahead, not used) that would end
            // varints anywhere.
            let mut buf = vec![0x11u8; fmt.block_bytes(&ids) + 16];
            let n = fmt.put_block(&mut buf, &ids, &ws, &ls);
            prop_assert_eq!(n, fmt.block_bytes(&ids));
            prop_assert_eq!(fmt.fitting(&ids, n), ids.len());
            prop_assert_eq!(fmt.fitting(&ids, n - 1), ids.len() - 1);
            let b = fmt.block(&buf, n).unwrap();
            prop_assert_eq!(b.d, ids.len());
            let mut got = Vec::new();
            prop_assert_eq!(b.push_ids(u64::MAX, &mut got).unwrap(), n);
            prop_assert_eq!(&got, &ids);
            // An id at or past the vertex count is refused, whole list or range.
            let last = *ids.last().unwrap();
            if last < u64::MAX {
                prop_assert!(b.push_ids(last, &mut Vec::new()).is_err());
                prop_assert!(b.push_ids(last + 1, &mut Vec::new()).is_ok());
                prop_assert!(b.push_range(&[], 0, ids.len(), last, &mut Vec::new()).is_err());
            }
            let k = ids.len() / 2;
            prop_assert_eq!(b.find(ids[k]).unwrap().map(|j| ids[j]), Some(ids[k]));
            // Any range, from the checkpoints or from the start.
            let mut skips = Vec::new();
            b.skips(&mut Vec::new(), &mut skips).unwrap();
            prop_assert_eq!(skips.len(), (ids.len() - 1) / SKIP * SKIP_RECORD);
            let (from, to) = (from % ids.len(), to % ids.len());
            let (from, to) = (from.min(to), from.max(to) + 1);
            for s in [&skips[..], &[]] {
                let mut r = vec![7];
                b.push_range(s, from, to, u64::MAX, &mut r).unwrap();
                prop_assert_eq!(&r[1..], &ids[from..to]);
            }
            prop_assert!(b.push_range(&skips, to, to, u64::MAX, &mut got).is_err());
            prop_assert!(b.push_range(&skips, 0, ids.len() + 1, u64::MAX, &mut got).is_err());
            if weights {
                let mut w = Vec::new();
                b.push_weights(&mut w);
                prop_assert_eq!(w, ws);
            }
            if labels {
                let mut l = Vec::new();
                b.push_labels(&mut l);
                prop_assert_eq!(&l, &ls);
                prop_assert_eq!(b.label_at(k), ls[k]);
            }
        }
    }

    #[test]
    fn truncated_blocks_are_errors_not_panics() {
        let fmt = EdgeFormat { weights: true, labels: false };
        let ids = [3u64, 300, 70000];
        let mut buf = vec![0u8; 64];
        let n = fmt.put_block(&mut buf, &ids, &[1.0; 3], &[]);
        for cut in 0..n {
            // Read-ahead bytes past the cut do not make a block whole.
            if let Ok(blk) = fmt.block(&buf, cut) {
                assert!(blk.push_ids(u64::MAX, &mut Vec::new()).is_err());
            }
        }
        // A varint that never ends.
        assert!(fmt.block(&[0xff; 16], 16).is_err());
    }
}
