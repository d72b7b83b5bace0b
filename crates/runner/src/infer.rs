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

use solidgraph_engine::EngineError;
pub use solidgraph_engine::loader::batch_seed;
use solidgraph_engine::loader::{PrefetchOptions, Prefetcher, Reopen};
use solidgraph_engine::sampler::SampleOptions;
use solidgraph_store::{DType, Direction, Store};

use crate::dfg::{Norm, Op};
use crate::error::{Result, RunnerError};
use crate::model::Model;
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
}

impl Default for InferOptions {
    fn default() -> Self {
        InferOptions { fanouts: None, batch_size: 1024, features: vec!["x".into()], seed: 0, workers: 2, prefetch: 2, reopen: None }
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
        return Ok(out);
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
    let mut first = std::collections::HashMap::new();
    while let Some(sample) = batches_iter.next() {
        let sample = sample?;
        let weights = if weighted { Some(sample_weights(&store, &sample)?) } else { None };
        let rows = model.run_sample(&sample, weights.as_deref())?;
        // The sample lists each seed once, in first-occurrence order; a repeated node takes its first row.
        let batch = &nodes[done..(done + o.batch_size).min(nodes.len())];
        first.clear();
        for (k, &v) in batch.iter().enumerate() {
            let next = first.len();
            let r = *first.entry(v).or_insert(next);
            if r >= rows.rows || sample.node[r] != v {
                return Err(RunnerError::Invalid(format!("the sample of batch at node {done} does not list seed {v} at row {r}")));
            }
            out.data[(done + k) * cols..(done + k + 1) * cols].copy_from_slice(&rows.data[r * cols..(r + 1) * cols]);
        }
        done += batch.len();
        progress(done);
    }
    if done != nodes.len() {
        return Err(RunnerError::Invalid(format!("inference stopped after {done} of {} nodes", nodes.len())));
    }
    Ok(out)
}

/// The weight of every sampled edge `node[row[i]] -> node[col[i]]`, in one batched lookup.
fn sample_weights(store: &Store, sample: &solidgraph_engine::sampler::Sample) -> Result<Vec<f32>> {
    let mut src: Vec<u64> = sample.row.iter().map(|&r| sample.node[r as usize]).collect();
    let mut dst: Vec<u64> = sample.col.iter().map(|&c| sample.node[c as usize]).collect();
    store.to_internal(&mut src).map_err(EngineError::from)?;
    store.to_internal(&mut dst).map_err(EngineError::from)?;
    let w = store.edge_weights(&src, &dst).map_err(EngineError::from)?;
    if let Some(i) = w.iter().position(|x| !x.is_finite()) {
        return Err(RunnerError::Invalid(format!(
            "sampled edge {} -> {} has no finite weight in the store",
            sample.node[sample.row[i] as usize], sample.node[sample.col[i] as usize]
        )));
    }
    Ok(w)
}
