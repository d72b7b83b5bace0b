//! Updates not yet merged into pages: an in-memory delta that every read
//! merges with the base pages, and the operations that change it. Each
//! operation is one WAL record (see `wal.rs`), so a batch is applied whole or
//! not at all.

use std::collections::HashMap;
use std::sync::Arc;

use imbl::GenericHashMap;
use imbl::shared_ptr::DefaultSharedPtr;
use rustc_hash::{FxBuildHasher, FxHashSet};
use smallvec::SmallVec;

use crate::base::Base;
use crate::error::{Result, StoreError};
use crate::planner::Csr;
use crate::superblock::Superblock;

// A weight update is logged as AddEdges of existing edges (with their
// labels), which replaces them.

/// One update batch.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// `count` new vertices, ids from the current vertex count; optional
    /// rows per tensor (row-major bytes for all of them).
    AddVertices {
        count: u64,
        tensors: Vec<(String, Vec<u8>)>,
    },
    /// Removes vertices and every edge touching them.
    DeleteVertices {
        ids: Vec<u64>,
    },
    AddEdges {
        src: Vec<u64>,
        dst: Vec<u64>,
        weights: Option<Vec<f32>>,
        labels: Option<Vec<u32>>,
    },
    DeleteEdges {
        src: Vec<u64>,
        dst: Vec<u64>,
    },
    UpdateTensor {
        name: String,
        ids: Vec<u64>,
        rows: Vec<u8>,
    },
}

/// Batches at least this large apply their two directions on two threads
/// (scoped threads, not a pool: a pool's threads would not survive a fork).
const PARALLEL_EDGES: usize = 4096;

/// An added edge: (neighbor, weight, label).
type Added = (u64, f32, u32);

/// A persistent hash map (a hash array mapped trie): a clone shares every
/// node, and a write to a shared map copies only the nodes on its key's
/// path. A snapshot holds the delta while a writer goes on, so a write
/// copies what it touches, not everything pending (up to the delta
/// budget).
pub type PMap<K, V> = GenericHashMap<K, V, FxBuildHasher, DefaultSharedPtr>;

/// Changes to the lists of one direction.
#[derive(Debug, Clone, Default)]
pub struct DirDelta {
    /// Per vertex, sorted by neighbor. Most vertices gain an edge or two:
    /// those live inline in the entry (no allocation, cheap to copy with
    /// a node), and a batch merges into each list once.
    added: PMap<u64, SmallVec<[Added; 2]>>,
    /// Per vertex, sorted neighbors whose base edge is gone.
    removed: PMap<u64, SmallVec<[u64; 2]>>,
}

impl DirDelta {
    /// Adds a batch of (source, edge) pairs; a later pair for the same edge
    /// replaces an earlier one.
    fn add_batch(&mut self, mut edges: Vec<(u64, Added)>) {
        // Stable: equal edges stay in batch order, the last one wins below.
        edges.sort_by_key(|&(s, (d, _, _))| (s, d));
        let mut i = 0;
        while i < edges.len() {
            let s = edges[i].0;
            let mut j = i;
            let mut new: SmallVec<[Added; 2]> = SmallVec::new();
            while j < edges.len() && edges[j].0 == s {
                if j + 1 < edges.len() && edges[j + 1].0 == s && edges[j + 1].1.0 == edges[j].1.0 {
                    j += 1;
                    continue;
                }
                new.push(edges[j].1);
                j += 1;
            }
            // Most deltas remove nothing: skip the lookup (a cache miss).
            if !self.removed.is_empty()
                && let Some(r) = self.removed.get_mut(&s)
            {
                r.retain(|d| new.binary_search_by_key(d, |e| e.0).is_err());
            }
            let cur = self.added.entry(s).or_default();
            if cur.is_empty() {
                *cur = new;
            } else {
                let old = std::mem::take(cur);
                let (mut a, mut b) = (old.into_iter().peekable(), new.into_iter().peekable());
                loop {
                    let pick_new = match (a.peek().map(|e| e.0), b.peek().map(|e| e.0)) {
                        (None, None) => break,
                        (Some(_), None) => false,
                        (None, Some(_)) => true,
                        (Some(x), Some(y)) => {
                            if x == y {
                                a.next(); // replaced
                            }
                            y <= x
                        }
                    };
                    let e = if pick_new { b.next() } else { a.next() };
                    cur.push(e.expect("peeked"));
                }
            }
            i = j;
        }
    }

    /// Vertices whose lists change.
    pub fn changed(&self) -> impl Iterator<Item = u64> + '_ {
        self.added.keys().chain(self.removed.keys()).copied()
    }

    /// Deletes a batch of (source, neighbor) edges: per source, one pass
    /// over its added list and one sorted merge into its removed list.
    fn delete_batch(&mut self, mut edges: Vec<(u64, u64)>) {
        edges.sort_unstable();
        edges.dedup();
        for group in edges.chunk_by(|a, b| a.0 == b.0) {
            let s = group[0].0;
            let gone = |d: &u64| group.binary_search_by_key(d, |e| e.1).is_ok();
            if let Some(a) = self.added.get_mut(&s) {
                a.retain(|e| !gone(&e.0));
            }
            let r = self.removed.entry(s).or_default();
            let old = std::mem::take(r);
            let (mut a, mut b) = (old.into_iter().peekable(), group.iter().map(|e| e.1).peekable());
            loop {
                let next = match (a.peek(), b.peek()) {
                    (None, None) => break,
                    (Some(_), None) => a.next(),
                    (None, Some(_)) => b.next(),
                    (Some(&x), Some(&y)) => {
                        if x == y {
                            a.next();
                            b.next()
                        } else if x < y {
                            a.next()
                        } else {
                            b.next()
                        }
                    }
                };
                r.push(next.expect("peeked"));
            }
        }
    }
}

/// Pending updates. Cloning one (a snapshot beside a writer, see
/// `Store::snapshot`) is cheap: lists and rows live in persistent maps, the
/// deleted set behind an `Arc` (vertex deletions are rare; a deletion while
/// a snapshot holds the set copies it).
#[derive(Debug, Clone, Default)]
pub struct Delta {
    /// Epoch of the base these updates apply to (a read that sees another
    /// epoch raced a merge and reads again).
    pub epoch: u64,
    /// Vertices and edges in the base.
    pub base_nodes: u64,
    pub base_edges: u64,
    pub added_nodes: u64,
    /// Every deleted vertex, merged or not (ids are never reused).
    pub deleted: Arc<FxHashSet<u64>>,
    /// Whether reads must drop edges to deleted vertices: after deletions
    /// not merged yet, and for good in a directed store without in-edges,
    /// where a merge cannot find the lists that point at a deleted vertex.
    pub filter_deleted: bool,
    /// Deleted vertices are only ever filtered (see `filter_deleted`).
    pub keep_filter: bool,
    pub out: DirDelta,
    pub inn: DirDelta,
    /// Rows written since the last merge, per tensor.
    pub rows: HashMap<String, PMap<u64, Arc<[u8]>>>,
    /// Records applied (for stats and merge decisions).
    pub ops: u64,
    /// Change in stored edge entries (see `Store::num_edges`).
    pub edges_added: i64,
    /// Rough memory held, for the budget.
    pub bytes: usize,
}

/// How the store keeps edges, which decides where an edge update goes.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub undirected: bool,
    pub has_in: bool,
}

impl Shape {
    /// The shape of the store `sb` describes.
    pub fn of(sb: &Superblock) -> Shape {
        Shape { undirected: !sb.directed, has_in: sb.directed && sb.inn.is_some() }
    }
}

impl Delta {
    /// No pending updates over `base`.
    pub(crate) fn new(base: &Base, keep_filter: bool) -> Delta {
        let deleted: FxHashSet<u64> = base.tombstones.iter().copied().collect();
        Delta {
            epoch: base.sb.epoch,
            base_nodes: base.sb.num_nodes,
            base_edges: base.sb.num_edges,
            filter_deleted: keep_filter && !deleted.is_empty(),
            keep_filter,
            deleted: Arc::new(deleted),
            ..Default::default()
        }
    }

    /// Nothing for a read to patch.
    pub fn is_empty(&self) -> bool {
        self.ops == 0 && !self.filter_deleted
    }

    /// Applies a validated (or replayed) operation.
    pub fn apply(&mut self, op: &Op, shape: Shape) {
        self.ops += 1;
        match op {
            Op::AddVertices { count, tensors } => {
                let first = self.base_nodes + self.added_nodes;
                self.added_nodes += count;
                for (name, bytes) in tensors {
                    let row = bytes.len() / (*count).max(1) as usize;
                    let m = self.rows.entry(name.clone()).or_default();
                    for (k, chunk) in bytes.chunks(row.max(1)).enumerate() {
                        m.insert(first + k as u64, chunk.into());
                    }
                    self.bytes += bytes.len();
                }
            }
            Op::DeleteVertices { ids } => {
                self.filter_deleted = true;
                let deleted = Arc::make_mut(&mut self.deleted);
                for &v in ids {
                    deleted.insert(v);
                    self.out.added.remove(&v);
                    self.inn.added.remove(&v);
                }
                self.bytes += 16 * ids.len();
            }
            Op::AddEdges { src, dst, weights, labels } => {
                let (mut out, mut inn) = (Vec::with_capacity(src.len() * (1 + shape.undirected as usize)), Vec::new());
                for i in 0..src.len() {
                    let (s, d) = (src[i], dst[i]);
                    let w = weights.as_ref().map_or(1.0, |w| w[i]);
                    let l = labels.as_ref().map_or(0, |l| l[i]);
                    out.push((s, (d, w, l)));
                    if shape.undirected && s != d {
                        out.push((d, (s, w, l)));
                    }
                    if shape.has_in {
                        inn.push((d, (s, w, l)));
                    }
                }
                if inn.len() >= PARALLEL_EDGES {
                    // Two tables, two cores: the work is cache misses.
                    let (o, i) = (&mut self.out, &mut self.inn);
                    std::thread::scope(|sc| {
                        sc.spawn(|| i.add_batch(inn));
                        o.add_batch(out);
                    });
                } else {
                    self.out.add_batch(out);
                    self.inn.add_batch(inn);
                }
                self.bytes += 48 * src.len();
            }
            Op::DeleteEdges { src, dst } => {
                let (mut out, mut inn) = (Vec::with_capacity(src.len() * (1 + shape.undirected as usize)), Vec::new());
                for (&s, &d) in src.iter().zip(dst) {
                    out.push((s, d));
                    if shape.undirected {
                        out.push((d, s));
                    }
                    if shape.has_in {
                        inn.push((d, s));
                    }
                }
                self.out.delete_batch(out);
                self.inn.delete_batch(inn);
                self.bytes += 32 * src.len();
            }
            Op::UpdateTensor { name, ids, rows } => {
                let row = rows.len() / ids.len().max(1);
                let m = self.rows.entry(name.clone()).or_default();
                for (&v, chunk) in ids.iter().zip(rows.chunks(row.max(1))) {
                    m.insert(v, chunk.into());
                }
                self.bytes += rows.len() + 8 * ids.len();
            }
        }
    }

    /// What the delta says of out-edge s -> d: Some(Some(label)) added,
    /// Some(None) gone, None: as in the pages.
    pub fn edge(&self, s: u64, d: u64) -> Option<Option<u32>> {
        if self.filter_deleted && (self.deleted.contains(&s) || self.deleted.contains(&d)) {
            return Some(None);
        }
        if let Some(l) = self.out.added.get(&s).and_then(|a| a.binary_search_by_key(&d, |e| e.0).ok().map(|k| a[k].2)) {
            return Some(Some(l));
        }
        if !self.out.removed.is_empty() && self.out.removed.get(&s).is_some_and(|r| r.binary_search(&d).is_ok()) {
            return Some(None);
        }
        None
    }

    /// The row written for vertex `v` of tensor `name` since the last merge.
    pub fn row(&self, name: &str, v: u64) -> Option<&[u8]> {
        self.rows.get(name)?.get(&v).map(|r| &r[..])
    }

    /// Rewrites base lists of `ids` with the delta. `out_dir` picks the out
    /// (or undirected) changes, else the in changes.
    pub fn patch(&self, ids: &[u64], csr: Csr, out_dir: bool) -> Csr {
        if self.is_empty() {
            return csr;
        }
        let dd = if out_dir { &self.out } else { &self.inn };
        // Hashing every neighbor against an empty set is most of a patch.
        let any_deleted = self.filter_deleted;
        let mut o = Csr {
            indptr: Vec::with_capacity(ids.len() + 1),
            indices: Vec::with_capacity(csr.indices.len()),
            first_edge: Vec::with_capacity(ids.len()),
            weights: csr.weights.as_ref().map(|w| Vec::with_capacity(w.len())),
            labels: csr.labels.as_ref().map(|l| Vec::with_capacity(l.len())),
        };
        o.indptr.push(0);
        for (i, &v) in ids.iter().enumerate() {
            let (a, b) = (csr.indptr[i] as usize, csr.indptr[i + 1] as usize);
            // Edge ids stay base positions: a list changed since the last
            // merge numbers its edges from its base list's first id, and
            // ids are CSR positions again after the next merge.
            o.first_edge.push(csr.first_edge[i]);
            if any_deleted && self.deleted.contains(&v) {
                o.indptr.push(o.indices.len() as u64);
                continue;
            }
            // Most deltas only add: skip a trie walk per list.
            let removed = if dd.removed.is_empty() { None } else { dd.removed.get(&v) };
            let added = dd.added.get(&v);
            if removed.is_none() && added.is_none() && !any_deleted {
                // Untouched list: copy it as it is.
                o.indices.extend_from_slice(&csr.indices[a..b]);
                if let (Some(ow), Some(iw)) = (o.weights.as_mut(), csr.weights.as_ref()) {
                    ow.extend_from_slice(&iw[a..b]);
                }
                if let (Some(ol), Some(il)) = (o.labels.as_mut(), csr.labels.as_ref()) {
                    ol.extend_from_slice(&il[a..b]);
                }
                o.indptr.push(o.indices.len() as u64);
                continue;
            }
            let mut adds = added.into_iter().flatten().peekable();
            for k in a..b {
                let d = csr.indices[k];
                while let Some(&(ad, w, l)) = adds.peek().copied() {
                    if ad >= d {
                        break;
                    }
                    self.push(&mut o, ad, w, l);
                    adds.next();
                }
                let gone =
                    removed.is_some_and(|r| r.binary_search(&d).is_ok()) || (any_deleted && self.deleted.contains(&d)) || adds.peek().is_some_and(|e| e.0 == d);
                if !gone {
                    o.indices.push(d);
                    if let (Some(ow), Some(iw)) = (o.weights.as_mut(), csr.weights.as_ref()) {
                        ow.push(iw[k]);
                    }
                    if let (Some(ol), Some(il)) = (o.labels.as_mut(), csr.labels.as_ref()) {
                        ol.push(il[k]);
                    }
                }
            }
            for &(ad, w, l) in adds {
                self.push(&mut o, ad, w, l);
            }
            o.indptr.push(o.indices.len() as u64);
        }
        o
    }

    fn push(&self, o: &mut Csr, d: u64, w: f32, l: u32) {
        if self.filter_deleted && self.deleted.contains(&d) {
            return;
        }
        o.indices.push(d);
        if let Some(ow) = o.weights.as_mut() {
            ow.push(w);
        }
        if let Some(ol) = o.labels.as_mut() {
            ol.push(l);
        }
    }
}

// WAL payload encoding: a tag byte, then little-endian fields; arrays are a
// u64 length followed by the elements.

struct Enc(Vec<u8>);

impl Enc {
    fn u8(&mut self, x: u8) {
        self.0.push(x);
    }
    fn u64(&mut self, x: u64) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    fn ids(&mut self, v: &[u64]) {
        self.u64(v.len() as u64);
        v.iter().for_each(|&x| self.u64(x));
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn f32s(&mut self, v: &[f32]) {
        self.u64(v.len() as u64);
        v.iter().for_each(|x| self.0.extend_from_slice(&x.to_le_bytes()));
    }
    fn u32s(&mut self, v: &[u32]) {
        self.u64(v.len() as u64);
        v.iter().for_each(|x| self.0.extend_from_slice(&x.to_le_bytes()));
    }
}

struct Dec<'a> {
    b: &'a [u8],
    at: usize,
}

impl Dec<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        if self.at + n > self.b.len() {
            return Err(StoreError::Invalid("WAL record ends early".into()));
        }
        self.at += n;
        Ok(&self.b[self.at - n..self.at])
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn len(&mut self, elem: usize) -> Result<usize> {
        let n = self.u64()? as usize;
        if n.saturating_mul(elem) > self.b.len() - self.at {
            return Err(StoreError::Invalid("WAL record array runs past its end".into()));
        }
        Ok(n)
    }
    fn ids(&mut self) -> Result<Vec<u64>> {
        let n = self.len(8)?;
        (0..n).map(|_| self.u64()).collect()
    }
    fn bytes(&mut self) -> Result<Vec<u8>> {
        let n = self.len(1)?;
        Ok(self.take(n)?.to_vec())
    }
    fn f32s(&mut self) -> Result<Vec<f32>> {
        let n = self.len(4)?;
        Ok(self.take(4 * n)?.chunks(4).map(|c| f32::from_le_bytes(c.try_into().expect("4"))).collect())
    }
    fn u32s(&mut self) -> Result<Vec<u32>> {
        let n = self.len(4)?;
        Ok(self.take(4 * n)?.chunks(4).map(|c| u32::from_le_bytes(c.try_into().expect("4"))).collect())
    }
    fn string(&mut self) -> Result<String> {
        String::from_utf8(self.bytes()?).map_err(|_| StoreError::Invalid("WAL record holds a name that is not UTF-8".into()))
    }
}

impl Op {
    /// Items in the batch (edges, vertices or rows).
    pub fn items(&self) -> usize {
        match self {
            Op::AddVertices { count, .. } => *count as usize,
            Op::DeleteVertices { ids } => ids.len(),
            Op::AddEdges { src, .. } | Op::DeleteEdges { src, .. } => src.len(),
            Op::UpdateTensor { ids, .. } => ids.len(),
        }
    }

    /// Every column of an edge batch has one entry per edge: `apply`
    /// indexes them by edge. Writers build ops so; a decoded record that
    /// breaks it is damage.
    fn check_columns(&self) -> Result<()> {
        let (n, cols): (usize, [(&str, Option<usize>); 3]) = match self {
            Op::AddEdges { src, dst, weights, labels } => {
                (src.len(), [("destinations", Some(dst.len())), ("weights", weights.as_ref().map(|w| w.len())), ("labels", labels.as_ref().map(|l| l.len()))])
            }
            Op::DeleteEdges { src, dst } => (src.len(), [("destinations", Some(dst.len())), ("", None), ("", None)]),
            _ => return Ok(()),
        };
        match cols.iter().find(|(_, len)| len.is_some_and(|l| l != n)) {
            Some((what, len)) => Err(StoreError::Invalid(format!("WAL record: {n} edges but {} {what}", len.unwrap_or(0)))),
            None => Ok(()),
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc(Vec::new());
        match self {
            Op::AddVertices { count, tensors } => {
                e.u8(1);
                e.u64(*count);
                e.u64(tensors.len() as u64);
                for (n, b) in tensors {
                    e.bytes(n.as_bytes());
                    e.bytes(b);
                }
            }
            Op::DeleteVertices { ids } => {
                e.u8(2);
                e.ids(ids);
            }
            Op::AddEdges { src, dst, weights, labels } => {
                e.u8(3);
                e.ids(src);
                e.ids(dst);
                e.f32s(weights.as_deref().unwrap_or(&[]));
                e.u32s(labels.as_deref().unwrap_or(&[]));
                e.u8(weights.is_some() as u8 | (labels.is_some() as u8) << 1);
            }
            Op::DeleteEdges { src, dst } => {
                e.u8(4);
                e.ids(src);
                e.ids(dst);
            }
            Op::UpdateTensor { name, ids, rows } => {
                e.u8(6);
                e.bytes(name.as_bytes());
                e.ids(ids);
                e.bytes(rows);
            }
        }
        e.0
    }

    pub fn decode(b: &[u8]) -> Result<Op> {
        let mut d = Dec { b, at: 0 };
        let op = match d.u8()? {
            1 => {
                let count = d.u64()?;
                let n = d.len(16)?;
                let tensors = (0..n).map(|_| Ok((d.string()?, d.bytes()?))).collect::<Result<_>>()?;
                Op::AddVertices { count, tensors }
            }
            2 => Op::DeleteVertices { ids: d.ids()? },
            3 => {
                let (src, dst, w, l) = (d.ids()?, d.ids()?, d.f32s()?, d.u32s()?);
                let flags = d.u8()?;
                Op::AddEdges { src, dst, weights: (flags & 1 != 0).then_some(w), labels: (flags & 2 != 0).then_some(l) }
            }
            4 => Op::DeleteEdges { src: d.ids()?, dst: d.ids()? },
            6 => Op::UpdateTensor { name: d.string()?, ids: d.ids()?, rows: d.bytes()? },
            t => return Err(StoreError::Invalid(format!("unknown WAL operation {t}"))),
        };
        if d.at != b.len() {
            return Err(StoreError::Invalid("WAL record has trailing bytes".into()));
        }
        op.check_columns()?;
        Ok(op)
    }
}
