//! Whole-graph inference layer by layer (`infer_all`): every node's output
//! row, for graphs whose features and hidden rows do not fit in memory.
//!
//! The plan is cut into *levels*. An op reading a block's edges (`spmm`,
//! `spmm_gemm`, `sddmm`) runs one level above the rows it aggregates; other
//! ops run as late as their readers allow (so a `slice_dst` or a bias add is
//! not written out), except that the source rows of an aggregation must be
//! written a level before. Level 0 holds the ops over the input tensors only
//! (GCN's first `x W`). Each level is one pass over the vertices in store
//! order, in chunks: a chunk's in-lists come from one batched range read
//! ([`Store::read_range`]), the lower levels' rows of its sources from the
//! store (inputs) or from row files ([`crate::rowfile`]), and the level's
//! ops run on the chunk as a block whose destinations are the chunk. The
//! values a higher level reads are appended, in vertex order, to that
//! level's row files. GCN's normalisation takes every source's whole-graph
//! degree, computed by one pass over the in-lists first.
//!
//! Files live in `STORE/infer/NAME/`: `L{level}-v{value}.rows` (+ `.crc`),
//! the output `out.rows` (+ `.crc`; in the user's id order: on a store that
//! renumbered its vertices, one more pass reorders the last level's rows),
//! and `manifest.json`, which records the
//! model's and the store's fingerprints and each finished level's files with
//! the CRC of their checksum tables, itself checksummed. A level's files are
//! synced before the manifest names them (written to a temporary file,
//! synced, renamed): a restarted call with the same model and store skips
//! the levels the manifest lists; another model or a changed store starts
//! over. Intermediate files are removed once the output is complete.
//!
//! A level whose edge ops are all linear aggregations runs by pushing
//! instead ([`push`]): the lower level's rows are read once per destination
//! range, in source order, and scattered into the destinations'
//! accumulators; the pull path above reads a source's row once per chunk
//! that has an edge from it.

mod push;

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use solidgraph_engine::EngineError;
use solidgraph_store::{ChunkLimit, Csr, DType, Direction, Store};

use crate::block::{Block, SrcDegrees};
use crate::dfg::{Norm, Op, SelfLoops};
use crate::error::{Result, RunnerError};
use crate::infer::check_features;
use crate::kernels::Args;
use crate::model::Model;
use crate::plan::{Kind, Slot, Step, check_rows};
use crate::rowfile::{RowReader, RowWriter, crc_path};
use crate::tensor::Tensor;

const MANIFEST: &str = "manifest.json";
const OUT: &str = "out.rows";
const MANIFEST_FORMAT: &str = "solidgraph-infer-all";
const MANIFEST_VERSION: u64 = 1;
/// Longest output name: it names a directory inside the store.
pub const MAX_OUT_NAME: usize = 63;
/// Pages of adjacency one chunk reads at most.
const CHUNK_PAGES: usize = 4096;

/// How [`infer_all`] runs.
#[derive(Clone, Debug)]
pub struct WholeOptions {
    /// The output's name: files go to `STORE/infer/NAME/`.
    pub out: String,
    /// The store's node tensor for each model input, in order.
    pub features: Vec<String>,
    /// Bytes of rows one chunk holds at most (sources' rows, values, edge scores): the memory bound.
    pub chunk_bytes: usize,
    /// Keep the intermediate levels' row files (for inspection) instead of removing them.
    pub keep_intermediate: bool,
    /// Also add the output to the store as node tensor `out` (f32, one row
    /// per node): needs a writable store and a name not in use, both
    /// checked before any work. The row files stay as the scratch.
    pub store_tensor: bool,
    /// Bytes of a lower level's row-file pages a level keeps in memory for
    /// all its chunks: the pages its edges reference most (hub rows, which
    /// every chunk reads). 0: every chunk reads every page it needs. A pushed
    /// level pins nothing and gives this memory to its accumulators.
    pub row_cache_bytes: u64,
    /// Run the levels whose edge ops are all linear aggregations by pushing
    /// (see [`push`]); false: every level pulls per destination chunk.
    pub push: bool,
}

impl Default for WholeOptions {
    fn default() -> Self {
        WholeOptions {
            out: "emb".into(),
            features: vec!["x".into()],
            chunk_bytes: 256 << 20,
            keep_intermediate: false,
            store_tensor: false,
            row_cache_bytes: 256 << 20,
            push: true,
        }
    }
}

/// Where a pass stands, for progress bars.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// The level running (0-based) and how many there are.
    pub level: usize,
    pub levels: usize,
    pub done: u64,
    pub total: u64,
}

/// What one level cost (or that it was skipped on a resumed run).
#[derive(Clone, Debug, Default)]
pub struct LevelReport {
    pub level: usize,
    pub skipped: bool,
    pub seconds: f64,
    /// Bytes the store read (adjacency and input tensor pages).
    pub store_bytes: u64,
    /// Bytes of lower levels' rows the chunks gathered (a row once per chunk that reads it).
    pub row_bytes: u64,
    /// Bytes read from lower levels' row files (pinned pages once, the rest per chunk).
    pub row_read_bytes: u64,
    /// Bytes of row-file pages pinned for the level.
    pub pinned_bytes: u64,
    /// Bytes written to this level's row files.
    pub written_bytes: u64,
    /// Destination ranges of a pushed level (each one pass over the out-lists
    /// and the sources with edges into it); 0: the level pulled.
    pub ranges: u64,
}

#[derive(Clone, Debug)]
pub struct WholeReport {
    /// The output rows, `rows` x `cols` f32 in vertex order from byte 0 (see [`crate::rowfile`]).
    pub path: PathBuf,
    pub rows: u64,
    pub cols: usize,
    /// The degree pass (when the model normalises by degree), then every level.
    pub degree_seconds: f64,
    pub levels: Vec<LevelReport>,
}

/// The plan cut into levels (see the module docs).
#[derive(Debug)]
struct Schedule {
    /// Per plan step, its level.
    level: Vec<usize>,
    levels: usize,
    /// Per level, the values written for higher levels (and the output).
    written: Vec<Vec<usize>>,
    output: usize,
}

fn reads_edges_of_source(op: &Op) -> bool {
    matches!(op, Op::Spmm { .. } | Op::SpmmGemm { .. } | Op::Sddmm { .. })
}

/// Whether operand `pos` of `step` is read per source of the block (all of
/// the chunk's sources) rather than per destination.
fn source_operand(step: &Step, pos: usize) -> bool {
    pos == 0 && reads_edges_of_source(&step.op)
}

fn not_layered(step: &Step, why: &str) -> RunnerError {
    RunnerError::BadOp { index: step.index, op: step.op.name().into(), message: format!("infer_all cannot run it layer by layer: {why}") }
}

fn schedule(model: &Model) -> Result<Schedule> {
    let plan = model.plan();
    let steps = &plan.steps;
    let Slot::Value(output) = plan.output else {
        return Err(RunnerError::Invalid("infer_all: the model's output is an input or a weight, not computed".into()));
    };
    let level_of = |level: &[usize], s: Slot| match s {
        Slot::Input(_) => Some(0),
        Slot::Weight(_) => None,
        Slot::Value(v) => Some(level[v]),
    };
    // As soon as possible.
    let mut level = vec![0usize; steps.len()];
    for (s, step) in steps.iter().enumerate() {
        assert_eq!(step.out, s, "plan values are numbered by step");
        level[s] = step.args.iter().enumerate().filter_map(|(p, &a)| level_of(&level, a).map(|l| l + usize::from(source_operand(step, p)))).max().unwrap_or(0);
    }
    // Node-wise ops as late as their readers allow.
    let levels = level[output] + 1;
    for s in (0..steps.len()).rev() {
        let step = &steps[s];
        let movable = step.info.kind == Kind::Node
            && !reads_edges_of_source(&step.op)
            && step.args.iter().all(|a| !matches!(a, Slot::Value(v) if steps[*v].info.kind != Kind::Node));
        if !movable {
            continue;
        }
        let mut latest = if s == output { Some(levels - 1) } else { None };
        for (c, reader) in steps.iter().enumerate().skip(s + 1) {
            for (p, &a) in reader.args.iter().enumerate() {
                if a == Slot::Value(s) {
                    let l = level[c] - usize::from(source_operand(reader, p));
                    latest = Some(latest.map_or(l, |x: usize| x.min(l)));
                }
            }
        }
        if let Some(l) = latest {
            assert!(l >= level[s], "a reader runs no earlier than what it reads");
            level[s] = l;
        }
    }
    let mut written = vec![Vec::new(); levels];
    for (s, step) in steps.iter().enumerate() {
        if level[s] >= levels {
            return Err(not_layered(step, "it runs after the model's output"));
        }
        for &a in &step.args {
            if let Slot::Value(v) = a {
                if steps[v].info.kind != Kind::Node && level[v] != level[s] {
                    return Err(not_layered(step, "it reads edge scores of another layer"));
                }
                if level[v] < level[s] && !written[level[v]].contains(&v) {
                    written[level[v]].push(v);
                }
            }
        }
    }
    if !written[levels - 1].contains(&output) {
        written[levels - 1].push(output);
    }
    for w in &mut written {
        w.sort_unstable();
    }
    Ok(Schedule { level, levels, written, output })
}

// ---- the manifest -----------------------------------------------------------

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct Fingerprint {
    model: u32,
    nodes: u64,
    edges: u64,
    epoch: u64,
    pending_updates: u64,
    features: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct FileEntry {
    value: usize,
    file: String,
    rows: u64,
    cols: usize,
    table_crc: u32,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
struct Body {
    format: String,
    version: u64,
    fingerprint: Fingerprint,
    /// Levels 0 .. done are complete and their files synced.
    done: usize,
    files: Vec<FileEntry>,
}

#[derive(Serialize, Deserialize)]
struct ManifestFile {
    body: Body,
    crc32c: u32,
}

fn body_crc(b: &Body) -> u32 {
    crc32c::crc32c(serde_json::to_string(b).expect("a manifest serialises").as_bytes())
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RunnerError + '_ {
    move |source| RunnerError::Io { path: path.to_path_buf(), source }
}

/// The manifest in `dir`, None when there is none; a damaged one is an error.
fn read_manifest(dir: &Path) -> Result<Option<Body>> {
    let path = dir.join(MANIFEST);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path)(e)),
    };
    let bad = |message: String| RunnerError::RowFile { path: path.clone(), message };
    let m: ManifestFile = serde_json::from_str(&text).map_err(|e| bad(format!("not an infer_all manifest ({e}); remove the directory to start over")))?;
    if body_crc(&m.body) != m.crc32c || m.body.format != MANIFEST_FORMAT {
        return Err(bad("fails its checksum; remove the directory to start over".into()));
    }
    if m.body.version > MANIFEST_VERSION {
        return Err(bad(format!("version {} is newer than this build's {MANIFEST_VERSION}", m.body.version)));
    }
    Ok(Some(m.body))
}

/// Replaces the manifest atomically: temporary file, sync, rename, sync of the directory.
fn write_manifest(dir: &Path, body: &Body) -> Result<()> {
    let tmp = dir.join("manifest.json.tmp");
    let text = serde_json::to_string_pretty(&ManifestFile { body: body.clone(), crc32c: body_crc(body) }).expect("a manifest serialises");
    let mut f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    f.write_all(text.as_bytes()).map_err(io(&tmp))?;
    f.sync_data().map_err(io(&tmp))?;
    let path = dir.join(MANIFEST);
    std::fs::rename(&tmp, &path).map_err(io(&path))?;
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

/// `STORE/infer/NAME`, the name checked: it becomes a directory name.
pub fn out_dir(store: &Store, name: &str) -> Result<PathBuf> {
    let ok = !name.is_empty()
        && name.len() <= MAX_OUT_NAME
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if !ok {
        return Err(RunnerError::Invalid(format!("output name {name:?} must be 1 to {MAX_OUT_NAME} letters, digits, '_', '-' or '.', not starting with '.'")));
    }
    Ok(store.path().join("infer").join(name))
}

// ---- the passes ---------------------------------------------------------------

/// What the pass over the in-lists before the levels gives.
#[derive(Default)]
struct Degrees {
    /// Per (self-loops, weighted) view a symmetric normalisation uses, every vertex's degree.
    degs: SrcDegrees,
    /// Per vertex, the number of in-lists it is in (what pinning ranks row-file pages by).
    refs: Vec<u32>,
    /// Per vertex, the weight of the last loop in its in-list, 1 if none
    /// (the loop `add_remaining_self_loops` keeps, for pushed levels).
    loop_weights: Vec<f32>,
}

/// Every source's whole-graph degree for each (self-loops, weighted) view
/// of `keys`, with `counts` the in-lists each vertex is in, with `loops` the
/// weight of each vertex's loop, from one pass over the in-lists.
fn degrees(store: &Store, keys: &[(SelfLoops, bool)], counts: bool, want_loops: bool, limit: ChunkLimit) -> Result<Degrees> {
    let n = store.num_nodes() as usize;
    let mut out: SrcDegrees = keys.iter().map(|&k| (k, vec![0f32; n])).collect();
    let mut refs = vec![0u32; if counts { n } else { 0 }];
    let mut loop_weights = vec![1f32; if want_loops { n } else { 0 }];
    if keys.is_empty() && !counts && !want_loops {
        return Ok(Degrees { degs: out, refs, loop_weights });
    }
    let weighted = keys.iter().any(|k| k.1) || want_loops;
    let mut spare = Csr::default();
    for (lo, hi) in store.chunk_ranges(Direction::In, limit).map_err(EngineError::from)? {
        let csr = store.read_range(Direction::In, lo, hi, weighted, false, spare).map_err(EngineError::from)?;
        check_csr(&csr, lo, hi, n as u64)?;
        if counts {
            for &u in &csr.indices {
                refs[u as usize] = refs[u as usize].saturating_add(1);
            }
        }
        for (i, v) in (lo..hi).enumerate() {
            let (a, b) = (csr.indptr[i] as usize, csr.indptr[i + 1] as usize);
            if want_loops && let Some(e) = (a..b).rev().find(|&e| csr.indices[e] == v) {
                loop_weights[v as usize] = csr.weights.as_ref().map_or(1.0, |ws| ws[e]);
            }
            for ((loops, w), deg) in &mut out {
                let coef = |e: usize| if *w { csr.weights.as_ref().map_or(1.0, |ws| ws[e]) } else { 1.0 };
                let mut sum = 0f32;
                let mut loop_weight = 1f32;
                for e in a..b {
                    if *loops == SelfLoops::Add && csr.indices[e] == v {
                        loop_weight = coef(e);
                    } else {
                        sum += coef(e);
                    }
                }
                deg[v as usize] = if *loops == SelfLoops::Add { sum + loop_weight } else { sum };
            }
        }
        spare = csr;
    }
    Ok(Degrees { degs: out, refs, loop_weights })
}

/// Per page of a row file of `cols` f32 columns, how many edge ends its rows
/// are (a row straddling two pages counts for both).
fn page_scores(refs: &[u32], cols: usize) -> Vec<u64> {
    let rb = cols as u64 * 4;
    let page = crate::rowfile::PAGE as u64;
    let mut scores = vec![0u64; (refs.len() as u64 * rb).div_ceil(page) as usize];
    for (u, &c) in refs.iter().enumerate() {
        let (a, b) = (u as u64 * rb / page, ((u as u64 + 1) * rb - 1) / page);
        scores[a as usize] += c as u64;
        if b != a {
            scores[b as usize] += c as u64;
        }
    }
    scores
}

fn check_csr(csr: &Csr, lo: u64, hi: u64, n: u64) -> Result<()> {
    let ok = csr.indptr.len() as u64 == hi - lo + 1 && csr.indptr[0] == 0 && *csr.indptr.last().expect("non-empty") as usize == csr.indices.len();
    if !ok || csr.indices.iter().any(|&u| u >= n) {
        return Err(RunnerError::Invalid(format!("the store's in-lists of vertices {lo}..{hi} do not frame their neighbours")));
    }
    Ok(())
}

/// One chunk's block: destinations `lo..hi` (local ids 0..), then the other
/// sources in id order; `ids` the store id of each local source.
fn chunk_block(csr: &Csr, lo: u64, hi: u64, weighted: bool) -> Result<(Block, Vec<u64>)> {
    let n_dst = (hi - lo) as usize;
    let mut outside: Vec<u64> = csr.indices.iter().copied().filter(|&u| u < lo || u >= hi).collect();
    outside.sort_unstable();
    outside.dedup();
    let local = |u: u64| if (lo..hi).contains(&u) { (u - lo) as u32 } else { (n_dst + outside.binary_search(&u).expect("listed")) as u32 };
    let indices: Vec<u32> = csr.indices.iter().map(|&u| local(u)).collect();
    let indptr: Vec<usize> = csr.indptr.iter().map(|&p| p as usize).collect();
    let weights = if weighted { Some(csr.weights.clone().ok_or_else(|| RunnerError::Invalid("the store returned no edge weights".into()))?) } else { None };
    let block = Block::new(n_dst, n_dst + outside.len(), indptr, indices, weights)?;
    let ids = (lo..hi).chain(outside).collect();
    Ok((block, ids))
}

/// What a level reads of lower levels: per slot, whether per source (else per destination).
fn level_operands(model: &Model, sched: &Schedule, l: usize) -> BTreeMap<SlotKey, bool> {
    let mut need: BTreeMap<SlotKey, bool> = BTreeMap::new();
    for (s, step) in model.plan().steps.iter().enumerate().filter(|(s, _)| sched.level[*s] == l) {
        let _ = s;
        for (p, &a) in step.args.iter().enumerate() {
            let lower = match a {
                Slot::Input(i) => Some(SlotKey::Input(i)),
                Slot::Value(v) if sched.level[v] < l => Some(SlotKey::Value(v)),
                _ => None,
            };
            if let Some(k) = lower {
                *need.entry(k).or_insert(false) |= source_operand(step, p);
            }
        }
    }
    need
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum SlotKey {
    Input(usize),
    Value(usize),
}

/// The rows of lower-level operands for one chunk: all sources where read per source.
struct Loaded {
    src: HashMap<SlotKey, Tensor>,
    dst: HashMap<SlotKey, Tensor>,
}

struct Level<'a> {
    store: &'a Store,
    model: &'a Model,
    sched: &'a Schedule,
    features: &'a [String],
    readers: &'a HashMap<usize, RowReader>,
    l: usize,
    need: BTreeMap<SlotKey, bool>,
    degrees: &'a SrcDegrees,
    row_bytes: u64,
}

impl Level<'_> {
    fn load(&mut self, ids: &[u64], n_dst: usize) -> Result<Loaded> {
        let mut loaded = Loaded { src: HashMap::new(), dst: HashMap::new() };
        for (&k, &per_source) in &self.need {
            let want = if per_source { ids } else { &ids[..n_dst] };
            let t = match k {
                SlotKey::Input(i) => {
                    let rows = self.store.tensor(&self.features[i], want).map_err(EngineError::from)?;
                    Tensor::from_rows(&self.model.inputs()[i].name, &rows)?
                }
                SlotKey::Value(v) => {
                    let t = self.readers[&v].read(want)?;
                    self.row_bytes += (t.data.len() * 4) as u64;
                    t
                }
            };
            if per_source {
                loaded.dst.insert(k, t.head(n_dst));
                loaded.src.insert(k, t);
            } else {
                loaded.dst.insert(k, t);
            }
        }
        Ok(loaded)
    }

    /// Runs the level's steps on one chunk; returns the values it writes out.
    /// `pre`: the rows of aggregations a push pass computed (by step), which
    /// those steps take instead of aggregating (`spmm_gemm` then multiplies them).
    fn run_chunk(&self, block: &Block, loaded: &Loaded, pre: &mut HashMap<usize, Tensor>) -> Result<HashMap<usize, Tensor>> {
        let plan = self.model.plan();
        let blocks = vec![block.clone(); self.model.num_blocks().max(1)];
        let mut values: HashMap<usize, Tensor> = HashMap::new();
        let mut views = HashMap::new();
        for (s, step) in plan.steps.iter().enumerate().filter(|(s, _)| self.sched.level[*s] == self.l) {
            let pushed = match pre.remove(&s) {
                Some(t) if matches!(step.op, Op::Spmm { .. }) => {
                    values.insert(s, t);
                    continue;
                }
                other => other,
            };
            let identity = pushed.as_ref().map(|t| push::identity(t.rows));
            let key = step.op.edges().filter(|_| identity.is_none());
            if let Some(k) = key.filter(|k| !views.contains_key(k)) {
                views.insert(k, blocks[k.0].view(k.1, k.2, k.3));
            }
            let mut x: Vec<&Tensor> = Vec::with_capacity(step.args.len());
            for (p, &a) in step.args.iter().enumerate() {
                let t = match a {
                    _ if p == 0 && pushed.is_some() => pushed.as_ref().expect("checked"),
                    Slot::Weight(w) => self.model.weight(w),
                    Slot::Value(v) if self.sched.level[v] == self.l => &values[&v],
                    Slot::Input(i) => pick(loaded, SlotKey::Input(i), source_operand(step, p)),
                    Slot::Value(v) => pick(loaded, SlotKey::Value(v), source_operand(step, p)),
                };
                x.push(t);
            }
            let edges = identity.as_ref().or(key.map(|k| &views[&k]));
            let blk = step.op.block().map(|b| &blocks[b]);
            let shape = |message| RunnerError::Shape { index: step.index, op: step.op.name().into(), message };
            check_rows(&step.op, &x, blk, edges).map_err(shape)?;
            let kernel = self.model.kernel(s);
            let fail = |message| RunnerError::Kernel { index: step.index, op: step.op.name().into(), kernel: kernel.name().into(), message };
            let out = kernel.run(&step.op, &Args { x: &x, block: blk, edges }).map_err(fail)?;
            if out.cols != step.info.cols {
                return Err(fail(format!("wrote {} columns, the op has {}", out.cols, step.info.cols)));
            }
            values.insert(s, out);
        }
        let mut out = HashMap::new();
        for &v in &self.sched.written[self.l] {
            let t = values.remove(&v).expect("a written value is computed at its level");
            if t.rows != block.n_dst() {
                return Err(not_layered(&plan.steps[v], &format!("it gives {} rows for {} destinations", t.rows, block.n_dst())));
            }
            out.insert(v, t);
        }
        Ok(out)
    }
}

fn pick(loaded: &Loaded, k: SlotKey, per_source: bool) -> &Tensor {
    if per_source { &loaded.src[&k] } else { &loaded.dst[&k] }
}

/// The output goes straight to `out.rows` unless the store renumbered its
/// vertices: then a last pass puts its rows in the user's order.
fn file_name(sched: &Schedule, l: usize, v: usize, reordered: bool) -> String {
    if l + 1 == sched.levels && v == sched.output && !reordered { OUT.into() } else { format!("L{l}-v{v}.rows") }
}

/// `out.rows` in the user's id order from the output in the store's order.
fn reorder(store: &Store, internal: &RowReader, dir: &Path, chunk_bytes: usize, progress: &mut dyn FnMut(Progress), levels: usize) -> Result<FileEntry> {
    let n = store.num_nodes();
    let step = (chunk_bytes / (internal.cols * 4)).max(1) as u64;
    let mut w = RowWriter::create(&dir.join(OUT), internal.cols)?;
    let mut lo = 0;
    while lo < n {
        let hi = (lo + step).min(n);
        let mut ids: Vec<u64> = (lo..hi).collect();
        store.to_internal(&mut ids).map_err(EngineError::from)?;
        w.append(&internal.read(&ids)?)?;
        progress(Progress { level: levels, levels: levels + 1, done: hi, total: n });
        lo = hi;
    }
    let (rows, table_crc) = w.finish()?;
    Ok(FileEntry { value: usize::MAX, file: OUT.into(), rows, cols: internal.cols, table_crc })
}

/// Bytes of f32 one chunk row costs at level `l`: per source, per destination.
fn row_costs(model: &Model, sched: &Schedule, need: &BTreeMap<SlotKey, bool>, l: usize) -> (usize, usize) {
    let plan = model.plan();
    let cols = |k: &SlotKey| match *k {
        SlotKey::Input(i) => model.inputs()[i].cols,
        SlotKey::Value(v) => plan.steps[v].info.cols,
    };
    let per_src: usize = need.iter().filter(|(_, s)| **s).map(|(k, _)| cols(k) * 4).sum::<usize>() + 16;
    let per_dst: usize = need.iter().filter(|(_, s)| !**s).map(|(k, _)| cols(k) * 4).sum::<usize>()
        + plan.steps.iter().enumerate().filter(|(s, _)| sched.level[*s] == l).map(|(_, st)| st.info.cols * 4).sum::<usize>();
    (per_src, per_dst.max(4))
}

/// Runs `model` over every node of `store` layer by layer into
/// `STORE/infer/NAME/out.rows` (see the module docs), resuming a run the
/// manifest records. `progress` is called after each chunk.
pub fn infer_all(store: &Store, model: &Model, o: &WholeOptions, progress: &mut dyn FnMut(Progress)) -> Result<WholeReport> {
    check_features(store, model, &o.features)?;
    if o.chunk_bytes < (1 << 20) {
        return Err(RunnerError::Invalid(format!("chunk_bytes {} is below the minimum of 1 MiB", o.chunk_bytes)));
    }
    if o.store_tensor {
        check_store_tensor(store, &o.out)?;
    }
    let sched = schedule(model)?;
    let plan = model.plan();
    let weighted = plan.steps.iter().any(|s| s.op.edges().is_some_and(|e| e.2));
    if weighted && !store.has_weights() {
        return Err(
            EngineError::Invalid("the model reads edge weights (edge_weight: true), which this store does not have (import with weights)".into()).into()
        );
    }
    let dir = out_dir(store, &o.out)?;
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let fp = Fingerprint {
        model: model.fingerprint(),
        nodes: store.num_nodes(),
        edges: store.num_edges(),
        epoch: store.superblock().epoch,
        pending_updates: store.pending_updates(),
        features: o.features.clone(),
    };
    let mut body = match read_manifest(&dir)? {
        Some(b) if b.fingerprint == fp && b.version == MANIFEST_VERSION => b,
        _ => {
            clear(&dir)?;
            let b = Body { format: MANIFEST_FORMAT.into(), version: MANIFEST_VERSION, fingerprint: fp, done: 0, files: Vec::new() };
            write_manifest(&dir, &b)?;
            b
        }
    };
    let n = store.num_nodes();
    let mut readers: HashMap<usize, RowReader> = HashMap::new();
    for f in &body.files {
        readers.insert(f.value, RowReader::open(&dir.join(&f.file), f.rows, f.cols, f.table_crc)?);
    }
    let mut report = WholeReport { path: dir.join(OUT), rows: n, cols: model.output_cols(), degree_seconds: 0.0, levels: Vec::new() };
    let mut deg = Degrees::default();
    let pushed: Vec<Option<Vec<push::Agg>>> =
        (0..sched.levels).map(|l| if o.push && level_reads_edges(model, &sched, l) { push::aggregations(model, &sched, l) } else { None }).collect();
    // Pinning needs edge counts when a level left to pull gathers a lower level's rows per source.
    let pins = o.row_cache_bytes > 0
        && (body.done..sched.levels)
            .any(|l| pushed[l].is_none() && level_operands(model, &sched, l).iter().any(|(k, &src)| src && matches!(k, SlotKey::Value(_))));
    let loops = (body.done..sched.levels).any(|l| pushed[l].as_deref().is_some_and(push::weighted_loops));
    if body.done < sched.levels {
        let keys: Vec<(SelfLoops, bool)> = plan
            .steps
            .iter()
            .enumerate()
            .filter(|(s, _)| sched.level[*s] >= body.done)
            .filter_map(|(_, st)| st.op.edges().filter(|e| e.3 == Norm::Sym).map(|e| (e.1, e.2)))
            .fold(Vec::new(), |mut v, k| {
                if !v.contains(&k) {
                    v.push(k);
                }
                v
            });
        // The degree arrays are the state sized by the vertex count (4 B a
        // vertex for each key, the pins' counts, the loops' weights): a
        // damaged or hostile count is refused before they are allocated.
        let per_vertex = 4 * (keys.len() as u64 + u64::from(pins) + u64::from(loops));
        solidgraph_engine::state::reserve("infer_all", store, per_vertex, 0)?;
        let t = Instant::now();
        deg = degrees(store, &keys, pins, loops, ChunkLimit { pages: CHUNK_PAGES, edges: 1 << 22, vertices: 1 << 20 })?;
        report.degree_seconds = t.elapsed().as_secs_f64();
    }
    for (l, aggs) in pushed.iter().enumerate() {
        if l < body.done {
            report.levels.push(LevelReport { level: l, skipped: true, ..Default::default() });
            continue;
        }
        // A level starts with a report: a pushed level's first chunk comes after a whole pass.
        progress(Progress { level: l, levels: sched.levels, done: 0, total: n });
        let read0: u64 = readers.values().map(|r| r.read_bytes()).sum();
        let mut pinned_bytes = 0;
        if pins && aggs.is_none() {
            pinned_bytes = pin_sources(model, &sched, l, &mut readers, &deg.refs, o.row_cache_bytes)?;
        }
        let (mut rep, files) = run_level(store, model, &sched, o, &dir, &readers, &deg, aggs.as_deref(), l, progress)?;
        readers.values_mut().for_each(RowReader::unpin);
        rep.row_read_bytes = readers.values().map(|r| r.read_bytes()).sum::<u64>() - read0;
        rep.pinned_bytes = pinned_bytes;
        report.levels.push(rep);
        for f in files {
            readers.insert(f.value, RowReader::open(&dir.join(&f.file), f.rows, f.cols, f.table_crc)?);
            body.files.push(f);
        }
        body.done = l + 1;
        write_manifest(&dir, &body)?;
    }
    let reordered = store.reordered();
    if reordered && !body.files.iter().any(|f| f.file == OUT) {
        let f = reorder(store, &readers[&sched.output], &dir, o.chunk_bytes, progress, sched.levels)?;
        readers.insert(f.value, RowReader::open(&dir.join(&f.file), f.rows, f.cols, f.table_crc)?);
        body.files.push(f);
        write_manifest(&dir, &body)?;
    }
    if !o.keep_intermediate {
        let kept: Vec<FileEntry> = body.files.iter().filter(|f| f.file == OUT).cloned().collect();
        if kept.len() != body.files.len() {
            let removed: Vec<FileEntry> = body.files.iter().filter(|f| f.file != OUT).cloned().collect();
            body.files = kept;
            write_manifest(&dir, &body)?;
            for f in removed {
                let p = dir.join(&f.file);
                let _ = std::fs::remove_file(crc_path(&p));
                let _ = std::fs::remove_file(&p);
            }
        }
    }
    let out = readers.get(&if reordered { usize::MAX } else { sched.output }).expect("the output's reader is open");
    assert_eq!((out.rows, out.cols), (n, report.cols), "the output file holds a row per node");
    // Callers map the file without checks of their own: every page is checked once here.
    out.verify_all()?;
    if o.store_tensor {
        add_output_tensor(store, out, &o.out)?;
    }
    Ok(report)
}

fn check_store_tensor(store: &Store, name: &str) -> Result<()> {
    if !store.writable() {
        return Err(RunnerError::Invalid(format!("writing the output as store tensor {name:?} needs the store opened writable")));
    }
    if store.tensors().iter().any(|t| t.name == name) {
        return Err(RunnerError::Invalid(format!("the store already has a tensor named {name:?}; pick another out_tensor")));
    }
    Ok(())
}

/// Adds `out` (rows in the user's id order) to the store as tensor `name`,
/// rows in the store's order, streamed a bounded chunk at a time.
fn add_output_tensor(store: &Store, out: &RowReader, name: &str) -> Result<()> {
    let cols = out.cols;
    store.add_tensor(name, DType::F32, cols as u64, |first, buf: &mut [u8]| {
        let k = buf.len() / (cols * 4);
        let mut ids: Vec<u64> = (first..first + k as u64).collect();
        store.to_external(&mut ids)?;
        let t = out.read(&ids)?;
        // SAFETY: f32 has no padding; the bytes are viewed, not reinterpreted as another type.
        let bytes = unsafe { std::slice::from_raw_parts(t.data.as_ptr().cast::<u8>(), t.data.len() * 4) };
        buf.copy_from_slice(bytes);
        Ok::<(), RunnerError>(())
    })?;
    Ok(())
}

/// Pins, for level `l`, the most referenced pages of each row file it
/// gathers per source, `budget` bytes shared among them; returns the bytes pinned.
fn pin_sources(model: &Model, sched: &Schedule, l: usize, readers: &mut HashMap<usize, RowReader>, refs: &[u32], budget: u64) -> Result<u64> {
    let values: Vec<usize> = level_operands(model, sched, l)
        .into_iter()
        .filter_map(|(k, src)| match k {
            SlotKey::Value(v) if src => Some(v),
            _ => None,
        })
        .collect();
    let mut pinned = 0;
    for v in &values {
        let r = readers.get_mut(v).expect("a lower level's file is open");
        pinned += r.pin(&page_scores(refs, r.cols), budget / values.len() as u64)?;
    }
    Ok(pinned)
}

/// Removes what a previous run of another model or store left.
fn clear(dir: &Path) -> Result<()> {
    for e in std::fs::read_dir(dir).map_err(io(dir))? {
        let p = e.map_err(io(dir))?.path();
        let ours = p.extension().is_some_and(|x| x == "rows" || x == "crc" || x == "json" || x == "tmp");
        if ours && p.is_file() {
            std::fs::remove_file(&p).map_err(io(&p))?;
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn run_level(
    store: &Store,
    model: &Model,
    sched: &Schedule,
    o: &WholeOptions,
    dir: &Path,
    readers: &HashMap<usize, RowReader>,
    deg: &Degrees,
    aggs: Option<&[push::Agg]>,
    l: usize,
    progress: &mut dyn FnMut(Progress),
) -> Result<(LevelReport, Vec<FileEntry>)> {
    let degs = &deg.degs;
    let t = Instant::now();
    let store_bytes0 = store.stats().bytes_read();
    let n = store.num_nodes();
    let plan = model.plan();
    if !sched.level.contains(&l) {
        return Ok((LevelReport { level: l, ..Default::default() }, Vec::new()));
    }
    let need = level_operands(model, sched, l);
    let (per_src, per_dst) = row_costs(model, sched, &need, l);
    let has_edges = plan.steps.iter().enumerate().any(|(s, st)| sched.level[s] == l && st.op.edges().is_some());
    let weighted = plan.steps.iter().enumerate().any(|(s, st)| sched.level[s] == l && st.op.edges().is_some_and(|e| e.2));
    let budget = o.chunk_bytes as u64;
    let ranges: Vec<(u64, u64)> = if has_edges {
        let limit = ChunkLimit { pages: CHUNK_PAGES, edges: (budget / per_src as u64).max(1), vertices: (budget / (per_dst + per_src) as u64).max(1) };
        store.chunk_ranges(Direction::In, limit).map_err(EngineError::from)?
    } else {
        let step = (budget / per_dst as u64).max(1);
        (0..n.div_ceil(step)).map(|i| (i * step, ((i + 1) * step).min(n))).collect()
    };
    let mut writers: Vec<(usize, RowWriter)> = Vec::new();
    for &v in &sched.written[l] {
        writers.push((v, RowWriter::create(&dir.join(file_name(sched, l, v, store.reordered())), plan.steps[v].info.cols)?));
    }
    if let Some(aggs) = aggs {
        // Per destination, only what the level's other ops read of the lower levels.
        let need = level_operands_at_destinations(model, sched, l);
        let mut lv = Level { store, model, sched, features: &o.features, readers, l, need, degrees: degs, row_bytes: 0 };
        let (ranges, written_bytes) = push::run_level(&mut lv, aggs, &deg.loop_weights, o, &mut writers, progress)?;
        let files = finish_writers(model, sched, store, l, writers)?;
        let rep = LevelReport {
            level: l,
            seconds: t.elapsed().as_secs_f64(),
            store_bytes: store.stats().bytes_read() - store_bytes0,
            row_bytes: lv.row_bytes,
            written_bytes,
            ranges,
            ..Default::default()
        };
        return Ok((rep, files));
    }
    let mut lv = Level { store, model, sched, features: &o.features, readers, l, need, degrees: degs, row_bytes: 0 };
    let mut spare = Csr::default();
    let mut written_bytes = 0u64;
    for (lo, hi) in ranges {
        let (block, ids) = if has_edges {
            let csr = store.read_range(Direction::In, lo, hi, weighted, false, spare).map_err(EngineError::from)?;
            check_csr(&csr, lo, hi, n)?;
            let (block, ids) = chunk_block(&csr, lo, hi, weighted)?;
            spare = csr;
            let local: SrcDegrees = lv.degrees.iter().map(|(k, d)| (*k, ids.iter().map(|&u| d[u as usize]).collect())).collect();
            (if local.is_empty() { block } else { block.with_degrees(local)? }, ids)
        } else {
            let m = (hi - lo) as usize;
            (Block::new(m, m, vec![0; m + 1], Vec::new(), None)?, (lo..hi).collect())
        };
        let loaded = lv.load(&ids, block.n_dst())?;
        let mut out = lv.run_chunk(&block, &loaded, &mut HashMap::new())?;
        for (v, w) in &mut writers {
            let t = out.remove(v).expect("every written value comes out of the chunk");
            written_bytes += (t.data.len() * 4) as u64;
            w.append(&t)?;
        }
        progress(Progress { level: l, levels: sched.levels, done: hi, total: n });
    }
    let files = finish_writers(model, sched, store, l, writers)?;
    let rep = LevelReport {
        level: l,
        skipped: false,
        seconds: t.elapsed().as_secs_f64(),
        store_bytes: store.stats().bytes_read() - store_bytes0,
        row_bytes: lv.row_bytes,
        written_bytes,
        ..Default::default()
    };
    Ok((rep, files))
}

/// Syncs level `l`'s row files and names them for the manifest.
fn finish_writers(model: &Model, sched: &Schedule, store: &Store, l: usize, writers: Vec<(usize, RowWriter)>) -> Result<Vec<FileEntry>> {
    let mut files = Vec::new();
    for (v, w) in writers {
        let (rows, table_crc) = w.finish()?;
        assert_eq!(rows, store.num_nodes(), "a level writes one row per node");
        files.push(FileEntry { value: v, file: file_name(sched, l, v, store.reordered()), rows, cols: model.plan().steps[v].info.cols, table_crc });
    }
    Ok(files)
}

/// Whether a step of level `l` reads edges.
fn level_reads_edges(model: &Model, sched: &Schedule, l: usize) -> bool {
    model.plan().steps.iter().enumerate().any(|(s, st)| sched.level[s] == l && st.op.edges().is_some())
}

/// What level `l` reads of lower levels per destination only (not as an
/// aggregation's sources): what a pushed level's chunks load.
fn level_operands_at_destinations(model: &Model, sched: &Schedule, l: usize) -> BTreeMap<SlotKey, bool> {
    let mut need = BTreeMap::new();
    for step in model.plan().steps.iter().enumerate().filter(|(s, _)| sched.level[*s] == l).map(|(_, st)| st) {
        for (p, &a) in step.args.iter().enumerate() {
            let lower = match a {
                Slot::Input(i) => Some(SlotKey::Input(i)),
                Slot::Value(v) if sched.level[v] < l => Some(SlotKey::Value(v)),
                _ => None,
            };
            if let Some(k) = lower.filter(|_| !source_operand(step, p)) {
                need.insert(k, false);
            }
        }
    }
    need
}
