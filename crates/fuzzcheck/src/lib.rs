//! Bodies of the fuzz targets in `fuzz/` (cargo-fuzz, libFuzzer): each
//! takes arbitrary bytes and must return without a panic, a hang or an
//! unbounded allocation, whatever the bytes. Decoders of stored pages are
//! fed bytes past the checksum: the target recomputes it, so the decoder
//! itself must hold. `tests/corpus.rs` replays the corpora on stable.
//!
//! Targets: `edges` (text, CSV and .npy edge parsers), `tensor_npy` (.npy
//! node tensors through an import), `page` (one page of a small store
//! replaced, its kind kept), `store_bytes` (a byte range of a small store
//! overwritten), `wal` (update records replayed at open), `rdf_bytes`
//! and `rdf_wal` (an RDF store's files damaged, its log replayed: `rdf`),
//! `server` (every request message of the gRPC services: `server`),
//! `model` (the runner's model files: `model`).

pub mod model;
pub mod rdf;
pub mod server;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use solidgraph_engine::bfs::bfs;
use solidgraph_engine::sampler::{SampleOptions, sample_neighbors};
use solidgraph_io::SimDisk;
use solidgraph_store::*;

pub const TARGETS: [&str; 9] = ["edges", "tensor_npy", "page", "store_bytes", "wal", "rdf_bytes", "rdf_wal", "server", "model"];

/// The state budget of whole-graph algorithms under the fuzzer: a damaged
/// store may declare billions of vertices, and an algorithm's state is
/// sized (and cleared) by that count before the pages show it false. The
/// fixture's algorithms need a few KiB; a store declaring more than some
/// ten thousand vertices takes the over-budget path, which is code the
/// fuzzer must reach too, instead of spending milliseconds per input
/// clearing state for vertices no page holds.
pub const STATE_BUDGET: u64 = 256 << 10;

/// Runs target `name` on `data`.
pub fn run(name: &str, data: &[u8]) {
    solidgraph_engine::state::set_budget(STATE_BUDGET);
    match name {
        "edges" => edges(data),
        "tensor_npy" => tensor_npy(data),
        "page" => page(data),
        "store_bytes" => store_bytes(data),
        "wal" => wal(data),
        "rdf_bytes" => rdf::rdf_bytes(data),
        "rdf_wal" => rdf::rdf_wal(data),
        "server" => server::server(data),
        "model" => model::model(data),
        _ => panic!("no fuzz target {name}"),
    }
}

/// Makes the calling thread the one thread of a rayon pool, once per
/// process (later calls, and calls from other threads, do nothing): the
/// store targets' parallel reads and algorithms then run on it, and their
/// passes read inline (`engine::frontier`), where the global pool's
/// workers and a pass's reader threads, spawned per BFS level, cost each
/// input thread starts and hand-offs for a store of a few pages.
pub fn one_thread() {
    static POOL: OnceLock<Option<rayon::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| rayon::ThreadPoolBuilder::new().num_threads(1).use_current_thread().build().ok());
}

/// Edges read from any one input at most (inputs are small; a limit keeps
/// a target from spinning on a parser that does not advance).
const MAX_EDGES: usize = 1 << 16;

/// A new directory in memory (/dev/shm, where fsync costs nothing) when
/// there is one, else in the temporary directory: the targets write and
/// sync small files per input, and a disk's syncs would bound their rate.
pub(crate) fn memory_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    let root = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
    static SWEPT: OnceLock<()> = OnceLock::new();
    SWEPT.get_or_init(|| sweep(&root));
    let prefix = format!("{DIR_PREFIX}{}-", std::process::id());
    let dir = tempfile::Builder::new().prefix(&prefix).tempdir_in(&root).or_else(|_| tempfile::Builder::new().prefix(&prefix).tempdir());
    dir.expect("scratch dir").keep()
}

/// Names of the scratch directories, followed by the owner's process id:
/// they outlive their process (libFuzzer exits without unwinding), so
/// each process removes those of processes gone.
const DIR_PREFIX: &str = "solidgraph-fuzz-";

fn sweep(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(DIR_PREFIX).and_then(|r| r.split('-').next()).and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// A scratch directory for files the parsers read (one per process:
/// libFuzzer runs one input at a time, and the lock serializes tests).
pub(crate) fn scratch() -> std::sync::MutexGuard<'static, PathBuf> {
    static DIR: OnceLock<Mutex<PathBuf>> = OnceLock::new();
    let m = DIR.get_or_init(|| Mutex::new(memory_dir()));
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// data[0] picks the format and the columns asked for; the rest is the file.
pub fn edges(data: &[u8]) {
    let Some((&sel, body)) = data.split_first() else { return };
    let dir = scratch();
    let ext = ["txt", "csv", "npy"][sel as usize % 3];
    let path = dir.join(format!("edges.{ext}"));
    std::fs::write(&path, body).expect("write scratch");
    let input = EdgeInput::File(path);
    let Ok(mut r) = import::source::open(&input, sel & 0x10 != 0, sel & 0x20 != 0) else { return };
    for _ in 0..MAX_EDGES {
        match r.next_edge() {
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
}

/// data is a .npy file: its header is read and checked as an import
/// does, and a 4-row tensor is added as node tensor "t" to a 4-vertex
/// store on the simulated disk (`Store::add_tensor`, the rows streamed
/// from the file), then the store is verified and the rows read back. One
/// input in `IMPORTED` (by its hash) goes through a whole import instead,
/// whose volume buffers and io ring, set up per import, outweigh the checks.
pub fn tensor_npy(data: &[u8]) {
    let dir = scratch();
    let npy = dir.join("t.npy");
    std::fs::write(&npy, data).expect("write scratch");
    if pick(data).is_multiple_of(IMPORTED) {
        tensor_npy_import(&dir, &npy);
        return;
    }
    let Ok(h) = import::npy::read_header(&npy) else { return };
    let Some(dtype) = DType::parse(&h.descr) else { return };
    let dim = match h.shape[..] {
        [4] => 1,
        [4, d] => d,
        _ => return,
    };
    let base = npy_base();
    std::fs::write(base.dir.join("wal.log"), b"").expect("reset the log");
    let disk = SimDisk::new(1, 1);
    disk.load(0, base.image.clone());
    let o = OpenOptions { writable: true, cache_bytes: 1 << 20, delta_budget: 0, backend: BackendChoice::Sim(disk), ..Default::default() };
    let s = Store::open(&base.dir, &o).expect("the base store opens");
    let f = std::fs::File::open(&npy).expect("open scratch");
    let rb = dim.saturating_mul(dtype.size() as u64);
    let fill = |first: u64, buf: &mut [u8]| -> Result<()> {
        use std::os::unix::fs::FileExt;
        f.read_exact_at(buf, h.data_offset + first * rb).map_err(|e| StoreError::File { path: npy.clone(), source: e })
    };
    if s.add_tensor("t", dtype, dim, fill).is_ok() {
        s.verify(&mut |_, _| {}).expect("a store with a tensor just added verifies");
        let rows = s.tensor("t", &[0, 1, 2, 3]).expect("rows just added read");
        let mut want = vec![0u8; 4 * rb as usize];
        use std::os::unix::fs::FileExt;
        f.read_exact_at(&mut want, h.data_offset).expect("the rows the header declares");
        assert!(rows.data == want, "rows read back differ from the file's");
    }
}

/// One tensor_npy input in this many (by hash) is imported whole: an
/// import costs some 30 times the add_tensor path, so at 1 in 16 imports
/// took most of the target's time for code one input in 256 still reaches.
const IMPORTED: u64 = 256;

/// tensor_npy through a whole import: data is imported as node tensor
/// "t" beside a 4-vertex graph. Returns whether the import succeeded (and
/// its store was checked).
fn tensor_npy_import(dir: &Path, npy: &Path) -> bool {
    let out = dir.join("t.sg");
    let _ = std::fs::remove_dir_all(&out);
    let t = TensorInput { name: "t".into(), data: TensorData::Npy(npy.to_path_buf()) };
    let o = ImportOptions { num_nodes: Some(4), ..Default::default() };
    let imported = import(&out, &[four_edges()], &[t], &o, &|_, _, _| {}).is_ok();
    if imported {
        let s = Store::open(&out, &OpenOptions { cache_bytes: 1 << 20, ..Default::default() }).expect("a store just imported opens");
        s.verify(&mut |_, _| {}).expect("a store just imported verifies");
        s.tensor("t", &[0, 1, 2, 3]).expect("rows of a store just imported read");
    }
    let _ = std::fs::remove_dir_all(&out);
    imported
}

/// The 4-vertex graph tensor_npy adds its tensor to.
fn four_edges() -> EdgeInput {
    EdgeInput::Memory { src: vec![0, 1, 2], dst: vec![1, 2, 3], weights: None, labels: None }
}

/// The 4-vertex store tensor_npy adds tensors to: its directory and its
/// member image, loaded on a fresh simulated disk per input. Built once.
struct NpyBase {
    dir: PathBuf,
    image: Vec<u8>,
}

fn npy_base() -> &'static NpyBase {
    static B: OnceLock<NpyBase> = OnceLock::new();
    B.get_or_init(|| {
        let dir = memory_dir().join("npy.sg");
        import(&dir, &[four_edges()], &[], &ImportOptions { num_nodes: Some(4), ..Default::default() }, &|_, _, _| {}).expect("base import");
        let image = std::fs::read(member_path(&dir, 0)).expect("base image");
        NpyBase { dir, image }
    })
}

/// A small store with every page kind an import writes and a merge adds
/// but extents (its longest list, 299 edges, fits a packed page): its
/// member image and directory (with an empty log). Built once.
pub struct Fixture {
    pub dir: PathBuf,
    pub image: Vec<u8>,
    pub page_size: usize,
    /// The checkpoint LSN of the image's superblock.
    pub checkpoint: u64,
    /// Pages the store uses (its superblock's `total_pages`); the rest of
    /// the image, up to its stripe, is free and nothing reads it.
    pub written: usize,
}

/// Where in the fixture's image an input's damage goes: `at` modulo the
/// image, then folded into the written pages when it lands past them
/// (damage to free space changes nothing an open reads, and most of a
/// stripe is free). Positions already in the written pages keep their
/// meaning, and so do the kept inputs.
pub(crate) fn fold(at: usize, image: usize, written: usize) -> usize {
    let at = at % image;
    if at < written { at } else { at % written }
}

pub fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = memory_dir().join("g.sg");
        let n = 300u64;
        let (mut a, mut b) = (vec![], vec![]);
        let mut x = 12345u64;
        for d in 1..n {
            a.push(7);
            b.push(d);
        }
        for _ in 0..900 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            a.push((x >> 33) % n);
            b.push((x >> 13) % n);
        }
        let w: Vec<f32> = (0..a.len()).map(|i| (i % 7) as f32).collect();
        let l: Vec<u32> = (0..a.len()).map(|i| (i % 3) as u32).collect();
        let rows: Vec<u8> = (0..n * 3).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let t = TensorInput { name: "x".into(), data: TensorData::Memory { dtype: DType::F32, rows: n, dim: 3, bytes: rows } };
        let o = ImportOptions {
            in_edges: true,
            weights: true,
            labels: true,
            dedup: true,
            num_nodes: Some(n),
            page_size: 4096,
            order: order::VertexOrder::Degree,
            ..Default::default()
        };
        import(&dir, &[EdgeInput::Memory { src: a, dst: b, weights: Some(w), labels: Some(l) }], &[t], &o, &|_, _, _| {}).expect("fixture import");
        let s = Store::open(&dir, &OpenOptions { writable: true, cache_bytes: 1 << 20, ..Default::default() }).expect("fixture open");
        s.add_vertices(3, &[("x".into(), vec![0u8; 3 * 3 * 4])], true).expect("fixture add_vertices");
        s.delete_vertices(&[5], true).expect("fixture delete");
        s.merge().expect("fixture merge");
        let checkpoint = s.superblock().checkpoint_lsn;
        let written = s.superblock().total_pages as usize;
        drop(s);
        let image = std::fs::read(member_path(&dir, 0)).expect("fixture image");
        std::fs::write(dir.join("wal.log"), b"").expect("fixture log");
        Fixture { dir, image, page_size: 4096, checkpoint, written }
    })
}

/// Opens the image (member 0 on a simulated disk, the log from `dir`) and
/// runs every read; errors are fine, panics are not. `pick` chooses the
/// vertices the per-vertex reads ask for.
pub fn exercise(dir: &Path, image: Vec<u8>, pick: u64) {
    solidgraph_engine::state::set_budget(STATE_BUDGET);
    one_thread();
    let disk = SimDisk::new(1, 1);
    disk.load(0, image);
    let o = OpenOptions { cache_bytes: 1 << 20, backend: BackendChoice::Sim(disk), ..Default::default() };
    let Ok(s) = Store::open(dir, &o) else { return };
    let _ = s.verify(&mut |_, _| {});
    reads(&s, pick);
}

/// Vertices the per-vertex reads of one input ask for: decoding every
/// list once per direction (and in verify) already meets any damage, and
/// the other reads only need to reach their own code on some lists; a
/// window per input keeps an execution to a few milliseconds.
const WINDOW: u64 = 24;

/// Vertices whose lists `reads` reads in each direction at most: the
/// fixture has 303, and the ids past them in a store whose damaged
/// superblock declares more meet the same empty-list code every time.
const MAX_LISTED: u64 = 1 << 12;

/// Every read API, each error ignored: the whole store's lists in each
/// direction, then a window of `WINDOW` vertices chosen by `pick` through
/// every per-vertex read, a sample and a BFS from it.
pub fn reads(s: &Store, pick: u64) {
    let n = s.num_nodes().min(MAX_LISTED);
    let all: Vec<u64> = (0..n).collect();
    let first = if n > WINDOW { pick % (n - WINDOW + 1) } else { 0 };
    let ids = &all[first as usize..(first + WINDOW).min(n) as usize];
    for dir in [Direction::Out, Direction::In, Direction::Lower] {
        let _ = s.neighbors(&all, dir, s.has_weights(), s.has_labels());
        let _ = s.degree(ids, dir);
        let _ = s.extent_degrees(ids, dir);
        if let (Some(&a), Some(&b)) = (ids.first(), ids.last()) {
            let _ = s.read_range(dir, a, b + 1, s.has_weights(), false, Csr::default());
        }
        let _ = s.neighbors_drawn(ids, dir, |_, d, out| out.extend((0..d.min(3)).map(|k| k as usize)));
    }
    let rev: Vec<u64> = ids.iter().rev().copied().collect();
    let _ = s.edge_weights(ids, &rev);
    let _ = s.external_ids();
    let _ = s.lower_degrees();
    for t in s.tensors() {
        let _ = s.tensor(&t.name, ids);
    }
    let seeds: Vec<u64> = ids.iter().copied().take(8).collect();
    let o = SampleOptions { fanouts: vec![3, 2], tensors: s.tensors().into_iter().map(|t| t.name).collect(), ..Default::default() };
    let _ = sample_neighbors(s, &seeds, &o);
    if let Some(&source) = ids.first() {
        let _ = bfs(s, source, None, true, &solidgraph_engine::silent);
    }
}

/// A choice of vertices from an input's bytes (FNV-1a).
fn pick(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// Recomputes page `p`'s checksum in `image` (see `page::seal`).
pub fn reseal(image: &mut [u8], page_size: usize, p: usize) {
    let pg = &mut image[p * page_size..(p + 1) * page_size];
    let crc = solidgraph_store::page::checksum(p as u64, pg);
    pg[0..4].copy_from_slice(&crc.to_le_bytes());
}

/// data[0..2] picks a page of the fixture (`fold`); data[2..] replaces its bytes
/// after the checksum and kind (repeated to fill the page), then the
/// checksum is recomputed.
pub fn page(data: &[u8]) {
    if let Some(image) = page_image(data) {
        exercise(&fixture().dir, image, pick(data));
    }
}

/// The fixture's image as `page` changes it (None: input too short).
pub fn page_image(data: &[u8]) -> Option<Vec<u8>> {
    let f = fixture();
    if data.len() < 3 {
        return None;
    }
    let p = fold(u16::from_le_bytes([data[0], data[1]]) as usize, f.image.len() / f.page_size, f.written);
    let mut image = f.image.clone();
    let body = &data[2..];
    let pg = &mut image[p * f.page_size..(p + 1) * f.page_size];
    for (i, b) in pg[5..].iter_mut().enumerate() {
        *b = body[i % body.len()];
    }
    reseal(&mut image, f.page_size, p);
    Some(image)
}

/// data[0..4] is a byte offset into the fixture (`fold`); data[4..] is written
/// there (up to a page), then the checksums of the pages touched are
/// recomputed.
pub fn store_bytes(data: &[u8]) {
    if let Some(image) = store_bytes_image(data) {
        exercise(&fixture().dir, image, pick(data));
    }
}

/// The fixture's image as `store_bytes` changes it (None: input too short).
pub fn store_bytes_image(data: &[u8]) -> Option<Vec<u8>> {
    let f = fixture();
    if data.len() < 5 {
        return None;
    }
    let mut image = f.image.clone();
    let at = fold(u32::from_le_bytes(data[0..4].try_into().expect("4")) as usize, image.len(), f.written * f.page_size);
    let body = &data[4..data.len().min(4 + f.page_size)];
    let end = (at + body.len()).min(image.len());
    image[at..end].copy_from_slice(&body[..end - at]);
    for p in at / f.page_size..=(end - 1) / f.page_size {
        reseal(&mut image, f.page_size, p);
    }
    Some(image)
}

/// Opens an image of the fixture on a simulated disk.
pub fn open_image(image: Vec<u8>) -> Result<Store> {
    let disk = SimDisk::new(1, 1);
    disk.load(0, image);
    Store::open(&fixture().dir, &OpenOptions { cache_bytes: 1 << 20, backend: BackendChoice::Sim(disk), ..Default::default() })
}

/// data is a list of update payloads, each `len u16 | bytes`, written as
/// log records with valid checksums and consecutive LSNs after the
/// fixture's checkpoint: replay at open decodes them.
pub fn wal(data: &[u8]) {
    let dir = scratch();
    let d = write_wal(&dir, data);
    exercise(&d, fixture().image.clone(), pick(data));
}

/// Opens the fixture with the log `wal` makes of `data`.
pub fn open_wal(data: &[u8]) -> Result<Store> {
    let dir = scratch();
    let d = write_wal(&dir, data);
    let disk = SimDisk::new(1, 1);
    disk.load(0, fixture().image.clone());
    Store::open(&d, &OpenOptions { cache_bytes: 1 << 20, backend: BackendChoice::Sim(disk), ..Default::default() })
}

/// Writes the log `wal` makes of `data` into a store directory under
/// `scratch` and returns the directory.
fn write_wal(scratch: &Path, data: &[u8]) -> PathBuf {
    let f = fixture();
    let mut log = Vec::new();
    let (mut at, mut lsn) = (0, f.checkpoint + 1);
    while at + 2 <= data.len() {
        let len = u16::from_le_bytes([data[at], data[at + 1]]) as usize;
        let p = &data[at + 2..(at + 2 + len).min(data.len())];
        wal::encode(lsn, p, &mut log);
        at += 2 + len;
        lsn += 1;
    }
    let d = scratch.join("wal.sg");
    std::fs::create_dir_all(&d).expect("scratch store dir");
    std::fs::write(d.join("wal.log"), &log).expect("write log");
    d
}

#[cfg(test)]
mod tests {
    /// The import path of tensor_npy runs its checks on a valid file: an
    /// import that fails for a reason of the harness's own (a backend it
    /// does not support, say) would skip them silently.
    #[test]
    fn tensor_npy_imports_a_valid_npy() {
        let dir = super::scratch();
        let head = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), }";
        let mut npy = b"\x93NUMPY\x01\x00".to_vec();
        let pad = (64 - (10 + head.len() + 1) % 64) % 64;
        npy.extend_from_slice(&((head.len() + pad + 1) as u16).to_le_bytes());
        npy.extend_from_slice(head.as_bytes());
        npy.extend(std::iter::repeat_n(b' ', pad));
        npy.push(b'\n');
        npy.extend((0..8u32).flat_map(|i| (i as f32).to_le_bytes()));
        let path = dir.join("valid.npy");
        std::fs::write(&path, &npy).unwrap();
        assert!(super::tensor_npy_import(&dir, &path), "a valid .npy imports");
        drop(dir);
        super::tensor_npy(&npy);
    }
}
