//! A loaded model: its DFG checked and planned, its weights checked, one
//! kernel chosen per op from a registry. `run` executes one mini-batch.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use solidgraph_engine::sampler::Sample;

use crate::block::{Block, EdgeView, blocks_from_sample};
use crate::dfg::{Dfg, InputSpec, Norm, SelfLoops};
use crate::error::{Result, RunnerError};
use crate::kernels::{Args, Kernel};
use crate::limits::MAX_MODEL_JSON_BYTES;
use crate::plan::{Plan, Slot, check_rows, compile};
use crate::registry::Registry;
use crate::tensor::Tensor;
use crate::weights::{Weight, check_weights, read_weights, write_weights};

pub const MODEL_JSON: &str = "model.json";
pub const WEIGHTS_FILE: &str = "weights.safetensors";

pub struct Model {
    dfg: Dfg,
    plan: Plan,
    /// In the plan's weight-slot order.
    weights: Vec<Tensor>,
    kernels: Vec<Arc<dyn Kernel>>,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model").field("name", &self.dfg.name).field("ops", &self.dfg.ops.len()).field("kernels", &self.kernel_names()).finish()
    }
}

/// The edges an op sees: (block, self-loops, weighted, norm).
type ViewKey = (usize, SelfLoops, bool, Norm);

impl Model {
    /// Loads `dir/model.json` and `dir/weights.safetensors` with the built-in kernels.
    pub fn load(dir: &Path) -> Result<Model> {
        Model::load_with(dir, &Registry::with_builtin())
    }

    pub fn load_with(dir: &Path, registry: &Registry) -> Result<Model> {
        let path = dir.join(MODEL_JSON);
        let io = |source| RunnerError::Io { path: path.clone(), source };
        let size = std::fs::metadata(&path).map_err(io)?.len();
        if size > MAX_MODEL_JSON_BYTES {
            return Err(RunnerError::TooLarge { path, size, limit: MAX_MODEL_JSON_BYTES });
        }
        let dfg = Dfg::from_json(&std::fs::read_to_string(&path).map_err(io)?)?;
        compile(&dfg)?;
        let weights = read_weights(&dir.join(WEIGHTS_FILE), &dfg.weights)?;
        Model::from_parts(dfg, &weights, registry)
    }

    /// A model from a DFG and its weights in memory (the builders', an exporter's).
    pub fn from_parts(dfg: Dfg, weights: &BTreeMap<String, Weight>, registry: &Registry) -> Result<Model> {
        Model::build(dfg, weights, registry, true)
    }

    /// `from_parts` with fusion off: every op of the DFG runs as written (tests, kernel comparisons).
    pub fn unfused(dfg: Dfg, weights: &BTreeMap<String, Weight>, registry: &Registry) -> Result<Model> {
        Model::build(dfg, weights, registry, false)
    }

    fn build(dfg: Dfg, weights: &BTreeMap<String, Weight>, registry: &Registry, fuse: bool) -> Result<Model> {
        // Errors name the ops as written: the DFG is checked before it is fused.
        compile(&dfg)?;
        let plan = if fuse { compile(&crate::fuse::fuse(&dfg))? } else { compile(&dfg)? };
        check_weights(&dfg.weights, weights)?;
        let weights = plan.weight_names.iter().map(|n| weights[n].to_tensor()).collect();
        let kernels = plan.steps.iter().map(|s| registry.select(s.op.name())).collect::<Result<_>>()?;
        Ok(Model { dfg, plan, weights, kernels })
    }

    pub fn dfg(&self) -> &Dfg {
        &self.dfg
    }

    /// The node tensors `run` takes, by name and width: what a caller gathers.
    pub fn inputs(&self) -> &[InputSpec] {
        &self.dfg.inputs
    }

    /// How many blocks `run` takes (the model's layers of graph).
    pub fn num_blocks(&self) -> usize {
        self.dfg.blocks
    }

    /// The width of the output rows.
    pub fn output_cols(&self) -> usize {
        match self.plan.output {
            Slot::Value(v) => self.plan.steps[v].info.cols,
            Slot::Input(i) => self.dfg.inputs[i].cols,
            Slot::Weight(w) => self.weights[w].cols,
        }
    }

    /// The plan the model runs (fused), for runners that split it (`whole`).
    pub(crate) fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The kernel of plan step `step`.
    pub(crate) fn kernel(&self, step: usize) -> &Arc<dyn Kernel> {
        &self.kernels[step]
    }

    /// The weight in plan slot `w`.
    pub(crate) fn weight(&self, w: usize) -> &Tensor {
        &self.weights[w]
    }

    /// CRC32C of the DFG as written and of every weight's values: two models
    /// with the same fingerprint compute the same function.
    pub fn fingerprint(&self) -> u32 {
        let mut crc = crc32c::crc32c(self.dfg.to_json().as_bytes());
        for w in &self.weights {
            let bytes: Vec<u8> = w.data.iter().flat_map(|x| x.to_le_bytes()).collect();
            crc = crc32c::crc32c_append(crc, &bytes);
        }
        crc
    }

    /// (op index, op, kernel) of every step: which kernel the registry chose.
    pub fn kernel_names(&self) -> Vec<(usize, &'static str, String)> {
        self.plan.steps.iter().zip(&self.kernels).map(|(s, k)| (s.index, s.op.name(), k.name().to_string())).collect()
    }

    /// Runs the model on one mini-batch: `blocks[l]` is layer l's graph, `inputs`
    /// the node tensors by name (rows = `blocks[0].n_src()`). Gives every output
    /// row the last op writes (the trim-free caller keeps the first batch_size).
    pub fn run(&self, blocks: &[Block], inputs: &HashMap<String, Tensor>) -> Result<Tensor> {
        let bound = self.bind_inputs(blocks, inputs)?;
        let mut values: Vec<Option<Tensor>> = vec![None; self.plan.values];
        let mut views: HashMap<ViewKey, EdgeView> = HashMap::new();
        for (step, kernel) in self.plan.steps.iter().zip(&self.kernels) {
            let key = step.op.edges();
            if let Some(k) = key.filter(|k| !views.contains_key(k)) {
                views.insert(k, blocks[k.0].view(k.1, k.2, k.3));
            }
            let x: Vec<&Tensor> = step.args.iter().map(|&s| self.value(s, &bound, &values)).collect();
            let block = step.op.block().map(|b| &blocks[b]);
            let edges = key.map(|k| &views[&k]);
            let shape = |message| RunnerError::Shape { index: step.index, op: step.op.name().into(), message };
            check_rows(&step.op, &x, block, edges).map_err(shape)?;
            let fail = |message| RunnerError::Kernel { index: step.index, op: step.op.name().into(), kernel: kernel.name().into(), message };
            let out = kernel.run(&step.op, &Args { x: &x, block, edges }).map_err(fail)?;
            if out.cols != step.info.cols {
                return Err(fail(format!("wrote {} columns, the op has {}", out.cols, step.info.cols)));
            }
            values[step.out] = Some(out);
            for &v in &step.free {
                values[v] = None;
            }
        }
        Ok(self.value(self.plan.output, &bound, &values).clone())
    }

    /// One sampled mini-batch end to end: `sample.tensors[i]` gathered for
    /// `inputs()[i]`, every layer on the whole sample (trim-free), the seeds'
    /// rows out (`model(batch.x, batch.edge_index)[:batch.batch_size]`).
    pub fn run_sample(&self, sample: &Sample, edge_weights: Option<&[f32]>) -> Result<Tensor> {
        if sample.tensors.len() != self.dfg.inputs.len() {
            return Err(RunnerError::Invalid(format!("the sample gathered {} tensors for the model's {} inputs", sample.tensors.len(), self.dfg.inputs.len())));
        }
        let inputs = self
            .dfg
            .inputs
            .iter()
            .zip(&sample.tensors)
            .map(|(spec, rows)| Ok((spec.name.clone(), Tensor::from_rows(&spec.name, rows)?)))
            .collect::<Result<_>>()?;
        let blocks = blocks_from_sample(sample, self.dfg.blocks, edge_weights)?;
        let seeds = sample.num_sampled_nodes.first().copied().unwrap_or(0) as usize;
        Ok(self.run(&blocks, &inputs)?.head(seeds))
    }

    /// One full neighbourhood (`infer_hood::full_neighbourhood`) end to end,
    /// computing only on the nodes within `keep` hops of the seeds: the
    /// seeds' rows equal [`Model::run_sample`]'s on the whole neighbourhood
    /// when `keep` is at least the model's total reach ([`Reach`](crate::reach::Reach)).
    /// `sample.tensors[i]` may hold only its first rows (those within input
    /// i's reach); the rest of the `keep` hops read zeros, which no seed's
    /// row depends on. Degrees for GCN's normalisation are taken on the
    /// whole neighbourhood first, so the kept nodes keep theirs.
    pub fn run_hood(&self, sample: &Sample, keep: usize, edge_weights: Option<&[f32]>) -> Result<Tensor> {
        if sample.tensors.len() != self.dfg.inputs.len() {
            return Err(RunnerError::Invalid(format!("the sample gathered {} tensors for the model's {} inputs", sample.tensors.len(), self.dfg.inputs.len())));
        }
        let n = sample.node.len();
        let m = (sample.num_sampled_nodes.iter().take(keep + 1).sum::<u64>() as usize).min(n);
        let whole = Block::from_edges(n, n, &sample.row, &sample.col, edge_weights)?;
        let block = if m == n { whole } else { self.kept_block(&whole, sample, m, edge_weights)? };
        let inputs = self
            .dfg
            .inputs
            .iter()
            .zip(&sample.tensors)
            .map(|(spec, rows)| {
                let mut t = Tensor::from_rows(&spec.name, rows)?;
                if t.rows > m {
                    return Err(RunnerError::Input { name: spec.name.clone(), message: format!("{} rows for {m} nodes", t.rows) });
                }
                t.data.resize(m * t.cols, 0.0);
                t.rows = m;
                Ok((spec.name.clone(), t))
            })
            .collect::<Result<_>>()?;
        let seeds = sample.num_sampled_nodes.first().copied().unwrap_or(0) as usize;
        Ok(self.run(&vec![block; self.dfg.blocks], &inputs)?.head(seeds))
    }

    /// The first `m` nodes of `whole` and the edges among them, with each
    /// node's degree in `whole` for every view a normalisation reads.
    fn kept_block(&self, whole: &Block, sample: &Sample, m: usize, edge_weights: Option<&[f32]>) -> Result<Block> {
        let mut views: Vec<(SelfLoops, bool)> = Vec::new();
        for step in &self.plan.steps {
            if let Some((_, loops, weighted, Norm::Sym)) = step.op.edges()
                && !views.contains(&(loops, weighted))
            {
                views.push((loops, weighted));
            }
        }
        let degrees = views
            .into_iter()
            .map(|key| {
                let v = whole.view(key.0, key.1, Norm::None);
                (key, (0..m).map(|d| v.coef[v.indptr[d]..v.indptr[d + 1]].iter().sum()).collect())
            })
            .collect();
        let kept: Vec<usize> = (0..sample.row.len()).filter(|&e| (sample.row[e] as usize) < m && (sample.col[e] as usize) < m).collect();
        let src: Vec<u64> = kept.iter().map(|&e| sample.row[e]).collect();
        let dst: Vec<u64> = kept.iter().map(|&e| sample.col[e]).collect();
        let w: Option<Vec<f32>> = edge_weights.map(|w| kept.iter().map(|&e| w[e]).collect());
        Block::from_edges(m, m, &src, &dst, w.as_deref())?.with_degrees(degrees)
    }

    fn bind_inputs<'a>(&self, blocks: &[Block], inputs: &'a HashMap<String, Tensor>) -> Result<Vec<&'a Tensor>> {
        if blocks.len() != self.dfg.blocks {
            return Err(RunnerError::Block { index: blocks.len(), message: format!("the model reads {} blocks, {} given", self.dfg.blocks, blocks.len()) });
        }
        let rows = blocks.first().map(Block::n_src);
        self.dfg
            .inputs
            .iter()
            .map(|spec| {
                let bad = |message| RunnerError::Input { name: spec.name.clone(), message };
                let t = inputs.get(&spec.name).ok_or_else(|| bad("missing".into()))?;
                if t.cols != spec.cols {
                    return Err(bad(format!("has {} columns, the model was built for {}", t.cols, spec.cols)));
                }
                if rows.is_some_and(|r| r != t.rows) {
                    return Err(bad(format!("has {} rows for the {} source nodes of block 0", t.rows, rows.unwrap_or(0))));
                }
                Ok(t)
            })
            .collect()
    }

    fn value<'a>(&'a self, slot: Slot, inputs: &[&'a Tensor], values: &'a [Option<Tensor>]) -> &'a Tensor {
        match slot {
            Slot::Input(i) => inputs[i],
            Slot::Weight(w) => &self.weights[w],
            Slot::Value(v) => values[v].as_ref().expect("a value is written before it is read and freed after its last read"),
        }
    }
}

/// Writes a model directory (`model.json` + `weights.safetensors`) after checking it loads.
pub fn save_model(dir: &Path, dfg: &Dfg, weights: &BTreeMap<String, Weight>) -> Result<()> {
    compile(dfg)?;
    check_weights(&dfg.weights, weights)?;
    std::fs::create_dir_all(dir).map_err(|source| RunnerError::Io { path: dir.to_path_buf(), source })?;
    let path = dir.join(MODEL_JSON);
    std::fs::write(&path, dfg.to_json()).map_err(|source| RunnerError::Io { path, source })?;
    write_weights(&dir.join(WEIGHTS_FILE), weights)
}
