//! Batched inference over a store: per batch of target
//! nodes, sample (or take the whole k-hop neighbourhood), gather the model's
//! input tensors and run the model; batches are sampled and gathered ahead
//! by the engine's [`Prefetcher`] while the model runs on the current one.
//!
//! Sampled batches follow the runner's trim-free convention (PyG's
//! `model(batch.x, batch.edge_index)[:batch_size]`); batch `i` samples with
//! [`batch_seed`]`(seed, i)`. The full neighbourhood (`fanouts: None`) takes
//! every in-neighbour for as many hops as the model has blocks, plus one
//! hop when an aggregation normalises by degree (`norm: sym`): a node at the
//! last hop then has all its in-edges, so its degree, and every output row,
//! equals full-batch inference over the whole graph.

use std::sync::Arc;

use std::collections::HashMap;

use solidgraph_engine::EngineError;
use solidgraph_engine::infer_hood::{HoodRows, full_neighbourhood};
pub use solidgraph_engine::loader::batch_seed;
use solidgraph_engine::loader::{PrefetchOptions, Prefetcher, Reopen};
use solidgraph_engine::sampler::{Sample, SampleOptions};
use solidgraph_store::{DType, Direction, Store};

use crate::cost::{Choice, Costs};
use crate::dfg::{Norm, Op};
use crate::error::{Result, RunnerError};
use crate::model::Model;
use crate::reach::Reach;
use crate::stream::{Policy, Projection, StreamReport, Streamed, run_stream};
use crate::tensor::Tensor;

/// How [`infer_nodes`] batches and samples.
#[derive(Clone)]
pub struct InferOptions {
    /// Neighbours per node at each hop (-1: all); `None`: the full neighbourhood.
    pub fanouts: Option<Vec<i64>>,
    pub batch_size: usize,
    /// The store's node tensor gathered for each of the model's inputs, in order.
    pub features: Vec<String>,
    pub seed: u64,
    /// Sampling threads and batches sampled ahead (the loader's `workers`, `prefetch`).
    pub workers: usize,
    pub prefetch: usize,
    /// Reopens the store in a forked child (see [`PrefetchOptions::reopen`]).
    pub reopen: Option<Reopen>,
    /// A full-neighbourhood request of more than one batch streams its reach
    /// in one pass ([`crate::stream`]) when its projected rows fit this many
    /// bytes (0: never; the row chunks read ahead take a 32nd of it).
    pub stream_bytes: usize,
    /// Which full-neighbourhood path a request of more than one batch takes
    /// when both can: the cost model's choice, or one forced.
    pub path: PathChoice,
}

/// [`InferOptions::path`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PathChoice {
    /// The cheaper by the cost model ([`crate::cost`]) with these costs.
    Auto(Costs),
    Stream,
    Batched,
}

impl Default for PathChoice {
    fn default() -> Self {
        PathChoice::Auto(Costs::default())
    }
}

/// How [`infer_nodes_report`] ran a request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RequestPath {
    /// Sampled batches (`fanouts` given).
    Sampled,
    /// Full neighbourhoods batch by batch (`batch_size` targets each).
    Batched,
    /// Batch by batch because the cost model found it cheaper than the stream.
    BatchedCheaper(Choice),
    /// The whole request's reach in one pass.
    Stream(StreamReport),
}

impl Default for InferOptions {
    fn default() -> Self {
        InferOptions {
            fanouts: None,
            batch_size: 1024,
            features: vec!["x".into()],
            seed: 0,
            workers: 2,
            prefetch: 2,
            reopen: None,
            stream_bytes: 512 << 20,
            path: PathChoice::default(),
        }
    }
}

/// The fanouts of the full neighbourhood of `model` (see the module docs).
pub fn full_fanouts(model: &Model) -> Vec<i64> {
    let degree_normalised = model.dfg().ops.iter().any(|n| matches!(n.op, Op::Spmm { norm: Norm::Sym, .. } | Op::SpmmGemm { norm: Norm::Sym, .. }));
    vec![-1; model.num_blocks() + usize::from(degree_normalised)]
}

/// Checks that the store holds every tensor the model reads, as f32 or f16 of the model's width.
pub fn check_features(store: &Store, model: &Model, features: &[String]) -> Result<()> {
    let inputs = model.inputs();
    if features.len() != inputs.len() {
        let names: Vec<&str> = inputs.iter().map(|i| i.name.as_str()).collect();
        return Err(RunnerError::Invalid(format!("the model reads {} inputs {names:?}; {} feature tensors given", inputs.len(), features.len())));
    }
    for (spec, name) in inputs.iter().zip(features) {
        let meta = store.tensor_meta(name).map_err(EngineError::from)?;
        if !matches!(meta.dtype, DType::F32 | DType::F16) {
            let message = format!("store tensor {name:?} is {}, the runner computes in f32 (store f32 or f16 features)", meta.dtype.name());
            return Err(RunnerError::Input { name: spec.name.clone(), message });
        }
        if meta.dim as usize != spec.cols {
            let message = format!("the model takes {} columns, store tensor {name:?} has {}", spec.cols, meta.dim);
            return Err(RunnerError::Input { name: spec.name.clone(), message });
        }
    }
    Ok(())
}

/// Runs `model` for every node of `nodes` (user ids, repeats allowed):
/// one output row per node, in the order of `nodes`. `progress` is called
/// with the number of nodes done after each batch.
pub fn infer_nodes(store: Arc<Store>, model: &Model, nodes: &[u64], o: &InferOptions, progress: &mut dyn FnMut(usize)) -> Result<Tensor> {
    Ok(infer_nodes_report(store, model, nodes, o, progress)?.0)
}

/// [`infer_nodes`], saying which path ran the request.
pub fn infer_nodes_report(store: Arc<Store>, model: &Model, nodes: &[u64], o: &InferOptions, progress: &mut dyn FnMut(usize)) -> Result<(Tensor, RequestPath)> {
    check_features(&store, model, &o.features)?;
    if o.batch_size == 0 {
        return Err(RunnerError::Invalid("batch_size must be at least 1".into()));
    }
    let weighted = model.dfg().ops.iter().any(|n| matches!(n.op, Op::Spmm { edge_weight: true, .. } | Op::SpmmGemm { edge_weight: true, .. }));
    if weighted && !store.has_weights() {
        return Err(
            EngineError::Invalid("the model reads edge weights (edge_weight: true), which this store does not have (import with weights)".into()).into()
        );
    }
    let n = store.num_nodes();
    if let Some(&v) = nodes.iter().find(|&&v| v >= n) {
        return Err(EngineError::Invalid(format!("node {v} is out of range of {n} nodes")).into());
    }
    let fanouts = match &o.fanouts {
        Some(f) if f.is_empty() => return Err(RunnerError::Invalid("fanouts must name at least one hop (or be None: the full neighbourhood)".into())),
        Some(f) => f.clone(),
        None => full_fanouts(model),
    };
    let cols = model.output_cols();
    let mut out = Tensor::zeros(nodes.len(), cols);
    if nodes.is_empty() {
        return Ok((out, RequestPath::Batched));
    }
    if o.fanouts.is_none() {
        let batches = nodes.len().div_ceil(o.batch_size);
        let policy = match o.path {
            PathChoice::Auto(costs) => Some(Policy::Cheaper { costs, batches }),
            PathChoice::Stream => Some(Policy::Always),
            PathChoice::Batched => None,
        };
        let mut path = RequestPath::Batched;
        if let Some(policy) = policy
            && batches > 1
            && o.stream_bytes > 0
            && let Some(proj) = Projection::of(model)?
        {
            match run_stream(&store, model, &proj, nodes, &o.features[0], weighted, o.stream_bytes, policy)? {
                Streamed::Ran(rows, seeds, report) => {
                    let sample = Sample { node: seeds, ..Sample::default() };
                    place(&mut out, 0, nodes, &sample, &rows, &mut HashMap::new())?;
                    progress(nodes.len());
                    return Ok((out, RequestPath::Stream(report)));
                }
                Streamed::Declined(Some(choice)) => path = RequestPath::BatchedCheaper(choice),
                Streamed::Declined(None) => {}
            }
        }
        return Ok((infer_full(&store, model, nodes, o, fanouts.len(), weighted, progress)?, path));
    }
    let batches: Vec<Vec<u64>> = nodes.chunks(o.batch_size).map(<[u64]>::to_vec).collect();
    let opts = SampleOptions {
        fanouts,
        replace: false,
        weighted: false,
        direction: Direction::In,
        seed: o.seed,
        max_fanout: SampleOptions::default().max_fanout,
        tensors: o.features.clone(),
    };
    let cfg = PrefetchOptions { workers: o.workers, prefetch: o.prefetch, reopen: o.reopen.clone(), ..PrefetchOptions::default() };
    let mut batches_iter = Prefetcher::new(store.clone(), batches, opts, cfg)?;
    let mut done = 0usize;
    let mut first = HashMap::new();
    while let Some(sample) = batches_iter.next() {
        let sample = sample?;
        let weights = if weighted { Some(sample_weights(&store, &sample)?) } else { None };
        let rows = model.run_sample(&sample, weights.as_deref())?;
        let batch = &nodes[done..(done + o.batch_size).min(nodes.len())];
        place(&mut out, done, batch, &sample, &rows, &mut first)?;
        done += batch.len();
        progress(done);
    }
    if done != nodes.len() {
        return Err(RunnerError::Invalid(format!("inference stopped after {done} of {} nodes", nodes.len())));
    }
    Ok((out, RequestPath::Sampled))
}

/// Copies each node of `batch` (output rows `done..`) from its seed's row of `rows`.
fn place(out: &mut Tensor, done: usize, batch: &[u64], sample: &Sample, rows: &Tensor, first: &mut HashMap<u64, usize>) -> Result<()> {
    let cols = out.cols;
    // The sample lists each seed once, in first-occurrence order; a repeated node takes its first row.
    first.clear();
    for (k, &v) in batch.iter().enumerate() {
        let next = first.len();
        let r = *first.entry(v).or_insert(next);
        if r >= rows.rows || sample.node[r] != v {
            return Err(RunnerError::Invalid(format!("the sample of batch at node {done} does not list seed {v} at row {r}")));
        }
        out.data[(done + k) * cols..(done + k + 1) * cols].copy_from_slice(&rows.data[r * cols..(r + 1) * cols]);
    }
    Ok(())
}

/// The full-neighbourhood path: per batch, `infer_hood::full_neighbourhood`
/// (lists and rows of each hop read together, rows only within each input's
/// reach) on a second thread, up to `prefetch` batches ahead, while this
/// thread runs the model on the nodes within the model's reach.
fn infer_full(store: &Store, model: &Model, nodes: &[u64], o: &InferOptions, hops: usize, weighted: bool, progress: &mut dyn FnMut(usize)) -> Result<Tensor> {
    let reach = Reach::of(model.dfg());
    let keep = reach.total.min(hops);
    let rows: Vec<HoodRows> = o.features.iter().zip(&reach.inputs).map(|(t, r)| HoodRows { tensor: t.clone(), hops: r.unwrap_or(0).min(keep) }).collect();
    let mut out = Tensor::zeros(nodes.len(), model.output_cols());
    let mut first = HashMap::new();
    let mut done = 0usize;
    std::thread::scope(|s| -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel(o.prefetch.max(1));
        s.spawn(move || {
            for batch in nodes.chunks(o.batch_size) {
                let hood = full_neighbourhood(store, batch, hops, &rows, weighted);
                let failed = hood.is_err();
                // The receiver stops at an error of its own: nothing left to send to.
                if tx.send(hood).is_err() || failed {
                    break;
                }
            }
        });
        for batch in nodes.chunks(o.batch_size) {
            let (sample, weights) = rx.recv().map_err(|_| RunnerError::Invalid(format!("the neighbourhood of the batch at node {done} was not read")))??;
            let rows = model.run_hood(&sample, keep, weights.as_deref())?;
            place(&mut out, done, batch, &sample, &rows, &mut first)?;
            done += batch.len();
            progress(done);
        }
        Ok(())
    })?;
    Ok(out)
}

/// The weight of every sampled edge, each edge's own: a sampled edge into
/// `v` has id `first_edge(v) + k`, `k` its position in `v`'s in-list, so the
/// weight is read at that position of the same list (one batched read of
/// the destinations' lists, pages the sampler has just read). Repeated
/// edges between two nodes so keep their own weights, as in `infer_all`.
/// A list that no longer holds the sampled neighbour there (an update
/// between the draw and this read) is an error, never another edge's weight.
fn sample_weights(store: &Store, sample: &Sample) -> Result<Vec<f32>> {
    let mut dsts: Vec<u64> = sample.col.iter().map(|&c| sample.node[c as usize]).collect();
    dsts.sort_unstable();
    dsts.dedup();
    let mut ids = dsts.clone();
    store.to_internal(&mut ids).map_err(EngineError::from)?;
    let lists = store.neighbors(&ids, Direction::In, true, false).map_err(EngineError::from)?;
    let w = lists.weights.as_ref().ok_or_else(|| RunnerError::Invalid("the store returned lists without their weights".into()))?;
    let mut src: Vec<u64> = sample.row.iter().map(|&r| sample.node[r as usize]).collect();
    store.to_internal(&mut src).map_err(EngineError::from)?;
    let mut out = Vec::with_capacity(sample.row.len());
    for (i, (&c, &e)) in sample.col.iter().zip(&sample.edge).enumerate() {
        let v = sample.node[c as usize];
        let j = dsts.binary_search(&v).expect("every destination was read");
        let (a, b) = (lists.indptr[j], lists.indptr[j + 1]);
        let at = e.checked_sub(lists.first_edge[j]).map(|k| a + k).filter(|&p| p < b);
        match at {
            Some(p) if lists.indices[p as usize] == src[i] && w[p as usize].is_finite() => out.push(w[p as usize]),
            _ => {
                let u = sample.node[sample.row[i] as usize];
                return Err(RunnerError::Invalid(format!(
                    "sampled edge {u} -> {v} (edge id {e}) is not where it was drawn in {v}'s in-list, or its weight is not finite: the graph changed during the request, retry it"
                )));
            }
        }
    }
    Ok(out)
}
