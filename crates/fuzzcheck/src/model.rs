//! `model`: the runner's model directory (`model.json`, the DFG, and
//! `weights.safetensors`) loaded from hostile bytes, and run on a small
//! graph when it loads.
//!
//! data[0] picks one of the built-in models (GCN, GraphSAGE, GIN, GAT,
//! NGCF: its DFG and weights are the fixture) and, with bit 0x80, which
//! file data[1..] replaces: the weights (bit set) or model.json.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::OnceLock;

use solidgraph_runner::dfg::Dfg;
use solidgraph_runner::{Block, Model, Tensor, Weight, models, save_model};

/// The built-in models the inputs start from.
pub const MODELS: usize = 5;

/// Nodes of the graph a loaded model runs on.
const NODES: usize = 6;

/// Widest input a run gathers (a model may declare up to the runner's
/// `MAX_COLS`; the decoder is what is fuzzed, not the kernels' memory).
const MAX_INPUT_COLS: usize = 1 << 12;

/// Model `i` of the fixture: its DFG and weights.
pub fn builtin(i: usize) -> (Dfg, BTreeMap<String, Weight>) {
    let dfg = match i % MODELS {
        0 => models::gcn(3, &[4, 2], false),
        1 => models::sage(3, &[4, 2]),
        2 => models::gin(3, &[4, 2], 0.1),
        3 => models::gat(3, &[4, 2], &[2, 1], false),
        _ => models::ngcf(3, &[4, 2]),
    };
    let w = models::random_weights(&dfg, i as u64 + 1, 0.5);
    (dfg, w)
}

/// Each built-in model's two files, written once.
struct Files {
    json: Vec<String>,
    weights: Vec<Vec<u8>>,
}

fn files() -> &'static Files {
    static F: OnceLock<Files> = OnceLock::new();
    F.get_or_init(|| {
        let dir = crate::memory_dir();
        let (mut json, mut weights) = (vec![], vec![]);
        for i in 0..MODELS {
            let (dfg, w) = builtin(i);
            let d = dir.join(format!("m{i}"));
            save_model(&d, &dfg, &w).expect("a built-in model saves");
            json.push(dfg.to_json());
            weights.push(std::fs::read(d.join("weights.safetensors")).expect("weights just written"));
        }
        Files { json, weights }
    })
}

/// Writes the model directory an input makes and returns it.
pub fn model_dir(data: &[u8]) -> Option<PathBuf> {
    let (&sel, body) = data.split_first()?;
    let f = files();
    let i = sel as usize % MODELS;
    let dir = crate::scratch().join("model");
    std::fs::create_dir_all(&dir).expect("scratch model dir");
    let (json, weights) = if sel & 0x80 != 0 { (f.json[i].as_bytes(), body) } else { (body, &f.weights[i][..]) };
    std::fs::write(dir.join("model.json"), json).expect("write model.json");
    std::fs::write(dir.join("weights.safetensors"), weights).expect("write weights");
    Some(dir)
}

pub fn model(data: &[u8]) {
    let Some(dir) = model_dir(data) else { return };
    let Ok(m) = Model::load(&dir) else { return };
    run_small(&m);
}

/// Runs `m` on a ring of `NODES` nodes, each block the same graph, with
/// every input a small ramp: errors are fine, panics are not.
pub fn run_small(m: &Model) {
    if m.num_blocks() > 8 || m.inputs().iter().any(|s| s.cols > MAX_INPUT_COLS) {
        return;
    }
    let src: Vec<u64> = (0..NODES as u64).flat_map(|v| [v, (v + 1) % NODES as u64]).collect();
    let dst: Vec<u64> = (0..NODES as u64).flat_map(|v| [(v + 2) % NODES as u64, v]).collect();
    let w: Vec<f32> = (0..src.len()).map(|i| 0.5 + i as f32).collect();
    let Ok(block) = Block::from_edges(NODES, NODES, &src, &dst, Some(&w)) else { return };
    let blocks = vec![block; m.num_blocks()];
    let inputs: HashMap<String, Tensor> =
        m.inputs().iter().map(|s| (s.name.clone(), Tensor::new(NODES, s.cols, (0..NODES * s.cols).map(|k| (k % 7) as f32 - 3.0).collect()))).collect();
    let _ = m.run(&blocks, &inputs);
}
