//! External-memory import: edges from files larger than memory become a store.
//!
//! 1. Check every input's header (tensor shapes, .npy sizes) before writing.
//! 2. With a degree order (`order.rs`), read the edges once to count
//!    degrees and renumber. Read edges a batch at a time into one sorter
//!    per direction (undirected: both ways into the out sorter), spilling
//!    sorted runs within the memory budget.
//! 3. Start writing the tensors on a second thread (their region comes first,
//!    its size known from the headers; rows gathered in the new order) while the main thread merges the runs
//!    and lays out out-edge pages (lower lists from the same stream on a
//!    third thread, into a scratch file moved behind the out-lists), then
//!    in-edge pages, then the GTTs.
//! 4. Seal both superblocks, fsync, rename the build directory into place.
//!
//! All of it happens in `<out>.partial-<pid>`, removed on any failure, so a
//! failed import leaves nothing behind. No timestamps or randomness: the same
//! input gives the same bytes.

pub mod layout;
pub mod npy;
pub mod permute;
pub mod sort;
pub mod source;

use std::io::Read;
use std::path::{Path, PathBuf};

use solidgraph_io::{BackendChoice, Volume, VolumeOptions};

use self::layout::{LayoutOptions, PageWriter, lay_out, write_tensor};
use self::sort::{PACKED_MAX, Rec, Sorter, pack};
use self::source::{EdgeBatch, EdgeInput, Limits};
use crate::adjacency::EdgeFormat;
use crate::base::member_path;
use crate::error::{Result, StoreError, file_err};
use crate::gtt::Gtt;
use crate::order::{Permutation, VertexOrder};
use crate::page;
use crate::superblock::{DirMeta, FORMAT_VERSION, LowerMeta, MAX_TENSOR_NAME, MAX_TENSORS, Superblock, Table, TensorMeta};
use crate::tensor::{self, DType};

const EPOCH: u64 = 1;
/// The hot table ranks at most this many vertices (a quarter of them up to
/// here): enough for a row cache of several times the rows a share of a
/// store's bytes holds, 128 MiB of table at most.
pub const HOT_MAX: usize = 1 << 24;
/// Edges read, checked, renumbered and handed to the sorters at a time.
const BATCH_EDGES: usize = 1 << 20;

#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Store each edge both ways.
    pub undirected: bool,
    /// Give every vertex an edge to itself (once).
    pub self_loops: bool,
    /// Drop repeated (src, dst) edges, keeping the first in sort order.
    pub dedup: bool,
    /// Keep edge weights (third text column / `weight` CSV column).
    pub weights: bool,
    /// Keep edge labels (fourth text column / `label` CSV column).
    pub labels: bool,
    /// Also store in-edges (directed graphs; undirected ones have them).
    pub in_edges: bool,
    /// Undirected graphs: also store each vertex's lower list (its
    /// neighbors up to itself, `Direction::Lower`), every edge once. About
    /// half the adjacency again on disk; PageRank and WCC then read half the
    /// bytes per pass.
    pub lower_lists: bool,
    pub page_size: usize,
    /// Share of a packed page filled at import; the rest is room for updates.
    /// 1 by default: a pass reads every byte of slack, and merge, which
    /// rewrites pages whole anyway, leaves room in the pages it writes.
    pub fill_factor: f64,
    /// Bytes for sort buffers; the import's peak memory stays near this.
    pub memory_budget: u64,
    /// Declared vertex count; ids must be below it.
    pub num_nodes: Option<u64>,
    /// How vertices are numbered inside the store (`order.rs`).
    pub order: VertexOrder,
    pub members: usize,
    pub stripe_pages: u64,
    pub backend: BackendChoice,
    /// Vertex ranges each direction is laid out in at once; 0: 2 from 4M
    /// records on, else 1 (see `layout_parts`). The store's bytes depend on
    /// it; every count gives the same lists.
    pub layout_parts: usize,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            undirected: false,
            self_loops: false,
            dedup: false,
            weights: false,
            labels: false,
            in_edges: false,
            lower_lists: false,
            page_size: 4096,
            fill_factor: 1.0,
            memory_budget: 1 << 30,
            num_nodes: None,
            order: VertexOrder::Input,
            members: 1,
            stripe_pages: 256,
            backend: BackendChoice::Auto,
            layout_parts: 0,
        }
    }
}

/// Node tensor contents.
#[derive(Debug, Clone)]
pub enum TensorData {
    /// A (rows,) or (rows, dim) `.npy` array.
    Npy(PathBuf),
    Memory {
        dtype: DType,
        rows: u64,
        dim: u64,
        bytes: Vec<u8>,
    },
}

#[derive(Debug, Clone)]
pub struct TensorInput {
    pub name: String,
    pub data: TensorData,
}

#[derive(Debug, Clone)]
pub struct ImportReport {
    pub num_nodes: u64,
    pub num_edges: u64,
    pub input_edges: u64,
    pub pages: u64,
    pub bytes: u64,
    pub runs: usize,
    pub seconds: f64,
    /// Seconds per phase, in order (the phases a profile names).
    pub phases: Vec<(&'static str, f64)>,
    /// CPU seconds (user + system, every thread of the process) per phase,
    /// in the order of `phases`: divided by the wall time, the cores the
    /// phase kept busy.
    pub phase_cpu: Vec<f64>,
}

/// Wall and CPU time per phase.
struct Phases {
    at: std::time::Instant,
    cpu_at: f64,
    list: Vec<(&'static str, f64)>,
    cpu: Vec<f64>,
}

impl Phases {
    fn new(at: std::time::Instant) -> Phases {
        Phases { at, cpu_at: process_cpu_seconds(), list: Vec::new(), cpu: Vec::new() }
    }

    fn done(&mut self, name: &'static str) {
        let now = std::time::Instant::now();
        let cpu = process_cpu_seconds();
        self.list.push((name, (now - self.at).as_secs_f64()));
        self.cpu.push(cpu - self.cpu_at);
        self.at = now;
        self.cpu_at = cpu;
    }
}

/// User + system CPU seconds of the whole process so far (0 if the kernel
/// does not say).
fn process_cpu_seconds() -> f64 {
    // SAFETY: getrusage writes only the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(u.ru_utime) + secs(u.ru_stime)
}

/// The sorters one import feeds, and how an input edge becomes their
/// records.
struct Sorters<'a> {
    out: &'a mut Sorter,
    inn: Option<&'a mut Sorter>,
    undirected: bool,
}

impl Sorters<'_> {
    /// Pushes a batch whose largest id is `max_id`: as packed keys when the
    /// sorters take them and the ids fit, else record by record.
    fn push(&mut self, b: &EdgeBatch, max_id: u64) -> Result<()> {
        let packed = self.out.packed() && max_id <= PACKED_MAX;
        if !packed {
            return self.push_records(b);
        }
        // At most two keys an edge, and a push must fit the buffer.
        let per = (self.out.max_keys() / 2).max(1);
        for (src, dst) in b.src.chunks(per).zip(b.dst.chunks(per)) {
            push_pairs(self.out, src, dst, if self.undirected { Keys::BothWays } else { Keys::Forward })?;
            if let Some(x) = self.inn.as_deref_mut() {
                push_pairs(x, src, dst, Keys::Reversed)?;
            }
        }
        Ok(())
    }

    fn push_records(&mut self, b: &EdgeBatch) -> Result<()> {
        for i in 0..b.len() {
            let (src, dst) = (b.src[i], b.dst[i]);
            let rec = Rec { src, dst, wbits: b.weights.get(i).map_or(0, |w| w.to_bits()), label: b.labels.get(i).copied().unwrap_or(0) };
            self.out.push(rec)?;
            if self.undirected && src != dst {
                self.out.push(Rec { src: dst, dst: src, ..rec })?;
            }
            if let Some(s) = self.inn.as_deref_mut() {
                s.push(Rec { src: dst, dst: src, ..rec })?;
            }
        }
        Ok(())
    }
}

/// Which keys an edge (s, d) gives a sorter.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keys {
    /// (s, d).
    Forward,
    /// (s, d), then (d, s) unless s == d: an undirected edge's two lists.
    BothWays,
    /// (d, s): in-lists.
    Reversed,
}

/// Edges per parallel chunk of a batch.
const CHUNK_EDGES: usize = 1 << 14;

/// Packs the edges `src[i] -> dst[i]` (ids at most `PACKED_MAX`) into
/// `s`'s buffer on all cores, in input order, chunk by chunk at offsets
/// known beforehand (a chunk's self-loops give one key less).
fn push_pairs(s: &mut Sorter, src: &[u64], dst: &[u64], keys: Keys) -> Result<()> {
    use rayon::prelude::*;
    assert_eq!(src.len(), dst.len());
    let chunks = || src.par_chunks(CHUNK_EDGES).zip(dst.par_chunks(CHUNK_EDGES));
    let counts: Vec<usize> = match keys {
        Keys::BothWays => chunks().map(|(a, b)| 2 * a.len() - a.iter().zip(b).filter(|(x, y)| x == y).count()).collect(),
        Keys::Forward | Keys::Reversed => src.chunks(CHUNK_EDGES).map(<[u64]>::len).collect(),
    };
    let n = counts.iter().sum();
    s.push_keys_with(n, |out| {
        let mut regions = Vec::with_capacity(counts.len());
        let mut rest = out;
        for &c in &counts {
            let (region, tail) = rest.split_at_mut(c);
            regions.push(region);
            rest = tail;
        }
        regions.into_par_iter().zip(chunks()).for_each(|(o, (a, b))| {
            let mut i = 0;
            for (&x, &y) in a.iter().zip(b) {
                match keys {
                    Keys::Forward => o[i] = pack(x, y),
                    Keys::Reversed => o[i] = pack(y, x),
                    Keys::BothWays => {
                        o[i] = pack(x, y);
                        if x != y {
                            i += 1;
                            o[i] = pack(y, x);
                        }
                    }
                }
                i += 1;
            }
            assert_eq!(i, o.len(), "a chunk's keys fill its region");
        });
    })
}

/// Maps a batch's ids to internal ones (both cores); Err if an id has no
/// entry (the input changed since the degrees were counted).
fn renumber(b: &mut EdgeBatch, to_internal: &[u32]) -> std::result::Result<(), ()> {
    use rayon::prelude::*;
    let map = |ids: &mut [u64]| {
        ids.par_chunks_mut(1 << 14).try_for_each(|c| {
            for v in c {
                *v = *to_internal.get(*v as usize).ok_or(())? as u64;
            }
            Ok(())
        })
    };
    map(&mut b.src)?;
    map(&mut b.dst)
}

/// The largest id of a batch (0 if empty), on all cores.
fn max_id(b: &EdgeBatch) -> u64 {
    use rayon::prelude::*;
    [&b.src, &b.dst].into_par_iter().flat_map(|ids| ids.par_chunks(1 << 16)).map(|c| c.iter().copied().max().unwrap_or(0)).max().unwrap_or(0)
}

/// `scope.spawn` with a thread name, so that a profile (`perf report
/// --sort comm`) tells the import's threads apart. Panics where
/// `scope.spawn` does (the system refuses a thread).
pub(crate) fn spawn_named<'scope, T: Send + 'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    name: String,
    f: impl FnOnce() -> T + Send + 'scope,
) -> std::thread::ScopedJoinHandle<'scope, T> {
    std::thread::Builder::new().name(name).spawn_scoped(scope, f).expect("failed to spawn thread")
}

/// A batch read, checked and renumbered, with its largest id.
type ReadBatch = Result<(EdgeBatch, u64)>;

/// Reads every edge of `readers` on a thread of its own (reading, parsing,
/// checking, renumbering with `to_internal`) while `each` takes the batch
/// before, so the input's reading overlaps what is done with it. Two
/// batches of `BATCH_EDGES` are in flight at most (three buffers).
fn read_beside<'r>(
    readers: &mut [Box<dyn source::EdgeReader + Send + 'r>],
    (weights, labels): (bool, bool),
    lim: &Limits,
    to_internal: Option<&[u32]>,
    phase: &str,
    progress: Progress,
    mut each: impl FnMut(&EdgeBatch, u64) -> Result<()>,
) -> Result<()> {
    use std::sync::mpsc::sync_channel;
    std::thread::scope(|scope| {
        let (tx, rx) = sync_channel::<ReadBatch>(0);
        let (back_tx, back_rx) = sync_channel::<EdgeBatch>(2);
        spawn_named(scope, "sg-read".into(), move || {
            for r in readers.iter_mut() {
                loop {
                    let mut batch = back_rx.try_recv().unwrap_or_else(|_| EdgeBatch::new(weights, labels));
                    let read = r.next_batch(&mut batch, BATCH_EDGES, lim).and_then(|n| {
                        if let Some(map) = to_internal {
                            renumber(&mut batch, map).map_err(|()| r.error("input changed while importing (not seen when counting degrees)".into()))?;
                        }
                        Ok(n)
                    });
                    let (d, t) = r.progress();
                    progress(phase, d, t);
                    let n = match read {
                        Ok(n) => n,
                        Err(e) => {
                            let _ = tx.send(Err(e));
                            return;
                        }
                    };
                    if n == 0 {
                        break;
                    }
                    let m = max_id(&batch);
                    // A closed channel: the consumer stopped on an error.
                    if tx.send(Ok((batch, m))).is_err() {
                        return;
                    }
                }
            }
        });
        for got in rx {
            let (batch, m) = got?;
            each(&batch, m)?;
            let _ = back_tx.try_send(batch);
        }
        Ok(())
    })
}

/// (phase, done, total) callbacks for progress bars.
pub type Progress<'a> = &'a (dyn Fn(&str, u64, u64) + Sync);

struct TensorPlan<'a> {
    meta: TensorMeta,
    data: &'a TensorData,
    /// Offset of the data in the .npy file.
    offset: u64,
}

fn plan_tensor(t: &TensorInput) -> Result<TensorPlan<'_>> {
    if t.name.is_empty() || t.name.len() > MAX_TENSOR_NAME {
        return Err(StoreError::Invalid(format!("tensor name {:?} must be 1..={MAX_TENSOR_NAME} bytes", t.name)));
    }
    let (dtype, rows, dim, offset) = match &t.data {
        TensorData::Npy(p) => {
            let h = npy::read_header(p)?;
            let dtype = DType::parse(&h.descr).ok_or_else(|| StoreError::BadInput {
                path: p.clone(),
                reason: format!("tensor dtype {} is not one of float32, float16, int64, int32, uint8, bool", h.descr),
            })?;
            let (rows, dim) = match h.shape.as_slice() {
                [n] => (*n, 1),
                [n, d] => (*n, *d),
                s => return Err(StoreError::BadInput { path: p.clone(), reason: format!("tensor must be 1-D or 2-D, not shape {s:?}") }),
            };
            (dtype, rows, dim, h.data_offset)
        }
        TensorData::Memory { dtype, rows, dim, bytes } => {
            if bytes.len() as u64 != rows * dim * dtype.size() as u64 {
                return Err(StoreError::Invalid(format!("tensor {:?}: {} bytes for {rows} x {dim} {}", t.name, bytes.len(), dtype.name())));
            }
            (*dtype, *rows, *dim, 0)
        }
    };
    if dim == 0 {
        return Err(StoreError::Invalid(format!("tensor {:?} has rows of width 0", t.name)));
    }
    if dim.saturating_mul(dtype.size() as u64) > crate::superblock::MAX_ROW_BYTES {
        return Err(StoreError::Invalid(format!("tensor {:?}: rows of {dim} x {} exceed {} bytes", t.name, dtype.name(), crate::superblock::MAX_ROW_BYTES)));
    }
    Ok(TensorPlan { meta: TensorMeta { name: t.name.clone(), dtype, dim, rows, start_page: 0, pages: 0 }, data: &t.data, offset })
}

/// Removes the partial build unless disarmed.
struct Cleanup(Option<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

fn check_options(o: &ImportOptions) -> Result<()> {
    let ps = o.page_size;
    if !(4096..=65536).contains(&ps) || !ps.is_power_of_two() {
        return Err(StoreError::Invalid(format!("page size {ps} must be a power of two from 4096 to 65536")));
    }
    if !(o.fill_factor > 0.1 && o.fill_factor <= 1.0) {
        return Err(StoreError::Invalid(format!("fill factor {} must be in (0.1, 1]", o.fill_factor)));
    }
    if o.members == 0 || o.members > crate::superblock::MAX_MEMBERS as usize {
        return Err(StoreError::Invalid(format!("members {} must be in 1..={}", o.members, crate::superblock::MAX_MEMBERS)));
    }
    // The second superblock copy sits in page 1 of member 0.
    if o.stripe_pages < 2 {
        return Err(StoreError::Invalid("stripe unit must be at least 2 pages".into()));
    }
    if o.lower_lists && !o.undirected {
        return Err(StoreError::Invalid("lower lists are for undirected graphs: import it as undirected, or without lower lists".into()));
    }
    if o.memory_budget < 16 << 20 {
        return Err(StoreError::Invalid(format!("memory budget {} is below the 16 MiB minimum", o.memory_budget)));
    }
    if let (true, Some(n)) = (o.lower_lists, o.num_nodes) {
        per_vertex_table_fits(n, o.memory_budget, "lower lists keep")?;
    }
    Ok(())
}

pub fn import(out: &Path, edges: &[EdgeInput], tensors: &[TensorInput], o: &ImportOptions, progress: Progress) -> Result<ImportReport> {
    let t0 = std::time::Instant::now();
    let mut phases = Phases::new(t0);
    check_options(o)?;
    if out.exists() {
        return Err(StoreError::Exists { path: out.to_path_buf() });
    }
    if edges.is_empty() {
        return Err(StoreError::Invalid("no edge input given".into()));
    }
    if tensors.len() > MAX_TENSORS {
        return Err(StoreError::Invalid(format!("at most {MAX_TENSORS} tensors per store")));
    }
    let mut plans = tensors.iter().map(plan_tensor).collect::<Result<Vec<_>>>()?;
    for (i, p) in plans.iter().enumerate() {
        if plans[..i].iter().any(|q| q.meta.name == p.meta.name) {
            return Err(StoreError::Invalid(format!("tensor {:?} given twice", p.meta.name)));
        }
    }
    let perm = match o.order {
        VertexOrder::Input => None,
        VertexOrder::Degree => Some(degree_order(edges, o, &plans, progress)?),
    };
    phases.done("degree order");
    let mut readers = edges.iter().map(|e| source::open(e, o.weights, o.labels)).collect::<Result<Vec<_>>>()?;

    let tmp = out.with_file_name(format!("{}.partial-{}", out.file_name().map_or("store".into(), |n| n.to_string_lossy()), std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(file_err(&tmp))?;
    let mut cleanup = Cleanup(Some(tmp.clone()));

    // Phase 2: read and sort.
    let directed_in = !o.undirected && o.in_edges;
    // The order maps live through the whole import: the sort and merge
    // buffers share what they leave, half each at a time.
    let maps = perm.as_ref().map_or(0, |p| (p.to_internal.len() + p.to_external.len()) as u64 * 4);
    let sort_budget = (o.memory_budget.saturating_sub(maps) as usize / 2).max(SORT_BUDGET_MIN);
    // Lower lists need no sorter: they come from the out-lists' stream.
    let per_sorter = if directed_in { sort_budget / 2 } else { sort_budget };
    // Packed keys while ids fit 32 bits (a degree order's always do).
    let packed = !o.weights && !o.labels;
    let mut out_sort = Sorter::new(per_sorter, &tmp, "out", packed);
    let mut in_sort = directed_in.then(|| Sorter::new(per_sorter, &tmp, "in", packed));
    let mut max_id: Option<u64> = None;
    let mut input_edges = 0u64;
    let lim = Limits { below: o.num_nodes.unwrap_or(u64::MAX), declared: o.num_nodes, finite_weights: o.weights };
    let mut sorters = Sorters { out: &mut out_sort, inn: in_sort.as_mut(), undirected: o.undirected };
    let to_internal = perm.as_ref().map(|p| &p.to_internal[..]);
    read_beside(&mut readers, (o.weights, o.labels), &lim, to_internal, "reading", progress, |batch, m| {
        max_id = Some(max_id.unwrap_or(0).max(m));
        sorters.push(batch, m)?;
        input_edges += batch.len() as u64;
        Ok(())
    })?;
    phases.done("read and sort");
    if input_edges == 0 {
        let names: Vec<String> = edges
            .iter()
            .map(|e| match e {
                EdgeInput::File(p) | EdgeInput::NpyPair(p, _) => p.display().to_string(),
                EdgeInput::Memory { .. } => "arrays".into(),
            })
            .collect();
        return Err(StoreError::Invalid(format!("empty input: no edges in {}", names.join(", "))));
    }
    let num_nodes = match (o.num_nodes, &perm) {
        (_, Some(p)) => p.to_internal.len() as u64,
        (Some(n), None) => n,
        (None, None) => {
            let from_edges = max_id.map_or(0, |m| m + 1);
            plans.iter().map(|p| p.meta.rows).fold(from_edges, u64::max)
        }
    };
    if o.lower_lists {
        per_vertex_table_fits(num_nodes, o.memory_budget, "lower lists keep")?;
    }
    for p in &plans {
        if p.meta.rows != num_nodes {
            return Err(StoreError::Invalid(format!("tensor {:?} has {} rows but the graph has {num_nodes} vertices", p.meta.name, p.meta.rows)));
        }
    }
    let fmt = EdgeFormat { weights: o.weights, labels: o.labels };
    // A superblock must fit in a page.
    if Superblock::body_bytes(plans.len()) > o.page_size {
        return Err(StoreError::Invalid("too many tensors for one superblock page".into()));
    }

    // Phase 3: volume, tensors in the background, adjacency here.
    let ps = o.page_size;
    let paths: Vec<PathBuf> = (0..o.members).map(|i| member_path(&tmp, i)).collect();
    let vol = Volume::create(
        &paths,
        2,
        VolumeOptions { page_size: ps, stripe_pages: o.stripe_pages, backend: o.backend.clone(), writable: true, max_io_bytes: 1 << 20, ..Default::default() },
    )?;
    let mut next_page = 2u64;
    for p in plans.iter_mut() {
        p.meta.start_page = next_page;
        p.meta.pages = tensor::pages_for(p.meta.rows, p.meta.row_bytes(), ps);
        next_page += p.meta.pages;
    }
    // The tensor regions stay holes until their pages are written: the
    // adjacency written past them would otherwise allocate them while the
    // sort runs (and a reordered tensor's buckets) are still on disk.
    vol.reserve(next_page)?;
    let runs = out_sort.runs() + in_sort.as_ref().map_or(0, |s| s.runs());
    // The layout's own tables grow beside the merge buffers: the maps, the
    // lower lists' degrees (4 bytes a vertex), the presence bitmap, and
    // the GTTs, page writers and lists in flight (a third of what is left
    // goes to the merge; PERFORMANCE.md, "Import", budget at scale 24).
    let tables = maps + if o.lower_lists { 4 * num_nodes } else { 0 } + num_nodes / 8;
    let merge_budget = (o.memory_budget.saturating_sub(tables) as usize / 3).max(SORT_BUDGET_MIN);
    // The presence bitmap costs n/8 bytes; skip it when ids are so sparse
    // that it would outweigh the 4-byte id column of the edges.
    let presence = num_nodes <= 32 * out_sort.count.max(1);
    let hot = (num_nodes.div_ceil(4) as usize).min(HOT_MAX).min(o.memory_budget as usize / 64);
    let lo = LayoutOptions { fmt, fill: o.fill_factor, dedup: o.dedup, self_loops: o.self_loops, num_nodes, epoch: EPOCH, presence, hot, degrees: false };
    let (out_meta, in_meta, lower_meta, hot, order, total_pages, num_edges) = std::thread::scope(|scope| -> Result<_> {
        // Bucket files of reordered tensors are as large as the tensors:
        // they wait until the out-edge runs, as large, are merged and
        // removed, so the disk never holds both.
        let (runs_gone, wait_runs) = std::sync::mpsc::channel::<()>();
        // The writer moves the receiver in and borrows the rest.
        let (w_plans, w_vol, w_perm, w_tmp) = (&plans, &vol, perm.as_ref(), &tmp);
        let writer = spawn_named(scope, "sg-tensors".into(), move || -> Result<()> {
            let mut waited = false;
            for (i, p) in w_plans.iter().enumerate() {
                if !waited && w_perm.is_some() && matches!(p.data, TensorData::Npy(_)) {
                    // A closed channel means the layout failed; its error is the one reported.
                    wait_runs.recv().map_err(|_| StoreError::Invalid("import stopped before the tensors were written".into()))?;
                    waited = true;
                }
                write_one_tensor(w_vol, i as u32, p, w_perm, (w_tmp, o.memory_budget), progress)?;
            }
            Ok(())
        });
        let laid = (|| -> Result<_> {
            let out_total = out_sort.count;
            let parts = layout_parts(o, out_total);
            let sorted = out_sort.finish_parts(merge_budget, parts)?;
            let out_o = LayoutOptions { degrees: o.lower_lists, ..lo };
            let lower_o = LayoutOptions { hot: 0, ..lo };
            let (out_laid, lower_laid) =
                lay_out(&vol, next_page, sorted, (&out_o, o.lower_lists.then_some(&lower_o)), &tmp, out_total, &|d, t| progress("out-edges", d, t))?;
            let _ = runs_gone.send(());
            let (out_meta, mut next) = write_gtt(&vol, &out_laid.gtt, num_nodes, out_laid.next_page, next_page)?;
            phases.done("out-edges (and lower lists): merge, lay out, write");
            // In-edges and lower lists: one more adjacency each, from its
            // own sorted runs, after everything before it. Returns its
            // metadata and edge count.
            let more = |s: Sorter, phase: &str, next: &mut u64| -> Result<(DirMeta, u64)> {
                let total = s.count;
                let sorted = s.finish_parts(merge_budget, layout_parts(o, total))?;
                let in_o = LayoutOptions { hot: 0, ..lo };
                let (laid, _) = lay_out(&vol, *next, sorted, (&in_o, None), &tmp, total, &|d, t| progress(phase, d, t))?;
                let (m, n) = write_gtt(&vol, &laid.gtt, num_nodes, laid.next_page, *next)?;
                *next = n;
                Ok((m, laid.edges))
            };
            let in_meta = in_sort.map(|s| more(s, "in-edges", &mut next)).transpose()?.map(|(m, _)| m);
            if in_meta.is_some() {
                phases.done("in-edges: merge, lay out, write");
            }
            let mut lower_meta = None;
            if let Some(aside) = lower_laid {
                // The lower lists' pages and GTT move behind what is
                // written so far.
                let end = aside.copy_into(&vol, next)?;
                let laid = &aside.laid;
                let mut gtt = Gtt::default();
                for i in 0..laid.gtt.len() {
                    gtt.push(laid.gtt.first_vertex(i), laid.gtt.page(i) + next, laid.gtt.is_extent(i), laid.gtt.edges_before(i));
                }
                gtt.presence_from(&laid.gtt);
                let (dir, n) = write_gtt(&vol, &gtt, num_nodes, end, next)?;
                next = n;
                let edges = laid.edges;
                let (len, words) = degree_words(out_laid.degrees.as_deref().unwrap_or(&[]));
                let degrees = write_table_from(&vol, len, words, next)?;
                next += degrees.pages;
                lower_meta = Some(LowerMeta { dir, edges, degrees });
                phases.done("lower lists: move behind, GTT");
            }
            let hot = write_table(&vol, &out_laid.hot, next)?;
            next += hot.pages;
            let order = match &perm {
                Some(p) => write_table_from(&vol, p.words_len(), p.words_iter(), next)?,
                None => Table { start: next, pages: 0, words: 0 },
            };
            Ok((out_meta, in_meta, lower_meta, hot, order, next + order.pages, out_laid.edges))
        })();
        // Whatever the layout returned, the writer waits no longer.
        drop(runs_gone);
        let wrote = writer.join().map_err(|_| StoreError::Invalid("tensor writer thread panicked".into()))?;
        phases.done("tables, tensors");
        let laid = laid?;
        wrote?;
        Ok(laid)
    })?;

    // Phase 4: superblocks, sync, rename.
    let sb = Superblock {
        version: FORMAT_VERSION,
        epoch: EPOCH,
        page_size: ps as u32,
        stripe_pages: o.stripe_pages,
        members: o.members as u32,
        directed: !o.undirected,
        fmt,
        num_nodes,
        num_edges,
        total_pages,
        checkpoint_lsn: 0,
        out: out_meta,
        inn: if o.undirected { None } else { in_meta },
        lower: lower_meta,
        tensor_map: Default::default(),
        tombstones: Default::default(),
        hot,
        order,
        tensors: plans.iter().map(|p| p.meta.clone()).collect(),
    };
    vol.sync(true)?;
    let mut w = PageWriter::new(&vol, 0);
    for which in 0..2 {
        sb.encode(which, w.page());
        w.done()?;
    }
    w.finish()?;
    vol.sync(true)?;
    drop(vol);
    // Trim the growth slack so identical inputs give identical files.
    trim_members(&paths, total_pages, o)?;
    std::fs::rename(&tmp, out).map_err(file_err(out))?;
    cleanup.0 = None;
    // The store is in place only once the rename is durable: if the
    // parent directory's sync fails, the import fails and takes the store
    // away again (nothing acknowledged, nothing left behind).
    if let Err(e) = sync_parent(out) {
        let _ = std::fs::remove_dir_all(out);
        return Err(e);
    }
    phases.done("seal, sync, rename");
    Ok(ImportReport {
        num_nodes,
        num_edges,
        input_edges,
        pages: total_pages,
        bytes: total_pages * ps as u64,
        runs,
        seconds: t0.elapsed().as_secs_f64(),
        phases: phases.list,
        phase_cpu: phases.cpu,
    })
}

/// Syncs the directory holding `path`, making a rename into it durable. A
/// file system that cannot sync directories (EINVAL) has nothing to make
/// durable this way.
fn sync_parent(path: &Path) -> Result<()> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let d = std::fs::File::open(parent).map_err(file_err(parent))?;
    match d.sync_all() {
        Err(e) if e.raw_os_error() != Some(libc::EINVAL) => Err(file_err(parent)(e)),
        _ => Ok(()),
    }
}

/// Vertex ranges one direction is laid out in, each on its own thread:
/// from the record count alone (never the machine's cores), since the
/// bytes depend on it (a packed page ends where a range does).
fn layout_parts(o: &ImportOptions, records: u64) -> usize {
    match o.layout_parts {
        0 if records < LAYOUT_PART_MIN => 1,
        0 => 2,
        n => n.min(sort::MAX_PARTS),
    }
}

/// Refuses a vertex count whose 4-byte-per-vertex table (`what` keeps it)
/// would not fit the memory budget: sparse ids (a few edges naming vertex
/// 2^40) would otherwise ask for terabytes at once.
fn per_vertex_table_fits(num_nodes: u64, budget: u64, what: &str) -> Result<()> {
    let need = num_nodes.saturating_mul(4);
    if need > budget {
        return Err(StoreError::Invalid(format!(
            "{num_nodes} vertices: {what} 4 bytes per vertex, {need} bytes, more than the memory budget of {budget} bytes \
             (raise the memory budget, declare fewer vertices or renumber the ids densely)"
        )));
    }
    Ok(())
}

/// The least the sorters and the merge get, whatever the order maps take
/// of the budget.
const SORT_BUDGET_MIN: usize = 8 << 20;

/// Records below which one thread lays out a direction.
const LAYOUT_PART_MIN: u64 = 1 << 22;

/// The degree order of the input's vertices: one pass over the edges
/// counting each endpoint (4 bytes per vertex), with the same vertex count
/// rules as the import itself.
fn degree_order(edges: &[EdgeInput], o: &ImportOptions, plans: &[TensorPlan], progress: Progress) -> Result<Permutation> {
    let limit = o.num_nodes.unwrap_or(u32::MAX as u64).min(u32::MAX as u64);
    let lim = Limits { below: limit, declared: o.num_nodes.filter(|&nn| nn <= u32::MAX as u64), finite_weights: false };
    let mut degree: Vec<u32> = Vec::new();
    let mut readers = edges.iter().map(|e| source::open(e, false, false)).collect::<Result<Vec<_>>>()?;
    read_beside(&mut readers, (false, false), &lim, None, "counting degrees", progress, |batch, m| {
        per_vertex_table_fits(m + 1, o.memory_budget, "a degree order counts")?;
        let m = m as usize;
        if m >= degree.len() {
            degree.resize((m + 1).max(degree.len() * 5 / 4), 0);
        }
        count_degrees(&mut degree, batch);
        Ok(())
    })?;
    let seen = degree.iter().rposition(|&d| d > 0).map_or(0, |v| v + 1) as u64;
    let n = o.num_nodes.unwrap_or_else(|| plans.iter().map(|p| p.meta.rows).fold(seen, u64::max));
    if n > u32::MAX as u64 {
        return Err(StoreError::Invalid(format!("{n} vertices: a degree order supports at most 2^32 - 1")));
    }
    degree.resize(n as usize, 0);
    degree.shrink_to_fit();
    Ok(Permutation::by_degree(&degree))
}

/// Adds a batch's endpoints to `degree` (long enough for its ids) on all
/// cores, saturating at u32::MAX.
fn count_degrees(degree: &mut [u32], b: &EdgeBatch) {
    use rayon::prelude::*;
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    // SAFETY: AtomicU32 has u32's size and alignment, and `degree` is
    // borrowed mutably, so only these atomics touch it meanwhile.
    let cells: &[AtomicU32] = unsafe { &*(degree as *mut [u32] as *const [AtomicU32]) };
    [&b.src, &b.dst].into_par_iter().flat_map(|ids| ids.par_chunks(1 << 14)).for_each(|c| {
        for &v in c {
            let cell = &cells[v as usize];
            // A wrapped count goes back to the maximum: whatever the
            // interleaving, the last write after a wrap is u32::MAX.
            if cell.fetch_add(1, Relaxed) == u32::MAX {
                cell.store(u32::MAX, Relaxed);
            }
        }
    });
}

/// Cuts each member to the whole stripe rows that hold `total_pages`.
fn trim_members(paths: &[PathBuf], total_pages: u64, o: &ImportOptions) -> Result<()> {
    let row_pages = o.stripe_pages * o.members as u64;
    let rows = total_pages.div_ceil(row_pages);
    let len = rows * o.stripe_pages * o.page_size as u64;
    for p in paths {
        let f = std::fs::OpenOptions::new().write(true).open(p).map_err(file_err(p))?;
        f.set_len(len).map_err(file_err(p))?;
        f.sync_all().map_err(file_err(p))?;
    }
    Ok(())
}

/// The lower lists' degree table: the ranges' degrees in order, two to a
/// word, the first in the low half; and its length in words.
fn degree_words(ranges: &[Vec<u32>]) -> (u64, impl Iterator<Item = u64> + '_) {
    let n: usize = ranges.iter().map(Vec::len).sum();
    (n.div_ceil(2) as u64, pairs(ranges.iter().flatten().copied()))
}

/// u32s two to a word, the first in the low half (an odd last one alone).
fn pairs(mut it: impl Iterator<Item = u32>) -> impl Iterator<Item = u64> {
    std::iter::from_fn(move || {
        let lo = it.next()?;
        Some(lo as u64 | it.next().map_or(0, |hi| (hi as u64) << 32))
    })
}

/// Writes a table of `len` words from `words` page by page from page `at`:
/// a per-vertex table (the order maps, 8 bytes a vertex) is never copied
/// whole into words or pages, which would double or triple it in memory.
fn write_table_from(vol: &Volume, len: u64, mut words: impl Iterator<Item = u64>, at: u64) -> Result<Table> {
    let ps = vol.page_size();
    let per = page::table_words_per_page(ps);
    let pages = page::table_pages(len as usize, ps);
    let mut chunk = Vec::with_capacity(per);
    let mut w = PageWriter::new(vol, at);
    for p in 0..pages {
        let want = per.min((len - p * per as u64) as usize);
        chunk.clear();
        chunk.extend(words.by_ref().take(want));
        assert_eq!(chunk.len(), want, "a table's words ran short");
        page::encode_table_page(&chunk, at + p, p, EPOCH, w.page());
        w.done()?;
    }
    assert!(words.next().is_none(), "a table's words ran long");
    let end = w.finish()?;
    debug_assert_eq!(end, at + pages);
    Ok(Table { start: at, pages, words: len })
}

/// Writes `words` as table pages from page `at`.
fn write_table(vol: &Volume, words: &[u64], at: u64) -> Result<Table> {
    write_table_from(vol, words.len() as u64, words.iter().copied(), at)
}

/// Writes whole sealed pages from page `at`; returns the page after them.
fn write_pages(vol: &Volume, at: u64, buf: &[u8]) -> Result<u64> {
    let mut w = PageWriter::new(vol, at);
    for chunk in buf.chunks(vol.page_size()) {
        w.page().copy_from_slice(chunk);
        w.done()?;
    }
    w.finish()
}

/// Writes the GTT pages, then the presence bitmap, from page `at`.
fn write_gtt(vol: &Volume, gtt: &Gtt, num_nodes: u64, at: u64, adj_start: u64) -> Result<(DirMeta, u64)> {
    let ps = vol.page_size();
    let n = gtt.pages_needed(ps);
    let nb = if gtt.has_presence() { Gtt::bitmap_pages(num_nodes, ps) } else { 0 };
    let mut buf = vec![0u8; (n + nb) as usize * ps];
    gtt.encode(ps, at, EPOCH, &mut buf);
    gtt.encode_bitmap(num_nodes, ps, at + n, EPOCH, &mut buf[n as usize * ps..]);
    let next = write_pages(vol, at, &buf)?;
    Ok((DirMeta { gtt_start: at, gtt_pages: n, gtt_entries: gtt.len() as u64, adj_start, adj_pages: at - adj_start, bitmap_pages: nb }, next))
}

/// Rows from `file` (or `bytes`) in the order `rows` names, a batch at a
/// time (read in parallel: the input is read at random).
struct Gather<'a> {
    rows: &'a [u32],
    row_bytes: usize,
    next: usize,
    buf: Vec<u8>,
    at: usize,
}

impl Gather<'_> {
    fn fill(&mut self, out: &mut [u8], read_row: impl Fn(u64, &mut [u8]) -> Result<()> + Sync) -> Result<usize> {
        use rayon::prelude::*;
        if self.at == self.buf.len() {
            let batch = ((4 << 20) / self.row_bytes).max(1).min(self.rows.len() - self.next);
            if batch == 0 {
                return Ok(0);
            }
            self.buf.resize(batch * self.row_bytes, 0);
            let ids = &self.rows[self.next..self.next + batch];
            let rb = self.row_bytes;
            self.buf.par_chunks_mut(rb).zip(ids.par_iter()).try_for_each(|(b, &r)| read_row(r as u64, b))?;
            self.next += batch;
            self.at = 0;
        }
        let n = out.len().min(self.buf.len() - self.at);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// A tensor's bytes written so far, reported every 64 MiB.
struct Written<'a> {
    bytes: u64,
    total: u64,
    name: &'a str,
    progress: Progress<'a>,
}

impl Written<'_> {
    fn add(&mut self, n: usize) {
        self.bytes += n as u64;
        if self.bytes % (64 << 20) < n as u64 {
            (self.progress)(self.name, self.bytes, self.total);
        }
    }
}

/// Writes tensor `index`'s pages, its rows in `order`'s new order if
/// given. A reordered `.npy` goes through buckets cut to the memory budget
/// `scratch.1` (`permute`): in the tensor's region, or files in
/// `scratch.0` when the region cannot hold them.
fn write_one_tensor(vol: &Volume, index: u32, p: &TensorPlan, order: Option<&Permutation>, scratch: (&Path, u64), progress: Progress) -> Result<()> {
    let total = p.meta.rows * p.meta.row_bytes();
    let name = format!("tensor {}", p.meta.name);
    let mut done = Written { bytes: 0, total, name: &name, progress };
    let rb = p.meta.row_bytes() as usize;
    if let (Some(perm), TensorData::Npy(path)) = (order, p.data)
        && let Some(plan) = permute::plan(p.meta.rows, rb, scratch.1)
    {
        // In the tensor's own region when it holds them: no bucket files
        // beside the store, whose region the volume allocates anyway.
        let buckets = permute::Buckets::in_region(vol, &plan, p.meta.start_page, p.meta.pages)
            .unwrap_or_else(|| permute::Buckets::Files(permute::bucket_paths(scratch.0, &format!("tensor-{index}"), &plan)));
        let mut step = 0u64;
        let label = format!("{name} (to buckets)");
        permute::distribute(path, p.offset, &perm.to_internal, &plan, &buckets, &mut |read| {
            if read / (64 << 20) > step {
                step = read / (64 << 20);
                progress(&label, read, total);
            }
        })?;
        let mut placed = permute::Placed::new(plan, &perm.to_external, buckets);
        write_tensor(vol, p.meta.start_page, index, EPOCH, |buf| {
            let n = placed.fill(buf)?;
            done.add(n);
            Ok(n)
        })?;
        return Ok(());
    }
    if let Some(rows) = order.map(|p| &p.to_external[..]) {
        let mut g = Gather { rows, row_bytes: rb, next: 0, buf: Vec::new(), at: 0 };
        match p.data {
            TensorData::Memory { bytes, .. } => {
                write_tensor(vol, p.meta.start_page, index, EPOCH, |buf| {
                    g.fill(buf, |r, out| {
                        out.copy_from_slice(&bytes[r as usize * rb..(r as usize + 1) * rb]);
                        Ok(())
                    })
                })?;
            }
            TensorData::Npy(path) => {
                use std::os::unix::fs::FileExt;
                let f = std::fs::File::open(path).map_err(file_err(path))?;
                write_tensor(vol, p.meta.start_page, index, EPOCH, |buf| {
                    let n = g.fill(buf, |r, out| f.read_exact_at(out, p.offset + r * rb as u64).map_err(file_err(path)))?;
                    done.add(n);
                    Ok(n)
                })?;
            }
        }
        return Ok(());
    }
    match p.data {
        TensorData::Memory { bytes, .. } => {
            write_tensor(vol, p.meta.start_page, index, EPOCH, |buf| {
                let at = done.bytes as usize;
                let n = buf.len().min(bytes.len() - at);
                buf[..n].copy_from_slice(&bytes[at..at + n]);
                done.bytes += n as u64;
                Ok(n)
            })?;
        }
        TensorData::Npy(path) => {
            use std::io::{Seek, SeekFrom};
            let mut f = std::fs::File::open(path).map_err(file_err(path))?;
            f.seek(SeekFrom::Start(p.offset)).map_err(file_err(path))?;
            let mut r = std::io::BufReader::with_capacity(1 << 20, f);
            write_tensor(vol, p.meta.start_page, index, EPOCH, |buf| {
                let want = buf.len().min((total - done.bytes) as usize);
                let n = r.read(&mut buf[..want]).map_err(file_err(path))?;
                if n == 0 && want > 0 {
                    return Err(StoreError::BadInput { path: path.clone(), reason: "file ended before its tensor data".into() });
                }
                done.add(n);
                Ok(n)
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tables written page by page read back as the words, at lengths
    /// around page boundaries, with the pages `encode_table` makes.
    #[test]
    fn tables_written_page_by_page_are_the_whole_encoding() {
        let dir = tempfile::tempdir().unwrap();
        let ps = 4096;
        let per = page::table_words_per_page(ps) as u64;
        for len in [0, 1, per - 1, per, per + 1, 3 * per + 5] {
            let p = dir.path().join(format!("t{len}"));
            let vol = Volume::create(std::slice::from_ref(&p), 2, VolumeOptions { page_size: ps, writable: true, ..Default::default() }).unwrap();
            let words: Vec<u64> = (0..len).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
            let t = write_table_from(&vol, len, words.iter().copied(), 7).unwrap();
            assert_eq!((t.start, t.pages, t.words), (7, page::table_pages(len as usize, ps), len));
            let mut want = vec![0u8; t.pages as usize * ps];
            page::encode_table(&words, ps, 7, EPOCH, &mut want);
            let mut back = Vec::new();
            for i in 0..t.pages {
                let got = vol.read(&[7 + i]).unwrap();
                assert_eq!(got.page(0), &want[i as usize * ps..(i as usize + 1) * ps], "len {len}, page {i}");
                page::decode_table(7 + i, got.page(0), i, &mut back).unwrap();
            }
            assert_eq!(back, words);
        }
    }

    #[test]
    fn degree_words_pack_two_to_a_word() {
        let ranges = vec![vec![1, 2, 3], vec![4, 5]];
        let (len, words) = degree_words(&ranges);
        assert_eq!(len, 3);
        assert_eq!(words.collect::<Vec<_>>(), vec![1 | 2 << 32, 3 | 4 << 32, 5]);
        let (len, words) = degree_words(&ranges[1..]);
        assert_eq!((len, words.collect::<Vec<_>>()), (1, vec![4 | 5 << 32]));
    }
}
