//! A store's base: what one superblock names (translation tables, tensor
//! map, tombstones), loaded at open and by every merge, and the table reads
//! that load it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use solidgraph_io::Volume;

use crate::error::{Need, Result, StoreError};
use crate::gtt::Gtt;
use crate::page::{self, Kind};
use crate::superblock::{DirMeta, Superblock, Table};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Out,
    In,
    /// An undirected store's lower lists, when imported with them
    /// (`ImportOptions::lower_lists`): each vertex's neighbors up to itself,
    /// so every edge once. Whole-graph passes that see an edge from either
    /// end (PageRank, WCC) read half the bytes. Edge ids number this
    /// adjacency's own order. Not kept up to date by updates: unavailable
    /// while updates are pending, dropped by the next merge.
    Lower,
}

impl std::str::FromStr for Direction {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Direction> {
        match s {
            "out" => Ok(Direction::Out),
            "in" => Ok(Direction::In),
            _ => Err(StoreError::Invalid(format!("direction must be \"out\" or \"in\", not {s:?}"))),
        }
    }
}

/// The path of member `i` of the store in `dir`.
pub fn member_path(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("sg.{i}"))
}

/// What one superblock names: immutable; a merge builds the next one and
/// swaps it in. Readers hold an `Arc` for the length of a read (or of a
/// snapshot), and the pages it names are not reused while any does.
pub(crate) struct Base {
    pub sb: Superblock,
    pub out: Gtt,
    pub inn: Option<Gtt>,
    pub lower: Option<Gtt>,
    /// Tensor pages moved by merges: (tensor index, page index) -> page.
    pub tensor_map: HashMap<(u32, u64), u64>,
    /// Deleted vertices (never reused).
    pub tombstones: Vec<u64>,
}

impl Base {
    pub fn gtt(&self, dir: Direction) -> Result<&Gtt> {
        match dir {
            Direction::Out => Ok(&self.out),
            // An undirected store keeps each edge both ways in one table.
            Direction::In if !self.sb.directed => Ok(&self.out),
            Direction::In => self.inn.as_ref().ok_or(StoreError::NoDirection("in")),
            Direction::Lower => self.lower.as_ref().ok_or(StoreError::NoDirection("lower")),
        }
    }

    /// Edges stored in `dir`'s adjacency.
    pub fn edges(&self, dir: Direction) -> u64 {
        match (dir, self.sb.lower) {
            (Direction::Lower, Some(l)) => l.edges,
            (Direction::Lower, None) => 0,
            _ => self.sb.num_edges,
        }
    }

    /// Page number of page `k` of tensor `ti`.
    pub fn tensor_page(&self, ti: usize, k: u64) -> Option<u64> {
        let t = &self.sb.tensors[ti];
        self.tensor_map.get(&(ti as u32, k)).copied().or((k < t.pages).then(|| t.start_page + k))
    }

    /// Refuses a page written by a newer merge than this base: another
    /// process merged and may have reused the page this base expected.
    pub fn check_epoch(&self, page_no: u64, page_epoch: u64) -> Result<()> {
        if page_epoch > self.sb.epoch {
            return Err(StoreError::Stale { page: page_no, epoch: self.sb.epoch, found: page_epoch });
        }
        Ok(())
    }

    /// Refuses edge columns the store does not keep.
    pub fn check_columns(&self, weights: bool, labels: bool) -> Result<()> {
        if weights && !self.sb.fmt.weights {
            return Err(StoreError::Lacks { what: "this store has no edge weights".into(), need: Need::Weights });
        }
        if labels && !self.sb.fmt.labels {
            return Err(StoreError::Lacks { what: "this store has no edge labels".into(), need: Need::Labels });
        }
        Ok(())
    }

    /// The index of the tensor called `name`.
    pub fn tensor_index(&self, name: &str) -> Result<usize> {
        let sb = &self.sb;
        sb.tensors.iter().position(|t| t.name == name).ok_or_else(|| StoreError::NoSuchTensor {
            name: name.to_string(),
            have: if sb.tensors.is_empty() { "none".into() } else { sb.tensors.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(", ") },
        })
    }
}

/// A translation table borrowed from the base current when it was taken.
pub struct GttRef {
    base: Arc<Base>,
    dir: Direction,
}

impl GttRef {
    /// `dir`'s table of `base`, refused if the base has none.
    pub(crate) fn new(base: Arc<Base>, dir: Direction) -> Result<GttRef> {
        base.gtt(dir)?;
        Ok(GttRef { base, dir })
    }
}

impl std::ops::Deref for GttRef {
    type Target = Gtt;
    fn deref(&self) -> &Gtt {
        self.base.gtt(self.dir).expect("checked when taken")
    }
}

/// Reads the translation tables and tables a superblock names.
pub(crate) fn load_base(vol: &Volume, sb: Superblock) -> Result<Base> {
    let out = load_gtt(vol, &sb.out, sb.num_edges)?;
    let inn = match sb.inn {
        Some(d) => Some(load_gtt(vol, &d, sb.num_edges)?),
        None => None,
    };
    let lower = match sb.lower {
        Some(l) => Some(load_gtt(vol, &l.dir, l.edges)?),
        None => None,
    };
    let words = load_table(vol, &sb.tensor_map)?;
    let mut tensor_map = HashMap::with_capacity(words.len() / 2);
    for pair in words.chunks_exact(2) {
        let (ti, k) = ((pair[0] >> 48) as usize, pair[0] & ((1 << 48) - 1));
        if ti >= sb.tensors.len() || pair[1] >= sb.total_pages {
            return Err(StoreError::Corrupt { page: sb.tensor_map.start, reason: format!("tensor map entry ({ti}, {k}) -> {} out of range", pair[1]) });
        }
        tensor_map.insert((ti as u32, k), pair[1]);
    }
    let tombstones = load_table(vol, &sb.tombstones)?;
    Ok(Base { sb, out, inn, lower, tensor_map, tombstones })
}

pub(crate) fn load_table(vol: &Volume, t: &Table) -> Result<Vec<u64>> {
    load_table_range(vol, t, 0, t.words)
}

/// Up to `want` words of a table from word `from`.
pub(crate) fn load_table_range(vol: &Volume, t: &Table, from: u64, want: u64) -> Result<Vec<u64>> {
    // A damaged extent must not size an allocation or overflow.
    if t.start.checked_add(t.pages).is_none_or(|e| e > vol.num_pages()) {
        return Err(StoreError::Corrupt { page: t.start, reason: format!("table of {} pages from page {} runs past the store", t.pages, t.start) });
    }
    let end = from.saturating_add(want).min(t.words);
    let per = ((vol.page_size() - page::HEADER) / 8) as u64;
    let first = from / per;
    let pages: Vec<u64> = (t.start + first..t.start + end.div_ceil(per).min(t.pages)).collect();
    let mut words = Vec::with_capacity(pages.len() * per as usize);
    for (c, chunk) in pages.chunks(1024).enumerate() {
        let got = vol.read(chunk)?;
        for (i, &p) in chunk.iter().enumerate() {
            page::decode_table(p, got.page(i), first + (c * 1024 + i) as u64, &mut words)?;
        }
    }
    // Every page but a table's last is full, and the pages read hold the range.
    let held = first * per + words.len() as u64;
    if held < end || held != t.words.min((first + pages.len() as u64) * per) {
        return Err(StoreError::Corrupt { page: t.start, reason: format!("table holds {held} words, superblock says {}", t.words) });
    }
    let skip = (from.min(end) - first * per) as usize;
    words.truncate(skip + (end - from.min(end)) as usize);
    words.drain(..skip);
    Ok(words)
}

/// Loads a direction's table of `edges` edges.
fn load_gtt(vol: &Volume, d: &DirMeta, edges: u64) -> Result<Gtt> {
    let mut g = Gtt::default();
    // A damaged extent must not size an allocation or overflow.
    let end = d.gtt_start.checked_add(d.gtt_pages).filter(|&e| e <= vol.num_pages());
    let end = end.ok_or_else(|| StoreError::Corrupt {
        page: d.gtt_start,
        reason: format!("GTT of {} pages from page {} runs past the store", d.gtt_pages, d.gtt_start),
    })?;
    // The superblock's count, trusted only as far as the pages can hold.
    let room = d.gtt_pages.saturating_mul(Gtt::entries_per_page(vol.page_size()) as u64);
    g.reserve_exact(d.gtt_entries.min(room) as usize);
    let pages: Vec<u64> = (d.gtt_start..end).collect();
    for chunk in pages.chunks(1024) {
        let got = vol.read(chunk)?;
        for (i, &p) in chunk.iter().enumerate() {
            let h = page::open_kind(p, got.page(i), Kind::Gtt)?;
            g.decode_page(p, got.page(i), &h)?;
        }
    }
    let bitmap_end = end.checked_add(d.bitmap_pages).filter(|&e| e <= vol.num_pages());
    let bitmap_end = bitmap_end
        .ok_or_else(|| StoreError::Corrupt { page: end, reason: format!("presence bitmap of {} pages from page {end} runs past the store", d.bitmap_pages) })?;
    let bitmap: Vec<u64> = (end..bitmap_end).collect();
    for chunk in bitmap.chunks(1024) {
        let got = vol.read(chunk)?;
        for (i, &p) in chunk.iter().enumerate() {
            let h = page::open_kind(p, got.page(i), Kind::Presence)?;
            g.decode_bitmap_page(p, got.page(i), &h)?;
        }
    }
    if g.len() as u64 != d.gtt_entries {
        return Err(StoreError::Corrupt { page: d.gtt_start, reason: format!("GTT has {} entries, superblock says {}", g.len(), d.gtt_entries) });
    }
    check_gtt_edges(&g, d, edges, vol.page_size())?;
    Ok(g)
}

/// Every entry's edges fit in its page (an edge takes at least a byte) and
/// the direction's `edges` follow the last entry's: reads size their
/// buffers by these counts, so damaged ones are refused here, naming the
/// GTT page of the entry.
fn check_gtt_edges(g: &Gtt, d: &DirMeta, edges: u64, page_size: usize) -> Result<()> {
    let room = (page_size - page::HEADER) as u64;
    let per = Gtt::entries_per_page(page_size) as u64;
    for i in 0..g.len() {
        let next = if i + 1 < g.len() { g.edges_before(i + 1) } else { edges };
        if next.checked_sub(g.edges_before(i)).is_none_or(|e| e > room) {
            return Err(StoreError::Corrupt {
                page: d.gtt_start + i as u64 / per,
                reason: format!("GTT entry {i}: {} edges before it, {next} before the next (at most {room} fit in a page)", g.edges_before(i)),
            });
        }
    }
    if g.is_empty() && edges != 0 {
        return Err(StoreError::Corrupt { page: d.gtt_start, reason: format!("an empty GTT for {edges} edges") });
    }
    Ok(())
}
