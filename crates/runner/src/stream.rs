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

use solidgraph_engine::EngineError;
use solidgraph_engine::infer_hood::full_neighbourhood;
use solidgraph_store::{Direction, Store};

use crate::block::{Block, SrcDegrees};
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
    /// The projection weights stacked (`[sum of widths, input width]`).
    stacked: Tensor,
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
        let mut data = Vec::with_capacity(width * cols);
        for p in &inputs {
            data.extend_from_slice(&weight(model, &p.weight, &dfg.weights[&p.weight])?.data);
        }
        Ok(Some(Projection { model: rewritten, stacked: Tensor::new(width, cols, data), inputs }))
    }

    /// Floats held per node within reach (at most).
    pub fn width(&self) -> usize {
        self.stacked.rows
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

/// What a streamed request read and held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
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
}

/// Runs `model` (rewritten as `proj`) on the full neighbourhood of
/// `nodes` in one pass; the output has one row per distinct target, in
/// first-occurrence order (the sample's seeds), with the sample's node
/// list. None when the projected reach would pass `budget` bytes.
pub fn run_stream(
    store: &Store,
    model: &Model,
    proj: &Projection,
    nodes: &[u64],
    feature: &str,
    weighted: bool,
    budget: usize,
) -> Result<Option<(Tensor, Vec<u64>, StreamReport)>> {
    let view = store.view();
    let store: &Store = &view;
    let layers = model.num_blocks();
    let reach = Reach::of(model.dfg());
    if reach.total != layers || reach.inputs.first() != Some(&Some(layers)) || layers == 0 {
        return Ok(None);
    }
    let t0 = std::time::Instant::now();
    let (sample, edge_weights) = full_neighbourhood(store, nodes, layers, &[], weighted)?;
    let t1 = std::time::Instant::now();
    let m = sample.node.len();
    let within = |h: usize| sample.num_sampled_nodes[..=h].iter().sum::<u64>() as usize;
    let held: usize = proj.inputs.iter().map(|p| p.cols * p.dst_of.filter(|&b| b < layers).map_or(m, |b| within(layers - 1 - b))).sum();
    let projected_bytes = held.saturating_mul(4);
    if projected_bytes > budget {
        return Ok(None);
    }
    let mut ids = sample.node.clone();
    store.to_internal(&mut ids).map_err(EngineError::from)?;
    let views = sym_views(model);
    let row_bytes = store.tensor_meta(feature).map_err(EngineError::from)?.row_bytes() as usize;
    let chunk = (budget / 32 / row_bytes.max(1)).clamp(1, MAX_CHUNK_ROWS);
    let limits: Vec<usize> = proj.inputs.iter().map(|p| p.dst_of.filter(|&b| b < layers).map_or(m, |b| within(layers - 1 - b))).collect();
    let (inputs, degrees) = std::thread::scope(|s| {
        let degrees = s.spawn(|| degrees(store, &ids, &views));
        let inputs = project_rows(store, proj, &ids, feature, chunk, &limits);
        (inputs, degrees.join().expect("the degree thread does not panic"))
    });
    let (inputs, degrees) = (inputs?, degrees?);
    let t2 = std::time::Instant::now();
    let blocks = blocks(&sample, edge_weights.as_deref(), layers, &degrees)?;
    let out = proj.model.run(&blocks, &inputs)?;
    let us = |d: std::time::Duration| d.as_micros() as u64;
    let (expand_us, rows_us, model_us) = (us(t1 - t0), us(t2 - t1), us(t2.elapsed()));
    let report = StreamReport { nodes: m, edges: sample.row.len(), projected_bytes, expand_us, rows_us, model_us };
    let seeds = sample.num_sampled_nodes[0] as usize;
    debug_assert_eq!(out.rows, seeds, "the last layer's destinations are the targets");
    let mut node = sample.node;
    node.truncate(seeds);
    Ok(Some((out, node, report)))
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

/// The projected rows of every node (local order), read in store order in
/// chunks of `chunk` rows by `READERS` threads while this one projects the
/// chunks as they arrive.
/// An input read only for its first `limits[k]` rows (a `slice_dst`'s
/// destinations) is written only there: its other rows stay zero pages,
/// never touched, so never resident.
fn project_rows(store: &Store, proj: &Projection, ids: &[u64], feature: &str, chunk: usize, limits: &[usize]) -> Result<HashMap<String, Tensor>> {
    let m = ids.len();
    let mut outs: Vec<Tensor> = proj.inputs.iter().map(|p| Tensor::zeros(m, p.cols)).collect();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_unstable_by_key(|&i| ids[i]);
    let parts: Vec<&[usize]> = order.chunks(chunk).collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel(READERS);
        for _ in 0..READERS.min(parts.len()) {
            let (tx, next, parts) = (tx.clone(), &next, &parts);
            s.spawn(move || {
                loop {
                    let p = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(part) = parts.get(p) else { break };
                    let want: Vec<u64> = part.iter().map(|&i| ids[i]).collect();
                    let rows = store.tensor(feature, &want);
                    let failed = rows.is_err();
                    if tx.send((p, rows)).is_err() || failed {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for _ in 0..parts.len() {
            let (p, rows) = rx.recv().map_err(|_| RunnerError::Invalid("the reach's rows were not read".into()))?;
            let rows = rows.map_err(EngineError::from)?;
            let part = parts[p];
            let x = Tensor::from_rows(feature, &rows)?;
            if x.rows != part.len() || x.cols != proj.stacked.cols {
                return Err(RunnerError::Input {
                    name: feature.into(),
                    message: format!("{} rows of {} columns for {} nodes of {}", x.rows, x.cols, part.len(), proj.stacked.cols),
                });
            }
            let y = gemm(&x, &proj.stacked, None);
            for (r, &i) in part.iter().enumerate() {
                let mut at = 0;
                for (out, &limit) in outs.iter_mut().zip(limits) {
                    let c = out.cols;
                    if i < limit {
                        out.row_mut(i).copy_from_slice(&y.row(r)[at..at + c]);
                    }
                    at += c;
                }
            }
        }
        Ok(())
    })?;
    Ok(proj.inputs.iter().zip(outs).map(|(p, t)| (p.name.clone(), t)).collect())
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
