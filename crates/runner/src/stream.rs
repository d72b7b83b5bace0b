//! A large full-neighbourhood request in one pass: its reach is expanded
//! once for all targets (lists of hops below the model's reach), then the
//! rows within reach are read once, in page order, in chunks, and each
//! chunk is projected by the first layer's weights as it arrives, so the
//! request holds `hidden` floats per node within reach rather than its raw
//! rows. GCN's degrees of the whole reach come from one read of the reach's
//! lists in store order (counted, not kept). The model then runs once on
//! per-layer blocks (layer l's destinations are the nodes within
//! `reach - 1 - l` hops): no node is computed that no target reads.
//!
//! Projection first is exact for a linear first layer: a GEMM on the input
//! (`x W^T + b`), and a sum or mean aggregation (with or without GCN's
//! normalisation or edge weights) or `slice_dst` of the input whose only
//! reader is a GEMM (`agg(x) W^T + b = agg(x W^T) + b`). [`Projection::of`]
//! rewrites the DFG so that it reads the projected rows as its inputs; a
//! model with any other reader of its input is not streamed.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};

use solidgraph_engine::EngineError;
use solidgraph_engine::infer_hood::full_neighbourhood;
use solidgraph_store::page::{self, HEADER, Kind};
use solidgraph_store::{DType, Direction, Store, StoreError, tensor};

use crate::block::{Block, SrcDegrees};
use crate::cost::{Choice, Costs, Request, choose};
use crate::dfg::{Dfg, InputSpec, Node, Norm, Op, Reduce, SelfLoops};
use crate::error::{Result, RunnerError};
use crate::kernels::cpu::gemm;
use crate::model::Model;
use crate::reach::Reach;
use crate::registry::Registry;
use crate::tensor::Tensor;
use crate::weights::Weight;

/// Rows read per chunk at most (8 MiB of 512-float rows), and chunks read
/// at once: one gather keeps at most the volume's in-flight cap of I/Os
/// and waits for its slowest, so several keep the device's queue full.
const MAX_CHUNK_ROWS: usize = 4096;
const READERS: usize = 4;
/// A degree part's lists: at most this many vertices or 4 KiB pages per read.
const PART_VERTICES: usize = 16384;
const PART_PAGES: usize = 4096;

/// A model rewritten to read its first layer's projections of its input.
pub struct Projection {
    /// The rewritten model: its inputs are the projections, in order.
    model: Model,
    /// Per input of the rewritten model, its projection weights
    /// (`[width, input width]`).
    weights: Vec<Tensor>,
    /// The input's width.
    cols: usize,
    /// Per input of the rewritten model: its name, width, and the block whose
    /// destinations alone it is read for (`slice_dst`), if any.
    inputs: Vec<Projected>,
}

#[derive(Debug, Clone)]
struct Projected {
    name: String,
    weight: String,
    cols: usize,
    dst_of: Option<usize>,
}

impl Projection {
    /// The rewrite of `model` (see the module docs), or None when its input
    /// has a reader that is not linear, when it has more than one input, or
    /// when the projections are not narrower than the input.
    pub fn of(model: &Model) -> Result<Option<Projection>> {
        let dfg = model.dfg();
        let Some((ops, mut inputs)) = rewrite(dfg) else { return Ok(None) };
        let cols = dfg.inputs[0].cols;
        for p in &mut inputs {
            p.cols = dfg.weights[&p.weight][0];
        }
        let width: usize = inputs.iter().map(|p| p.cols).sum();
        if width >= cols {
            return Ok(None);
        }
        let mut declared = dfg.weights.clone();
        let read: Vec<&str> = ops.iter().flat_map(|n| n.op.operands()).collect();
        declared.retain(|name, _| read.contains(&name.as_str()));
        let specs = inputs.iter().map(|p| InputSpec { name: p.name.clone(), cols: p.cols }).collect();
        let new = Dfg { inputs: specs, weights: declared.clone(), ops, ..dfg.clone() };
        let values: BTreeMap<String, Weight> = declared.iter().map(|(name, shape)| Ok((name.clone(), weight(model, name, shape)?))).collect::<Result<_>>()?;
        let rewritten = Model::from_parts(new, &values, &Registry::with_builtin())?;
        let weights = inputs.iter().map(|p| Ok(Tensor::new(p.cols, cols, weight(model, &p.weight, &dfg.weights[&p.weight])?.data))).collect::<Result<_>>()?;
        Ok(Some(Projection { model: rewritten, weights, cols, inputs }))
    }

    /// Floats held per node within reach (at most).
    pub fn width(&self) -> usize {
        self.weights.iter().map(|w| w.rows).sum()
    }
}

/// Weight `name` of `model` in its declared shape.
fn weight(model: &Model, name: &str, shape: &[usize]) -> Result<Weight> {
    let slot =
        model.plan().weight_names.iter().position(|n| n == name).ok_or_else(|| RunnerError::Invalid(format!("weight {name:?} is not in the model's plan")))?;
    Ok(Weight::new(shape.to_vec(), model.weight(slot).data.clone()))
}

/// The DFG's ops reading projections of its single input, and those
/// projections (widths filled by the caller); None when that is not exact.
/// A GEMM on the input without a bias becomes the input it writes (no op,
/// no copy); an aggregation or `slice_dst` read only by a GEMM writes that
/// GEMM's value from a projected input, plus its bias.
fn rewrite(dfg: &Dfg) -> Option<(Vec<Node>, Vec<Projected>)> {
    if dfg.inputs.len() != 1 || dfg.output == dfg.inputs[0].name || mixes_source_rows(dfg) {
        return None;
    }
    let x = dfg.inputs[0].name.as_str();
    let readers = |name: &str| -> Vec<usize> { (0..dfg.ops.len()).filter(|&i| dfg.ops[i].op.operands().contains(&name)).collect() };
    let mut ops: Vec<Option<Node>> = dfg.ops.iter().cloned().map(Some).collect();
    let mut inputs: Vec<Projected> = Vec::new();
    let mut fresh = |weight: &str, dst_of: Option<usize>, name: Option<String>| -> String {
        let name = name.unwrap_or_else(|| format!("__projected_{}", inputs.len()));
        inputs.push(Projected { name: name.clone(), weight: weight.to_string(), cols: 0, dst_of });
        name
    };
    for i in readers(x) {
        let node = &dfg.ops[i];
        match &node.op {
            Op::Gemm { x: gx, weight, bias } if gx == x && weight != x && bias.as_deref() != Some(x) => match bias {
                Some(b) => {
                    let p = fresh(weight, None, None);
                    ops[i] = Some(Node { op: Op::Add { a: p, b: b.clone() }, out: node.out.clone() });
                }
                None => {
                    fresh(weight, None, Some(node.out.clone()));
                    ops[i] = None;
                }
            },
            Op::Spmm { x: sx, reduce: Reduce::Sum | Reduce::Mean, edge_values: None, .. } | Op::SliceDst { x: sx, .. } if sx == x => {
                let after = readers(&node.out);
                let [j] = after[..] else { return None };
                let Op::Gemm { x: gx, weight, bias } = &dfg.ops[j].op else { return None };
                if gx != &node.out || weight == &node.out || bias.as_deref() == Some(&node.out) || dfg.output == node.out {
                    return None;
                }
                let dst_of = match node.op {
                    Op::SliceDst { block, .. } => Some(block),
                    _ => None,
                };
                let p = fresh(weight, dst_of, None);
                let op = match &node.op {
                    Op::Spmm { block, reduce, norm, self_loops, edge_weight, .. } => {
                        Op::Spmm { x: p, block: *block, reduce: *reduce, norm: *norm, self_loops: *self_loops, edge_weight: *edge_weight, edge_values: None }
                    }
                    Op::SliceDst { block, .. } => Op::SliceDst { x: p, block: *block },
                    _ => unreachable!("matched above"),
                };
                let out = dfg.ops[j].out.clone();
                match bias {
                    Some(b) => {
                        ops[i] = Some(Node { op, out: node.out.clone() });
                        ops[j] = Some(Node { op: Op::Add { a: node.out.clone(), b: b.clone() }, out });
                    }
                    None => {
                        ops[i] = Some(Node { op, out });
                        ops[j] = None;
                    }
                }
            }
            _ => return None,
        }
    }
    Some((ops.into_iter().flatten().collect(), inputs))
}

/// Whether a value computed node-wise from the input (through GEMMs and
/// activations, before any aggregation or `slice_dst`) meets another value
/// in an add, mul or concat (a residual such as `x + conv(x)`). Such a
/// value has a row per source of the streamed blocks, not the rows the
/// batched path gives it, so the model runs batched.
fn mixes_source_rows(dfg: &Dfg) -> bool {
    let mut source_rowed: Vec<&str> = vec![dfg.inputs[0].name.as_str()];
    for node in &dfg.ops {
        if !node.op.operands().iter().any(|o| source_rowed.contains(o)) {
            continue;
        }
        match &node.op {
            Op::Add { .. } | Op::Mul { .. } | Op::Concat { .. } => return true,
            Op::Spmm { .. } | Op::SpmmGemm { .. } | Op::SliceDst { .. } | Op::Sddmm { .. } | Op::EdgeSoftmax { .. } => {}
            _ => source_rowed.push(node.out.as_str()),
        }
    }
    false
}

/// What a streamed request read and held, and where its time went.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StreamReport {
    /// Nodes within the model's reach (rows read once each) and the edges into the inner hops.
    pub nodes: usize,
    pub edges: usize,
    /// Bytes of projected rows held.
    pub projected_bytes: usize,
    /// Microseconds expanding the reach (list reads), reading and projecting
    /// its rows (with the degree reads beside them), and running the model.
    pub expand_us: u64,
    pub rows_us: u64,
    pub model_us: u64,
    /// CPU microseconds of the process in each of those steps (all threads).
    pub expand_cpu_us: u64,
    pub rows_cpu_us: u64,
    pub model_cpu_us: u64,
    /// Within the rows step, summed over the reader threads: waiting for
    /// the volume (or the store's gather), checking pages and copying rows
    /// out of them, and projecting; and the degree thread's wall time.
    pub read_us: u64,
    pub copy_us: u64,
    pub gemm_us: u64,
    pub degree_us: u64,
    /// What the rows step (rows and degree lists) read from the volume.
    pub bytes_read: u64,
    pub ios: u64,
    /// Whether the rows came straight off the volume (not the store's caches).
    pub direct: bool,
    /// The cost model's estimates, when it chose (None: the stream was forced).
    pub choice: Option<Choice>,
}

/// What [`run_stream`] did.
pub enum Streamed {
    /// One row per distinct target (first-occurrence order), those targets, and the report.
    Ran(Tensor, Vec<u64>, StreamReport),
    /// Not streamed: the model or the budget does not allow it (None) or the
    /// cost model found batches cheaper.
    Declined(Option<Choice>),
}

/// Whether [`run_stream`] asks the cost model, and with which costs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Policy {
    /// Stream whenever the model and budget allow.
    Always,
    /// Stream when the cost model estimates it cheaper than `batches` batches.
    Cheaper { costs: Costs, batches: usize },
}

/// Runs `model` (rewritten as `proj`) on the full neighbourhood of
/// `nodes` in one pass; the output has one row per distinct target, in
/// first-occurrence order (the sample's seeds), with the sample's node
/// list. Declined when the projected reach would pass `budget` bytes, or
/// when `policy` asks the cost model and it finds batches cheaper (then
/// the reach's expansion, list reads alone, is the cost of asking).
// The request's parts as infer_nodes_report holds them: a struct would only rename them.
#[allow(clippy::too_many_arguments)]
pub fn run_stream(
    store: &Store,
    model: &Model,
    proj: &Projection,
    nodes: &[u64],
    feature: &str,
    weighted: bool,
    budget: usize,
    policy: Policy,
) -> Result<Streamed> {
    let view = store.view();
    let store: &Store = &view;
    let layers = model.num_blocks();
    let reach = Reach::of(model.dfg());
    if reach.total != layers || reach.inputs.first() != Some(&Some(layers)) || layers == 0 {
        return Ok(Streamed::Declined(None));
    }
    let (t0, c0) = (std::time::Instant::now(), cpu_us());
    let (sample, edge_weights) = full_neighbourhood(store, nodes, layers, &[], weighted)?;
    let (t1, c1) = (std::time::Instant::now(), cpu_us());
    let m = sample.node.len();
    let within = |h: usize| sample.num_sampled_nodes[..=h].iter().sum::<u64>() as usize;
    let held: usize = proj.inputs.iter().map(|p| p.cols * p.dst_of.filter(|&b| b < layers).map_or(m, |b| within(layers - 1 - b))).sum();
    let projected_bytes = held.saturating_mul(4);
    if projected_bytes > budget {
        return Ok(Streamed::Declined(None));
    }
    let mut ids = sample.node.clone();
    store.to_internal(&mut ids).map_err(EngineError::from)?;
    let meta = store.tensor_meta(feature).map_err(EngineError::from)?;
    let choice = match policy {
        Policy::Always => None,
        Policy::Cheaper { costs, batches } => {
            let request = Request { ids: &ids, rows: meta.rows, row_bytes: meta.row_bytes(), payload: tensor::payload(store.page_size()) as u64, batches };
            let choice = choose(&request, &costs);
            if !choice.streams() {
                return Ok(Streamed::Declined(Some(choice)));
            }
            Some(choice)
        }
    };
    let views = sym_views(model);
    let row_bytes = meta.row_bytes() as usize;
    let chunk = (budget / 32 / row_bytes.max(1)).clamp(1, MAX_CHUNK_ROWS);
    let limits: Vec<usize> = proj.inputs.iter().map(|p| p.dst_of.filter(|&b| b < layers).map_or(m, |b| within(layers - 1 - b))).collect();
    let direct = Direct::of(store, feature);
    let source = direct.map_or(Source::Gather(feature), Source::Pages);
    let clock = RowClock::default();
    let before = store.stats();
    let (inputs, degrees, degree_us) = std::thread::scope(|s| {
        let degrees = s.spawn(|| {
            let t = std::time::Instant::now();
            (degrees(store, &ids, &views), t.elapsed().as_micros() as u64)
        });
        let inputs = project_rows(store, proj, &ids, source, chunk, &limits, &clock);
        let (degrees, us) = degrees.join().expect("the degree thread does not panic");
        (inputs, degrees, us)
    });
    let (inputs, degrees) = (inputs?, degrees?);
    let after = store.stats();
    let (t2, c2) = (std::time::Instant::now(), cpu_us());
    let blocks = blocks(&sample, edge_weights.as_deref(), layers, &degrees)?;
    let out = proj.model.run(&blocks, &inputs)?;
    let us = |d: std::time::Duration| d.as_micros() as u64;
    let report = StreamReport {
        nodes: m,
        edges: sample.row.len(),
        projected_bytes,
        expand_us: us(t1 - t0),
        rows_us: us(t2 - t1),
        model_us: us(t2.elapsed()),
        expand_cpu_us: c1.saturating_sub(c0),
        rows_cpu_us: c2.saturating_sub(c1),
        model_cpu_us: cpu_us().saturating_sub(c2),
        read_us: clock.read_us.into_inner(),
        copy_us: clock.copy_us.into_inner(),
        gemm_us: clock.gemm_us.into_inner(),
        degree_us,
        bytes_read: after.bytes_read().saturating_sub(before.bytes_read()),
        ios: after.ios().saturating_sub(before.ios()),
        direct: direct.is_some(),
        choice,
    };
    let seeds = sample.num_sampled_nodes[0] as usize;
    debug_assert_eq!(out.rows, seeds, "the last layer's destinations are the targets");
    let mut node = sample.node;
    node.truncate(seeds);
    Ok(Streamed::Ran(out, node, report))
}

/// CPU microseconds this process has spent (user + system, all threads),
/// from /proc/self/stat (in clock ticks of 10 ms); 0 where it is not readable.
fn cpu_us() -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return 0 };
    // The command name may hold spaces; the fields after it start at ')'.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else { return 0 };
    let fields: Vec<&str> = rest.split(' ').collect();
    let tick = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime: fields 14 and 15 of the line, 11 and 12 after the name.
    (tick(11) + tick(12)) * 10_000
}

/// The (self-loops, weighted) views whose degrees GCN's normalisation reads.
fn sym_views(model: &Model) -> Vec<(SelfLoops, bool)> {
    let mut views = Vec::new();
    for step in &model.plan().steps {
        if let Some((_, loops, w, Norm::Sym)) = step.op.edges()
            && !views.contains(&(loops, w))
        {
            views.push((loops, w));
        }
    }
    views
}

/// Every node's whole-graph weighted in-degree per view, as [`Block::view`]
/// counts it (`add_remaining_self_loops`: loops dropped, one added, weighted
/// as the last dropped loop or 1): lists read in store order, in parts, and
/// only counted.
fn degrees(store: &Store, ids: &[u64], views: &[(SelfLoops, bool)]) -> Result<SrcDegrees> {
    let mut out: SrcDegrees = views.iter().map(|&v| (v, vec![0f32; ids.len()])).collect();
    if views.is_empty() {
        return Ok(out);
    }
    let weighted = views.iter().any(|v| v.1);
    let gtt = store.gtt(Direction::In).map_err(EngineError::from)?;
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_unstable_by_key(|&i| ids[i]);
    let mut lo = 0;
    let mut part = Vec::new();
    while lo < order.len() {
        let (mut hi, mut pages) = (lo, 0);
        while hi < order.len() && hi - lo < PART_VERTICES && (hi == lo || pages < PART_PAGES) {
            pages += gtt.list_pages(ids[order[hi]]);
            hi += 1;
        }
        part.clear();
        part.extend(order[lo..hi].iter().map(|&i| ids[i]));
        let csr = store.neighbors(&part, Direction::In, weighted, false).map_err(EngineError::from)?;
        for (j, &i) in order[lo..hi].iter().enumerate() {
            let (a, b) = (csr.indptr[j] as usize, csr.indptr[j + 1] as usize);
            let list = &csr.indices[a..b];
            let w = csr.weights.as_ref().map(|w| &w[a..b]);
            for ((loops, use_w), deg) in out.iter_mut() {
                deg[i] = degree(ids[i], list, w.filter(|_| *use_w), *loops);
            }
        }
        lo = hi;
    }
    Ok(out)
}

/// One node's degree in a view, summed in the view's edge order.
fn degree(v: u64, list: &[u64], w: Option<&[f32]>, loops: SelfLoops) -> f32 {
    let weight = |e: usize| w.map_or(1.0, |w| w[e]);
    match loops {
        SelfLoops::None => (0..list.len()).map(weight).sum(),
        SelfLoops::Add => {
            let mut loop_weight = 1.0;
            let mut coef = Vec::with_capacity(list.len() + 1);
            for (e, &u) in list.iter().enumerate() {
                if u == v {
                    loop_weight = weight(e);
                } else {
                    coef.push(weight(e));
                }
            }
            coef.push(loop_weight);
            coef.iter().sum()
        }
    }
}

/// Where the stream's readers take rows from: the tensor's pages straight
/// off the volume when that equals the store's gather (f32 rows, no page
/// moved by a merge, no update pending), else the store's gather.
#[derive(Clone, Copy)]
enum Source<'a> {
    Pages(Direct),
    Gather(&'a str),
}

/// A tensor read page by page from the volume, bypassing the page and row
/// caches: a one-pass read of rows in store order gains nothing from them
/// and pays a copy, an allocation and an insertion per page.
#[derive(Clone, Copy)]
struct Direct {
    ti: u64,
    start_page: u64,
    pages: u64,
    rows: u64,
    row_bytes: u64,
    page_size: usize,
    epoch: u64,
}

impl Direct {
    fn of(store: &Store, feature: &str) -> Option<Direct> {
        let sb = store.superblock();
        if store.pending_updates() != 0 || sb.tensor_map.words != 0 {
            return None;
        }
        let ti = sb.tensors.iter().position(|t| t.name == feature)?;
        let t = &sb.tensors[ti];
        if t.dtype != DType::F32 || t.rows == 0 {
            return None;
        }
        let page_size = store.page_size();
        debug_assert_eq!(t.pages, tensor::pages_for(t.rows, t.row_bytes(), page_size), "an unmoved tensor's pages hold its rows");
        Some(Direct { ti: ti as u64, start_page: t.start_page, pages: t.pages, rows: t.rows, row_bytes: t.row_bytes(), page_size, epoch: sb.epoch })
    }

    /// Rows `ids` (ascending) into `x` (row-major f32; rows past the
    /// tensor's stay zero, as the gather leaves them): each page read once in
    /// one volume batch (which merges near pages into large reads), every
    /// page's checksum, kind, place and epoch checked. Returns the
    /// microseconds reading and copying.
    fn read(&self, store: &Store, ids: &[u64], x: &mut [f32]) -> Result<(u64, u64)> {
        let t0 = std::time::Instant::now();
        debug_assert!(ids.is_sorted(), "a part's rows are in store order");
        let (rb, ps) = (self.row_bytes, self.page_size);
        let pl = tensor::payload(ps) as u64;
        let mut index: Vec<u64> = Vec::with_capacity(ids.len() + 1);
        for &r in ids.iter().filter(|&&r| r < self.rows) {
            for k in tensor::row_pages(r, rb, ps) {
                if index.last() != Some(&k) {
                    index.push(k);
                }
            }
        }
        if let Some(&k) = index.iter().find(|&&k| k >= self.pages) {
            return Err(StoreError::Corrupt { page: self.start_page, reason: format!("tensor page {k} past its {} pages", self.pages) }.into());
        }
        let pages: Vec<u64> = index.iter().map(|k| self.start_page + k).collect();
        let got = store.volume().read(&pages).map_err(StoreError::from)?;
        let t1 = std::time::Instant::now();
        for (i, &pno) in pages.iter().enumerate() {
            let h = page::open_kind(pno, got.page(i), Kind::Tensor)?;
            if h.epoch > self.epoch {
                return Err(StoreError::Stale { page: pno, epoch: self.epoch, found: h.epoch }.into());
            }
            if h.aux as u64 != index[i] & u32::MAX as u64 || h.key != self.ti {
                return Err(StoreError::Corrupt { page: pno, reason: "tensor page out of place".into() }.into());
            }
        }
        let cols = rb as usize / 4;
        let mut j = 0;
        for (r, &id) in ids.iter().enumerate() {
            if id >= self.rows {
                continue;
            }
            let (mut off, end) = (id * rb, (id + 1) * rb);
            let mut o = r * cols;
            while off < end {
                let k = off / pl;
                while index[j] < k {
                    j += 1;
                }
                let pg = got.page(j);
                let at = HEADER + (off % pl) as usize;
                let n = (pl - off % pl).min(end - off) as usize;
                debug_assert!(n.is_multiple_of(4), "payloads and f32 rows are whole floats");
                for (d, b) in x[o..o + n / 4].iter_mut().zip(pg[at..at + n].chunks_exact(4)) {
                    *d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
                o += n / 4;
                off += n as u64;
            }
        }
        let us = |d: std::time::Duration| d.as_micros() as u64;
        Ok((us(t1 - t0), us(t1.elapsed())))
    }
}

/// Microseconds spent in each part of reading and projecting the reach's
/// rows, summed over the threads that spent them.
#[derive(Default)]
struct RowClock {
    read_us: AtomicU64,
    copy_us: AtomicU64,
    gemm_us: AtomicU64,
}

/// One part's projections: per input, the rows of the part's nodes that
/// input is kept for, in part order.
type PartProjection = (usize, Result<Vec<Tensor>>);

/// The projected rows of every node (local order), read in store order in
/// chunks of `chunk` rows by `READERS` threads, each of which also projects
/// its chunk; this one places the projections.
/// An input read only for its first `limits[k]` rows (a `slice_dst`'s
/// destinations) is projected and written only there: its other rows stay
/// zero pages, never touched, so never resident.
fn project_rows(
    store: &Store,
    proj: &Projection,
    ids: &[u64],
    source: Source<'_>,
    chunk: usize,
    limits: &[usize],
    clock: &RowClock,
) -> Result<HashMap<String, Tensor>> {
    let m = ids.len();
    let mut outs: Vec<Tensor> = proj.inputs.iter().map(|p| Tensor::zeros(m, p.cols)).collect();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_unstable_by_key(|&i| ids[i]);
    let parts: Vec<&[usize]> = order.chunks(chunk).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<PartProjection>(READERS);
        for _ in 0..READERS.min(parts.len()) {
            let (tx, next, parts) = (tx.clone(), &next, &parts);
            s.spawn(move || {
                loop {
                    let p = next.fetch_add(1, Ordering::Relaxed);
                    let Some(part) = parts.get(p) else { break };
                    let projected = project_part(store, proj, ids, part, source, limits, clock);
                    let failed = projected.is_err();
                    if tx.send((p, projected)).is_err() || failed {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for _ in 0..parts.len() {
            let (p, projected) = rx.recv().map_err(|_| RunnerError::Invalid("the reach's rows were not read".into()))?;
            let projected = projected?;
            for ((out, &limit), y) in outs.iter_mut().zip(limits).zip(&projected) {
                for (r, &i) in parts[p].iter().filter(|&&i| i < limit).enumerate() {
                    out.row_mut(i).copy_from_slice(y.row(r));
                }
            }
        }
        Ok(())
    })?;
    Ok(proj.inputs.iter().zip(outs).map(|(p, t)| (p.name.clone(), t)).collect())
}

/// Reads one part's rows and projects them by each input's weights, only
/// for the rows that input is kept for (SAGE's root weights: the
/// destinations alone).
fn project_part(store: &Store, proj: &Projection, ids: &[u64], part: &[usize], source: Source<'_>, limits: &[usize], clock: &RowClock) -> Result<Vec<Tensor>> {
    let cols = proj.cols;
    let want: Vec<u64> = part.iter().map(|&i| ids[i]).collect();
    let x = match source {
        Source::Pages(d) => {
            let mut x = Tensor::zeros(part.len(), cols);
            let (read, copy) = d.read(store, &want, &mut x.data)?;
            clock.read_us.fetch_add(read, Ordering::Relaxed);
            clock.copy_us.fetch_add(copy, Ordering::Relaxed);
            x
        }
        Source::Gather(feature) => {
            let t0 = std::time::Instant::now();
            let rows = store.tensor(feature, &want).map_err(EngineError::from)?;
            let t1 = std::time::Instant::now();
            let x = Tensor::from_rows(feature, &rows)?;
            clock.read_us.fetch_add((t1 - t0).as_micros() as u64, Ordering::Relaxed);
            clock.copy_us.fetch_add(t1.elapsed().as_micros() as u64, Ordering::Relaxed);
            if x.rows != part.len() || x.cols != cols {
                return Err(RunnerError::Input {
                    name: feature.into(),
                    message: format!("{} rows of {} columns for {} nodes of {cols}", x.rows, x.cols, part.len()),
                });
            }
            x
        }
    };
    let t0 = std::time::Instant::now();
    let mut out = Vec::with_capacity(proj.inputs.len());
    for (w, &limit) in proj.weights.iter().zip(limits) {
        let keep: Vec<usize> = (0..part.len()).filter(|&r| part[r] < limit).collect();
        if keep.len() == part.len() {
            out.push(gemm(&x, w, None));
            continue;
        }
        let mut sub = Tensor::zeros(keep.len(), cols);
        for (j, &r) in keep.iter().enumerate() {
            sub.row_mut(j).copy_from_slice(x.row(r));
        }
        out.push(gemm(&sub, w, None));
    }
    clock.gemm_us.fetch_add(t0.elapsed().as_micros() as u64, Ordering::Relaxed);
    Ok(out)
}

/// Layer l's block: destinations the nodes within `layers - 1 - l` hops,
/// sources one hop further, every edge into a destination (a prefix of the
/// sample's edges, which are in hop order), each source's whole-graph degrees.
fn blocks(sample: &solidgraph_engine::sampler::Sample, weights: Option<&[f32]>, layers: usize, degrees: &SrcDegrees) -> Result<Vec<Block>> {
    let within = |h: usize| sample.num_sampled_nodes[..=h].iter().sum::<u64>() as usize;
    (0..layers)
        .map(|l| {
            let (n_dst, n_src) = (within(layers - 1 - l), within(layers - l));
            let e = sample.num_sampled_edges[..layers - l].iter().sum::<u64>() as usize;
            debug_assert!(sample.col[..e].iter().all(|&c| (c as usize) < n_dst), "edges into the inner hops come first");
            let block = Block::from_edges(n_dst, n_src, &sample.row[..e], &sample.col[..e], weights.map(|w| &w[..e]))?;
            if degrees.is_empty() {
                return Ok(block);
            }
            block.with_degrees(degrees.iter().map(|(k, d)| (*k, d[..n_src].to_vec())).collect())
        })
        .collect()
}
