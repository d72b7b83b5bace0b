//! Partitioning a store into K shard stores for scale-out serving.
//!
//! Every vertex goes to one shard (hash, a one-pass streaming LDG, or an
//! assignment given by the caller, e.g. METIS). Shard k is a directory:
//!
//! - `adj-out` (and `adj-in` for a directed source with in-edges): a store
//!   in the *global* id space whose lists are the source's lists of the
//!   shard's vertices (neighbor ids stay global, same order, same weights
//!   and labels); other vertices' lists are empty. The price of the global
//!   space is a presence bitmap of n bits and a hot table of up to n/4
//!   entries per shard; the gain is that ids need no translation, so a
//!   shard draws exactly what the source store draws.
//! - `rows`: a store in the shard's *local* id space (local id = rank of
//!   the vertex among the shard's vertices in global id order) with one
//!   placeholder edge (a store holds at least one), holding the source's tensors' rows for the shard's vertices and
//!   `_sg_vertex` (int64 rows: the global id, then the first edge id in the
//!   source per stored direction), so a shard checks that it owns the ids
//!   it is asked for and gives samples the source's edge ids.
//! - `shard.meta`: the book id, shard index and directions, checksummed,
//!   so a server serving a shard of another book is detected.
//!
//! `book.sgb` beside the shards maps vertex -> shard (`Book`).

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError, file_err};
use crate::import::npy::write_header;
use crate::import::source::EdgeInput;
use crate::import::{ImportOptions, TensorData, TensorInput, import};
use crate::{Direction, Store};

/// Most shards a book may name.
pub const MAX_PARTS: u32 = 4096;
/// Vertices read per batch while partitioning.
const CHUNK: usize = 4096;
const BOOK_MAGIC: &[u8; 8] = b"SGBOOK\0\0";
const BOOK_VERSION: u32 = 1;
const BOOK_HEADER: usize = 64;
const META_MAGIC: &str = "solidgraph-shard 1";
/// The rows store's tensor of global ids and first edge ids.
pub const VERTEX_TENSOR: &str = "_sg_vertex";
/// LDG's capacity slack over a perfectly even split.
const LDG_SLACK: f64 = 1.05;

#[derive(Debug, Clone)]
pub enum Method {
    Hash,
    /// Linear deterministic greedy (Stanton and Kliot, KDD 2012), one pass
    /// in vertex order over out- and in-lists: memory O(vertices + K).
    Stream,
    /// One shard per vertex, given (METIS through pymetis, or any tool).
    Given(Vec<u32>),
}

#[derive(Debug, Clone)]
pub struct PartitionOptions {
    pub parts: u32,
    pub method: Method,
    pub memory_budget: u64,
}

#[derive(Debug, Clone)]
pub struct PartitionReport {
    pub parts: u32,
    pub num_nodes: u64,
    pub num_edges: u64,
    /// Stored out-edges whose ends lie on different shards.
    pub cut_edges: u64,
    pub shard_nodes: Vec<u64>,
    pub shard_edges: Vec<u64>,
    pub book_id: u64,
    pub seconds: f64,
}

impl PartitionReport {
    /// Largest shard over an even share of the vertices.
    pub fn balance(&self) -> f64 {
        let max = self.shard_nodes.iter().copied().max().unwrap_or(0) as f64;
        max * self.parts as f64 / self.num_nodes.max(1) as f64
    }
}

/// Vertex -> shard, with the identity of the source it was made from.
/// File: a 64-byte header (magic, version, parts, vertices, source edges,
/// source id, book id, CRC-32 of the rest of the file), then one u32 shard
/// per vertex, little-endian. CRC-32 (zlib's), so Python checks it with
/// `zlib.crc32`. Local ids are not stored: a vertex's local id is its rank
/// among its shard's vertices in global id order.
#[derive(Debug, Clone, PartialEq)]
pub struct Book {
    pub parts: u32,
    pub source_edges: u64,
    /// Identifies the source store's contents: counts, flags and epoch.
    pub source_id: u64,
    pub shard: Vec<u32>,
}

impl Book {
    pub fn num_nodes(&self) -> u64 {
        self.shard.len() as u64
    }

    /// Names the book: its source and its assignment.
    pub fn id(&self) -> u64 {
        let mut h = crc32fast::Hasher::new();
        h.update(&self.parts.to_le_bytes());
        h.update(&self.source_id.to_le_bytes());
        for c in self.shard.chunks(1 << 16) {
            h.update(&words(c));
        }
        (h.finalize() as u64) << 32 | (self.source_id & 0xffff_ffff) ^ (self.source_edges & 0xffff_ffff)
    }

    /// Local ids: each vertex's rank within its shard.
    pub fn local_ids(&self) -> Vec<u64> {
        let mut next = vec![0u64; self.parts as usize];
        self.shard
            .iter()
            .map(|&s| {
                let l = next[s as usize];
                next[s as usize] += 1;
                l
            })
            .collect()
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        let body = words(&self.shard);
        let mut head = vec![0u8; BOOK_HEADER];
        head[..8].copy_from_slice(BOOK_MAGIC);
        head[8..12].copy_from_slice(&BOOK_VERSION.to_le_bytes());
        head[12..16].copy_from_slice(&self.parts.to_le_bytes());
        head[16..24].copy_from_slice(&self.num_nodes().to_le_bytes());
        head[24..32].copy_from_slice(&self.source_edges.to_le_bytes());
        head[32..40].copy_from_slice(&self.source_id.to_le_bytes());
        head[40..48].copy_from_slice(&self.id().to_le_bytes());
        let crc = book_crc(&head, &body);
        head[48..52].copy_from_slice(&crc.to_le_bytes());
        let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(file_err(path))?);
        f.write_all(&head).and_then(|_| f.write_all(&body)).and_then(|_| f.flush()).map_err(file_err(path))?;
        f.get_ref().sync_all().map_err(file_err(path))
    }

    pub fn read(path: &Path) -> Result<Book> {
        let bytes = std::fs::read(path).map_err(file_err(path))?;
        let bad = |reason: String| StoreError::BadInput { path: path.to_path_buf(), reason };
        if bytes.len() < BOOK_HEADER || &bytes[..8] != BOOK_MAGIC {
            return Err(bad("not a partition book (bad magic)".into()));
        }
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
        if u32_at(8) != BOOK_VERSION {
            return Err(bad(format!("partition book version {} (this build reads {BOOK_VERSION})", u32_at(8))));
        }
        let (head, body) = bytes.split_at(BOOK_HEADER);
        let mut zeroed = head.to_vec();
        zeroed[48..52].fill(0);
        if book_crc(&zeroed, body) != u32_at(48) {
            return Err(bad("checksum mismatch: the partition book is damaged".into()));
        }
        let (parts, n) = (u32_at(12), u64_at(16));
        if body.len() as u64 != n * 4 || parts == 0 || parts > MAX_PARTS {
            return Err(bad(format!("{} bytes of assignment for {n} vertices in {parts} parts", body.len())));
        }
        let shard: Vec<u32> = body.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes"))).collect();
        if let Some(v) = shard.iter().position(|&s| s >= parts) {
            return Err(bad(format!("vertex {v} is assigned to shard {} of {parts}", shard[v])));
        }
        let book = Book { parts, source_edges: u64_at(24), source_id: u64_at(32), shard };
        if book.id() != u64_at(40) {
            return Err(bad("the book id does not match its contents".into()));
        }
        Ok(book)
    }
}

fn words(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn book_crc(head_with_zero_crc: &[u8], body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(head_with_zero_crc);
    h.update(body);
    h.finalize()
}

/// What `shard.meta` says about one shard.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardMeta {
    pub book_id: u64,
    pub shard: u32,
    pub parts: u32,
    /// The source's stored directions: "out", or "out,in".
    pub directions: Vec<String>,
    pub undirected: bool,
}

impl ShardMeta {
    fn text(&self) -> String {
        format!(
            "{META_MAGIC}\nbook {:016x}\nshard {}\nparts {}\ndirections {}\nundirected {}\n",
            self.book_id,
            self.shard,
            self.parts,
            self.directions.join(","),
            self.undirected
        )
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        let t = self.text();
        let s = format!("{t}crc {:08x}\n", crc32fast::hash(t.as_bytes()));
        std::fs::write(path, s).map_err(file_err(path))
    }

    pub fn read(path: &Path) -> Result<ShardMeta> {
        let s = std::fs::read_to_string(path).map_err(file_err(path))?;
        let bad = |reason: &str| StoreError::BadInput { path: path.to_path_buf(), reason: reason.into() };
        let (body, crc) = s.trim_end().rsplit_once('\n').ok_or_else(|| bad("truncated shard meta"))?;
        let body = format!("{body}\n");
        if crc != format!("crc {:08x}", crc32fast::hash(body.as_bytes())) {
            return Err(bad("checksum mismatch: shard.meta is damaged"));
        }
        let mut lines = body.lines();
        if lines.next() != Some(META_MAGIC) {
            return Err(bad("not a shard meta file"));
        }
        let mut field = |key: &str| -> Result<String> {
            let l = lines.next().and_then(|l| l.strip_prefix(key)).and_then(|l| l.strip_prefix(' '));
            l.map(str::to_owned).ok_or_else(|| bad(&format!("missing {key}")))
        };
        let num = |s: String| s.parse::<u32>().map_err(|_| bad("bad number"));
        let book_id = u64::from_str_radix(&field("book")?, 16).map_err(|_| bad("bad book id"))?;
        let shard = num(field("shard")?)?;
        let parts = num(field("parts")?)?;
        let directions = field("directions")?.split(',').map(str::to_owned).collect();
        let undirected = field("undirected")? == "true";
        Ok(ShardMeta { book_id, shard, parts, directions, undirected })
    }
}

/// The directions a source stores lists for (undirected: out serves both).
fn stored_directions(src: &Store) -> Vec<Direction> {
    if src.directed() && src.gtt(Direction::In).is_ok() { vec![Direction::Out, Direction::In] } else { vec![Direction::Out] }
}

fn dir_name(d: Direction) -> &'static str {
    if d == Direction::In { "in" } else { "out" }
}

fn source_id(src: &Store) -> u64 {
    let sb = src.superblock();
    let mut h = crc32fast::Hasher::new();
    for x in [sb.epoch, src.num_nodes(), src.num_edges(), src.directed() as u64, src.has_weights() as u64, src.pending_updates()] {
        h.update(&x.to_le_bytes());
    }
    (h.finalize() as u64) << 32 | (src.num_nodes() ^ src.num_edges().rotate_left(17)) & 0xffff_ffff
}

/// A vertex's shard under hash partitioning (a SplitMix64 finalizer, so
/// consecutive ids spread).
fn hash_shard(v: u64, parts: u32) -> u32 {
    let mut z = v.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((z ^ (z >> 31)) % parts as u64) as u32
}

/// LDG: each vertex, in id order, joins the shard holding most of its
/// already placed neighbors, weighted by that shard's remaining room.
fn ldg(src: &Store, parts: u32) -> Result<Vec<u32>> {
    const NONE: u32 = u32::MAX;
    let n = src.num_nodes();
    let cap = ((n as f64 / parts as f64) * LDG_SLACK).ceil().max(1.0);
    let dirs = stored_directions(src);
    let mut shard = vec![NONE; n as usize];
    let mut size = vec![0u64; parts as usize];
    let mut count = vec![0u64; parts as usize];
    for lo in (0..n).step_by(CHUNK) {
        let ids: Vec<u64> = (lo..(lo + CHUNK as u64).min(n)).collect();
        let lists = dirs.iter().map(|&d| src.neighbors(&ids, d, false, false)).collect::<Result<Vec<_>>>()?;
        for (i, &v) in ids.iter().enumerate() {
            count.fill(0);
            for c in &lists {
                for &u in &c.indices[c.indptr[i] as usize..c.indptr[i + 1] as usize] {
                    if let Some(&s) = shard.get(u as usize).filter(|&&s| s != NONE) {
                        count[s as usize] += 1;
                    }
                }
            }
            let score = |k: usize| count[k] as f64 * (1.0 - size[k] as f64 / cap);
            let best = (0..parts as usize)
                .filter(|&k| (size[k] as f64) < cap)
                .max_by(|&a, &b| score(a).total_cmp(&score(b)).then(size[b].cmp(&size[a])).then(b.cmp(&a)))
                .expect("capacity exceeds n in all");
            shard[v as usize] = best as u32;
            size[best] += 1;
        }
    }
    Ok(shard)
}

/// Removes the partial output unless disarmed.
struct Cleanup(Option<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

fn check(src: &Store, out: &Path, o: &PartitionOptions) -> Result<()> {
    let n = src.num_nodes();
    if o.parts < 1 || o.parts > MAX_PARTS || o.parts as u64 > n {
        return Err(StoreError::Invalid(format!(
            "--parts {} must be in 1..={} (and at most the {n} vertices)",
            o.parts,
            MAX_PARTS.min(n.min(u32::MAX as u64) as u32)
        )));
    }
    if src.reordered() {
        return Err(StoreError::Invalid("the store was imported with --order degree; partition a store that keeps its input ids".into()));
    }
    if let Some(t) = src.tensors().iter().find(|t| t.name.starts_with("_sg_")) {
        return Err(StoreError::Invalid(format!("tensor {:?}: names starting with _sg_ are the partitioner's", t.name)));
    }
    if let Method::Given(a) = &o.method {
        if a.len() as u64 != n {
            return Err(StoreError::Invalid(format!("the assignment has {} entries for {n} vertices", a.len())));
        }
        if let Some(v) = a.iter().position(|&s| s >= o.parts) {
            return Err(StoreError::Invalid(format!("the assignment puts vertex {v} in shard {}, not below --parts {}", a[v], o.parts)));
        }
    }
    match std::fs::read_dir(out) {
        Ok(mut d) => match d.next() {
            Some(_) => Err(StoreError::Invalid(format!("{} exists and is not empty", out.display()))),
            None => Ok(()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::File { path: out.to_path_buf(), source: e }),
    }
}

/// Splits `src` into `o.parts` shards under `out` (which must not exist or
/// be empty); all of it is built in `<out>.partial-<pid>` and renamed into
/// place, so a failure leaves nothing.
pub fn partition(src: &Store, out: &Path, o: &PartitionOptions, progress: &(dyn Fn(&str, u64, u64) + Sync)) -> Result<PartitionReport> {
    let t0 = std::time::Instant::now();
    check(src, out, o)?;
    let n = src.num_nodes();
    let shard = match &o.method {
        Method::Hash => (0..n).map(|v| hash_shard(v, o.parts)).collect(),
        Method::Stream => ldg(src, o.parts)?,
        Method::Given(a) => a.clone(),
    };
    let book = Book { parts: o.parts, source_edges: src.num_edges(), source_id: source_id(src), shard };
    let tmp = out.with_file_name(format!("{}.partial-{}", out.file_name().map_or("shards".into(), |n| n.to_string_lossy()), std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(file_err(&tmp))?;
    let mut cleanup = Cleanup(Some(tmp.clone()));
    let mut report = PartitionReport {
        parts: o.parts,
        num_nodes: n,
        num_edges: src.num_edges(),
        cut_edges: 0,
        shard_nodes: vec![0; o.parts as usize],
        shard_edges: vec![0; o.parts as usize],
        book_id: book.id(),
        seconds: 0.0,
    };
    for k in 0..o.parts {
        progress("shards", k as u64, o.parts as u64);
        let owned: Vec<u64> = (0..n).filter(|&v| book.shard[v as usize] == k).collect();
        report.shard_nodes[k as usize] = owned.len() as u64;
        let (cut, edges) = write_shard(src, &book, k, &owned, &tmp.join(format!("shard-{k}")), o)?;
        report.cut_edges += cut;
        report.shard_edges[k as usize] = edges;
    }
    book.write(&tmp.join("book.sgb"))?;
    // The book's and the shards' entries are durable before the rename.
    sync_dir(&tmp)?;
    if out.exists() {
        std::fs::remove_dir(out).map_err(file_err(out))?;
    }
    std::fs::rename(&tmp, out).map_err(file_err(out))?;
    cleanup.0 = None;
    // The shards are in place only once the rename is durable: if the
    // parent directory's sync fails, the partition fails and takes its
    // output away again (nothing acknowledged, nothing left behind).
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if let Err(e) = sync_dir(parent) {
        let _ = std::fs::remove_dir_all(out);
        return Err(e);
    }
    report.seconds = t0.elapsed().as_secs_f64();
    Ok(report)
}

/// Syncs directory `dir`, making the entries made in it durable. A file
/// system that cannot sync directories (EINVAL) has nothing to make
/// durable this way.
fn sync_dir(dir: &Path) -> Result<()> {
    let d = std::fs::File::open(dir).map_err(file_err(dir))?;
    match d.sync_all() {
        Err(e) if e.raw_os_error() != Some(libc::EINVAL) => Err(file_err(dir)(e)),
        _ => Ok(()),
    }
}

/// Writes shard `k` (its `owned` vertices, ascending) into `dir`; returns
/// its cut out-edges and its stored out-edges.
fn write_shard(src: &Store, book: &Book, k: u32, owned: &[u64], dir: &Path, o: &PartitionOptions) -> Result<(u64, u64)> {
    std::fs::create_dir_all(dir).map_err(file_err(dir))?;
    let n = src.num_nodes();
    let dirs = stored_directions(src);
    let cols = 1 + dirs.len();
    let mut vertex = vec![0u64; owned.len() * cols];
    for (i, &v) in owned.iter().enumerate() {
        vertex[i * cols] = v;
    }
    let (mut cut, mut out_edges) = (0, 0);
    for (col, &d) in dirs.iter().enumerate() {
        let (mut s, mut t, mut first) = (Vec::new(), Vec::new(), Vec::with_capacity(owned.len()));
        let mut w = src.has_weights().then(Vec::new);
        let mut l = src.has_labels().then(Vec::new);
        for ids in owned.chunks(CHUNK) {
            let c = src.neighbors(ids, d, src.has_weights(), src.has_labels())?;
            for (i, &v) in ids.iter().enumerate() {
                let (a, b) = (c.indptr[i] as usize, c.indptr[i + 1] as usize);
                s.extend(std::iter::repeat_n(v, b - a));
                if d == Direction::Out {
                    cut += c.indices[a..b].iter().filter(|&&u| book.shard[u as usize] != k).count() as u64;
                }
            }
            first.extend_from_slice(&c.first_edge);
            t.extend_from_slice(&c.indices);
            if let (Some(w), Some(cw)) = (w.as_mut(), &c.weights) {
                w.extend_from_slice(cw);
            }
            if let (Some(l), Some(cl)) = (l.as_mut(), &c.labels) {
                l.extend_from_slice(cl);
            }
        }
        if d == Direction::Out {
            out_edges = s.len() as u64;
        }
        if s.is_empty() {
            // A store holds at least one edge: a loop on a vertex this shard
            // does not own, whose list no request reads (the shard checks
            // ownership against `_sg_vertex`).
            let u = (0..n).find(|&u| book.shard[u as usize] != k).ok_or_else(|| StoreError::Invalid("the store has no edges".into()))?;
            (s, t) = (vec![u], vec![u]);
            w = w.map(|_| vec![1.0]);
            l = l.map(|_| vec![0]);
        }
        let io = ImportOptions {
            weights: w.is_some(),
            labels: l.is_some(),
            num_nodes: Some(n),
            page_size: src.page_size(),
            memory_budget: o.memory_budget,
            ..Default::default()
        };
        let input = EdgeInput::Memory { src: s, dst: t, weights: w, labels: l };
        import(&dir.join(format!("adj-{}", dir_name(d))), &[input], &[], &io, &|_, _, _| {})?;
        for (i, f) in first.into_iter().enumerate() {
            vertex[i * cols + 1 + col] = f;
        }
    }
    let mut tensors = Vec::new();
    for t in src.tensors() {
        let path = dir.join(format!("{}.npy.tmp", tensors.len()));
        write_rows(src, &t.name, owned, &path)?;
        tensors.push(TensorInput { name: t.name.clone(), data: TensorData::Npy(path) });
    }
    let bytes = vertex.iter().flat_map(|x| x.to_le_bytes()).collect();
    let data = TensorData::Memory { dtype: crate::DType::I64, rows: owned.len() as u64, dim: cols as u64, bytes };
    tensors.push(TensorInput { name: VERTEX_TENSOR.into(), data });
    let io = ImportOptions { num_nodes: Some(owned.len() as u64), page_size: src.page_size(), memory_budget: o.memory_budget, ..Default::default() };
    // The rows store's adjacency is never read; a store holds at least one edge.
    let placeholder = EdgeInput::Memory { src: vec![0], dst: vec![0], weights: None, labels: None };
    import(&dir.join("rows"), &[placeholder], &tensors, &io, &|_, _, _| {})?;
    for t in &tensors {
        if let TensorData::Npy(p) = &t.data {
            std::fs::remove_file(p).map_err(file_err(p))?;
        }
    }
    let meta = ShardMeta {
        book_id: book.id(),
        shard: k,
        parts: book.parts,
        directions: dirs.iter().map(|&d| dir_name(d).to_owned()).collect(),
        undirected: !src.directed(),
    };
    meta.write(&dir.join("shard.meta"))?;
    Ok((cut, out_edges))
}

/// Streams tensor `name`'s rows of `owned` into a .npy file.
fn write_rows(src: &Store, name: &str, owned: &[u64], path: &Path) -> Result<()> {
    let m = src.tensor_meta(name)?;
    let descr = match m.dtype {
        crate::DType::F32 => "<f4",
        crate::DType::F16 => "<f2",
        crate::DType::I64 => "<i8",
        crate::DType::I32 => "<i4",
        crate::DType::U8 => "|u1",
        crate::DType::Bool => "|b1",
    };
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(file_err(path))?);
    let shape = if m.dim == 1 { vec![owned.len() as u64] } else { vec![owned.len() as u64, m.dim] };
    write_header(&mut f, descr, &shape).map_err(file_err(path))?;
    for ids in owned.chunks(CHUNK) {
        f.write_all(&src.tensor(name, ids)?.data).map_err(file_err(path))?;
    }
    f.flush().map_err(file_err(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn book_round_trips_and_refuses_damage() {
        let dir = tempfile::tempdir().expect("temp dir");
        let book = Book { parts: 3, source_edges: 99, source_id: 7, shard: vec![0, 2, 1, 1, 0, 2, 2] };
        assert_eq!(book.local_ids(), vec![0, 0, 0, 1, 1, 1, 2]);
        let path = dir.path().join("book.sgb");
        book.write(&path).expect("write");
        assert_eq!(Book::read(&path).expect("read"), book);
        let good = std::fs::read(&path).expect("bytes");
        for at in [0, 12, 40, 48, BOOK_HEADER + 5] {
            let mut bad = good.clone();
            bad[at] ^= 0x10;
            std::fs::write(&path, &bad).expect("write bad");
            assert!(Book::read(&path).is_err(), "byte {at} flipped was accepted");
        }
        std::fs::write(&path, &good[..good.len() - 4]).expect("truncate");
        assert!(Book::read(&path).is_err());
    }

    #[test]
    fn shard_meta_round_trips_and_refuses_damage() {
        let dir = tempfile::tempdir().expect("temp dir");
        let m = ShardMeta { book_id: 0xdead_beef_0123, shard: 2, parts: 4, directions: vec!["out".into(), "in".into()], undirected: false };
        let path = dir.path().join("shard.meta");
        m.write(&path).expect("write");
        assert_eq!(ShardMeta::read(&path).expect("read"), m);
        let text = std::fs::read_to_string(&path).expect("text").replace("shard 2", "shard 3");
        std::fs::write(&path, text).expect("write bad");
        assert!(ShardMeta::read(&path).is_err());
    }

    #[test]
    fn hash_spreads_consecutive_ids() {
        let mut size = [0u32; 4];
        for v in 0..4000 {
            size[hash_shard(v, 4) as usize] += 1;
        }
        assert!(size.iter().all(|&s| (900..1100).contains(&s)), "{size:?}");
    }
}
