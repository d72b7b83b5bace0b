//! The superblock: two copies, in logical pages 0 and 1, each a sealed page
//! with an epoch; the valid copy with the higher epoch wins at open. It names
//! every region of the store.
//!
//! Body, after the page header (little-endian):
//! ```text
//! magic "SOLIDGRF" | version u32 | page_size u32 | stripe_pages u64 | members u32
//! flags u32 (1 directed, 2 in-edges, 4 weights, 8 labels, 16 lower lists) | 0 u32 | 0 u32
//! num_nodes u64 | num_edges u64 | total_pages u64 | checkpoint_lsn u64
//! out: DirMeta | in: DirMeta            (6 x u64 each)
//! lower: DirMeta | edges u64 | degrees: Table   (version 6 on)
//! tensor map: Table | tombstones: Table (3 x u64 each)
//! hot: Table | order: Table            (3 x u64 each)
//! tensors u32 | tensors x TensorMeta    (64-byte name, dtype u8 + 7 pad, 5 x u64)
//! ```
//!
//! Version 6 is written. Version 5 (the same body without the lower-list
//! slot) is read as a store without lower lists, and a merge writes it back
//! as 6; other versions are refused with a request to import again.

use std::path::Path;

use crate::adjacency::EdgeFormat;
use crate::error::{Result, StoreError};
use crate::page::{HEADER, Header, Kind, open_kind, seal, u32_at, u64_at};
use crate::tensor::DType;

pub const MAGIC: &[u8; 8] = b"SOLIDGRF";
pub const FORMAT_VERSION: u32 = 6;
/// The oldest version read: 5 differs only by the missing lower lists.
const OLDEST_READ: u32 = 5;
pub const MAX_TENSORS: usize = 32;
pub const MAX_TENSOR_NAME: usize = 63;
/// Files a store stripes its pages over.
pub const MAX_MEMBERS: u32 = 256;
/// Bytes of one tensor row: reads size their buffers by rows of it.
pub const MAX_ROW_BYTES: u64 = 1 << 24;
/// Vertices a store may grow to by updates (an import's dense 64-bit ids
/// may start above it): log replay refuses a record adding past it.
pub const MAX_GROWN_NODES: u64 = 1 << 48;
const TENSOR_ENTRY: usize = 64 + 8 + 40;

/// One direction's adjacency.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirMeta {
    pub gtt_start: u64,
    pub gtt_pages: u64,
    pub gtt_entries: u64,
    /// Where the import wrote the adjacency; merges move changed pages
    /// anywhere (the GTT says where), and `adj_pages` counts them all.
    pub adj_start: u64,
    pub adj_pages: u64,
    /// Presence bitmap pages, right after the GTT pages.
    pub bitmap_pages: u64,
}

/// An undirected store's lower lists: each vertex's neighbors up to itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LowerMeta {
    pub dir: DirMeta,
    pub edges: u64,
    /// Every vertex's out-degree, two u32 per word: a pass over the lower
    /// lists sees only part of each degree.
    pub degrees: Table,
}

/// A region of Table pages (see `page::encode_table`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Table {
    pub start: u64,
    pub pages: u64,
    /// Words in the table.
    pub words: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorMeta {
    pub name: String,
    pub dtype: DType,
    /// Elements per row (1 for a vector).
    pub dim: u64,
    /// Rows in pages (vertices added later get rows at the next merge).
    pub rows: u64,
    /// The region written at import: page k of the tensor is
    /// `start_page + k` unless the tensor map moved it (merges copy
    /// changed pages on write, and pages past `pages` live only there).
    pub start_page: u64,
    pub pages: u64,
}

impl TensorMeta {
    pub fn row_bytes(&self) -> u64 {
        self.dim * self.dtype.size() as u64
    }

    /// The shape is one a store can hold: rows of 1..=MAX_ROW_BYTES bytes,
    /// each within the store's bytes, whose pages lie inside the store (a
    /// decoded shape sizes read buffers). `pages` are the import's (or
    /// add_tensor's); rows added later live in pages the tensor map names,
    /// so `rows` may outgrow them.
    fn check_shape(&self, page_size: usize, total_pages: u64) -> std::result::Result<(), String> {
        let bad = |why: &str| Err(format!("tensor {:?} ({} x {} {}): {why}", self.name, self.rows, self.dim, self.dtype.name()));
        let store_bytes = total_pages.saturating_mul(page_size as u64);
        let Some(row_bytes) = self.dim.checked_mul(self.dtype.size() as u64).filter(|&r| (1..=MAX_ROW_BYTES.min(store_bytes)).contains(&r)) else {
            return bad("row width out of range");
        };
        if self.rows.checked_mul(row_bytes).is_none() || self.pages > crate::tensor::pages_for(self.rows, row_bytes, page_size) {
            return bad(&format!("{} pages for its rows", self.pages));
        }
        if self.start_page.checked_add(self.pages).is_none_or(|end| end > total_pages) {
            return bad(&format!("pages {}+{} lie past the store's {total_pages}", self.start_page, self.pages));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Superblock {
    /// The format version it was read as; written as `FORMAT_VERSION`.
    pub version: u32,
    pub epoch: u64,
    pub page_size: u32,
    pub stripe_pages: u64,
    pub members: u32,
    pub directed: bool,
    pub fmt: EdgeFormat,
    pub num_nodes: u64,
    /// Edges in the out-direction adjacency (both directions counted for an
    /// undirected graph, as stored).
    pub num_edges: u64,
    pub total_pages: u64,
    pub checkpoint_lsn: u64,
    pub out: DirMeta,
    pub inn: Option<DirMeta>,
    /// An undirected store's lower lists (`Direction::Lower`).
    pub lower: Option<LowerMeta>,
    /// Tensor pages moved by merges: pairs `(tensor << 48 | page index,
    /// page number)`, sorted.
    pub tensor_map: Table,
    /// Deleted vertex ids, sorted (ids are never reused).
    pub tombstones: Table,
    /// The vertices of highest out-degree at import, highest first (ties by
    /// id), at most `import::HOT_MAX` of them: the rows a row cache admits.
    pub hot: Table,
    /// The vertex order chosen at import (`order.rs`): empty when vertices
    /// keep their input ids.
    pub order: Table,
    pub tensors: Vec<TensorMeta>,
}

fn put_dir(b: &mut Vec<u8>, d: &DirMeta) {
    for x in [d.gtt_start, d.gtt_pages, d.gtt_entries, d.adj_start, d.adj_pages, d.bitmap_pages] {
        b.extend_from_slice(&x.to_le_bytes());
    }
}

fn get_dir(b: &[u8], at: usize) -> DirMeta {
    DirMeta {
        gtt_start: u64_at(b, at),
        gtt_pages: u64_at(b, at + 8),
        gtt_entries: u64_at(b, at + 16),
        adj_start: u64_at(b, at + 24),
        adj_pages: u64_at(b, at + 32),
        bitmap_pages: u64_at(b, at + 40),
    }
}

impl Superblock {
    /// Seals the superblock into `page` as copy `which` (0 or 1).
    pub fn encode(&self, which: u64, page: &mut [u8]) {
        let mut b = Vec::with_capacity(512);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        b.extend_from_slice(&self.page_size.to_le_bytes());
        b.extend_from_slice(&self.stripe_pages.to_le_bytes());
        b.extend_from_slice(&self.members.to_le_bytes());
        let flags = self.directed as u32
            | (self.inn.is_some() as u32) << 1
            | (self.fmt.weights as u32) << 2
            | (self.fmt.labels as u32) << 3
            | (self.lower.is_some() as u32) << 4;
        b.extend_from_slice(&flags.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        for x in [self.num_nodes, self.num_edges, self.total_pages, self.checkpoint_lsn] {
            b.extend_from_slice(&x.to_le_bytes());
        }
        put_dir(&mut b, &self.out);
        put_dir(&mut b, &self.inn.unwrap_or_default());
        let lower = self.lower.unwrap_or_default();
        put_dir(&mut b, &lower.dir);
        for x in [lower.edges, lower.degrees.start, lower.degrees.pages, lower.degrees.words] {
            b.extend_from_slice(&x.to_le_bytes());
        }
        for t in [self.tensor_map, self.tombstones, self.hot, self.order] {
            for x in [t.start, t.pages, t.words] {
                b.extend_from_slice(&x.to_le_bytes());
            }
        }
        b.extend_from_slice(&(self.tensors.len() as u32).to_le_bytes());
        for t in &self.tensors {
            let mut name = [0u8; 64];
            name[0] = t.name.len() as u8;
            name[1..1 + t.name.len()].copy_from_slice(t.name.as_bytes());
            b.extend_from_slice(&name);
            b.extend_from_slice(&[t.dtype as u8, 0, 0, 0, 0, 0, 0, 0]);
            for x in [t.dim, t.rows, t.start_page, t.pages, t.row_bytes()] {
                b.extend_from_slice(&x.to_le_bytes());
            }
        }
        assert!(HEADER + b.len() <= page.len(), "superblock body exceeds a page: tensor count was not checked");
        page.fill(0);
        page[HEADER..HEADER + b.len()].copy_from_slice(&b);
        seal(which, page, &Header { kind: Kind::Superblock, epoch: self.epoch, key: 0, count: self.tensors.len() as u32, aux: 0 });
    }

    /// Bytes a superblock with `tensors` tensors needs; must fit a page.
    pub fn body_bytes(tensors: usize) -> usize {
        HEADER + 8 + 4 + 4 + 8 + 4 + 4 + 4 + 4 + 32 + 96 + 80 + 96 + 4 + tensors * TENSOR_ENTRY
    }

    /// Decodes copy `which`; `path` names the store in errors.
    pub fn decode(which: u64, page: &[u8], path: &Path) -> Result<Superblock> {
        let b = page;
        if &b[HEADER..HEADER + 8] != MAGIC {
            return Err(StoreError::NotAStore { path: path.to_path_buf(), reason: format!("not a SolidGraph store: superblock {which} has no magic") });
        }
        let version = u32_at(b, HEADER + 8);
        if version > FORMAT_VERSION {
            return Err(StoreError::NewerFormat { path: path.to_path_buf(), found: version, supported: FORMAT_VERSION });
        }
        let h = open_kind(which, page, Kind::Superblock)?;
        if version < OLDEST_READ {
            return Err(StoreError::OlderFormat { path: path.to_path_buf(), found: version, supported: OLDEST_READ });
        }
        let mut at = HEADER + 12;
        let page_size = u32_at(b, at);
        let stripe_pages = u64_at(b, at + 4);
        let members = u32_at(b, at + 12);
        let flags = u32_at(b, at + 16);
        at += 28;
        let num_nodes = u64_at(b, at);
        let num_edges = u64_at(b, at + 8);
        let total_pages = u64_at(b, at + 16);
        let checkpoint_lsn = u64_at(b, at + 24);
        at += 32;
        let out = get_dir(b, at);
        let inn = get_dir(b, at + 48);
        at += 96;
        let lower = (version >= 6 && flags & 16 != 0).then(|| LowerMeta {
            dir: get_dir(b, at),
            edges: u64_at(b, at + 48),
            degrees: Table { start: u64_at(b, at + 56), pages: u64_at(b, at + 64), words: u64_at(b, at + 72) },
        });
        if version >= 6 {
            at += 80;
        }
        let table = |at: usize| Table { start: u64_at(b, at), pages: u64_at(b, at + 8), words: u64_at(b, at + 16) };
        let (tensor_map, tombstones, hot, order) = (table(at), table(at + 24), table(at + 48), table(at + 72));
        at += 96;
        let nt = u32_at(b, at) as usize;
        at += 4;
        let corrupt = |reason: String| StoreError::Corrupt { page: which, reason };
        if lower.is_some() && flags & 1 != 0 {
            return Err(corrupt("lower lists in a directed store".into()));
        }
        if nt > MAX_TENSORS || Self::body_bytes(nt) > page.len() {
            return Err(corrupt(format!("superblock lists {nt} tensors")));
        }
        // Opens and reads size files, buffers and loops by these: a damaged
        // count must stop here, not in an allocation.
        if members == 0 || members > MAX_MEMBERS {
            return Err(corrupt(format!("superblock names {members} member files (1..={MAX_MEMBERS})")));
        }
        if !(4096..=65536).contains(&page_size) || !page_size.is_power_of_two() {
            return Err(corrupt(format!("page size {page_size}")));
        }
        let mut tensors = Vec::with_capacity(nt);
        for _ in 0..nt {
            let len = b[at] as usize;
            if len > MAX_TENSOR_NAME {
                return Err(corrupt("tensor name too long".into()));
            }
            let name = String::from_utf8(b[at + 1..at + 1 + len].to_vec()).map_err(|_| corrupt("tensor name is not UTF-8".into()))?;
            let dtype = DType::from_u8(b[at + 64]).ok_or_else(|| corrupt(format!("tensor dtype {}", b[at + 64])))?;
            let x = at + 72;
            let t = TensorMeta { name, dtype, dim: u64_at(b, x), rows: u64_at(b, x + 8), start_page: u64_at(b, x + 16), pages: u64_at(b, x + 24) };
            t.check_shape(page_size as usize, total_pages).map_err(corrupt)?;
            tensors.push(t);
            at += TENSOR_ENTRY;
        }
        Ok(Superblock {
            version,
            epoch: h.epoch,
            page_size,
            stripe_pages,
            members,
            directed: flags & 1 != 0,
            fmt: EdgeFormat { weights: flags & 4 != 0, labels: flags & 8 != 0 },
            num_nodes,
            num_edges,
            total_pages,
            checkpoint_lsn,
            out,
            inn: (flags & 2 != 0).then_some(inn),
            lower,
            tensor_map,
            tombstones,
            hot,
            order,
            tensors,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(lower: Option<LowerMeta>) -> Superblock {
        let dir = |k: u64| DirMeta { gtt_start: k, gtt_pages: k + 1, gtt_entries: k + 2, adj_start: k + 3, adj_pages: k + 4, bitmap_pages: k + 5 };
        let table = |k: u64| Table { start: k, pages: k + 1, words: k + 2 };
        Superblock {
            version: FORMAT_VERSION,
            epoch: 7,
            page_size: 4096,
            stripe_pages: 256,
            members: 1,
            directed: lower.is_none(),
            fmt: EdgeFormat { weights: true, labels: false },
            num_nodes: 1000,
            num_edges: 5000,
            total_pages: 900,
            checkpoint_lsn: 3,
            out: dir(10),
            inn: None,
            lower,
            tensor_map: table(100),
            tombstones: table(200),
            hot: table(300),
            order: table(400),
            tensors: vec![TensorMeta { name: "x".into(), dtype: DType::F32, dim: 4, rows: 1000, start_page: 2, pages: 4 }],
        }
    }

    #[test]
    fn round_trips_and_reads_version_5() {
        let lower = LowerMeta {
            dir: DirMeta { gtt_start: 50, gtt_pages: 1, gtt_entries: 9, adj_start: 40, adj_pages: 9, bitmap_pages: 1 },
            edges: 2500,
            degrees: Table { start: 52, pages: 1, words: 500 },
        };
        for sb in [sample(None), sample(Some(lower))] {
            let mut page = vec![0u8; 4096];
            sb.encode(0, &mut page);
            assert_eq!(Superblock::decode(0, &page, Path::new("s")).unwrap(), sb);
        }
        // Version 5: the same body without the lower-list slot.
        let sb = sample(None);
        let mut v6 = vec![0u8; 4096];
        sb.encode(1, &mut v6);
        let slot = HEADER + 8 + 4 + 4 + 8 + 4 + 4 + 8 + 32 + 96;
        let mut v5 = vec![0u8; 4096];
        v5[..slot].copy_from_slice(&v6[..slot]);
        v5[slot..4096 - 80].copy_from_slice(&v6[slot + 80..]);
        v5[HEADER + 8..HEADER + 12].copy_from_slice(&5u32.to_le_bytes());
        seal(1, &mut v5, &Header { kind: Kind::Superblock, epoch: sb.epoch, key: 0, count: 1, aux: 0 });
        assert_eq!(Superblock::decode(1, &v5, Path::new("s")).unwrap(), Superblock { version: 5, ..sb });
        v5[HEADER + 8..HEADER + 12].copy_from_slice(&4u32.to_le_bytes());
        seal(1, &mut v5, &Header { kind: Kind::Superblock, epoch: sb.epoch, key: 0, count: 1, aux: 0 });
        assert!(matches!(Superblock::decode(1, &v5, Path::new("s")), Err(StoreError::OlderFormat { found: 4, supported: 5, .. })));
    }
}
