//! `solidgraph infer STORE --model DIR (--nodes FILE.npy | --all) --out FILE.npy`:
//! GNN inference next to the store (crates/runner), output rows as a float32 .npy.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use solidgraph_runner::Model;
use solidgraph_runner::infer::{InferOptions, infer_nodes};
use solidgraph_store::import::npy::{IntStream, read_header, write_npy};
use solidgraph_store::{OpenOptions, Store};

use crate::util::{CliResult, parse_size};

#[derive(Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["nodes", "all"])))]
pub struct InferArgs {
    /// The store.
    pub path: PathBuf,
    /// Model directory (model.json + weights.safetensors), e.g. from solidgraph.infer.export.
    #[arg(long)]
    pub model: PathBuf,
    /// Target nodes: a 1-D integer .npy file.
    #[arg(long)]
    pub nodes: Option<PathBuf>,
    /// Every node, in batches over full neighbourhoods (layer-by-layer whole-graph inference,
    /// `infer_all`, is planned for large graphs; docs/DESIGN.md, Planned).
    #[arg(long)]
    pub all: bool,
    /// Neighbours per node at each hop, e.g. 25,10 (-1: all). Default: the full neighbourhood.
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub fanouts: Option<Vec<i64>>,
    #[arg(long, default_value_t = 1024)]
    pub batch_size: usize,
    /// The store's node tensor(s) the model reads, comma-separated, one per model input.
    #[arg(long, value_delimiter = ',', default_value = "x")]
    pub features: Vec<String>,
    /// Sampling seed (batch i samples with batch_seed(seed, i)).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Sampling threads.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Page cache size (e.g. 256M, 2G).
    #[arg(long, default_value = "256M", value_parser = parse_size)]
    pub cache: u64,
    /// Output: a float32 .npy of shape (nodes, out_dim), rows in the order of the nodes.
    #[arg(long)]
    pub out: PathBuf,
}

fn read_nodes(path: &std::path::Path) -> CliResult<Vec<u64>> {
    let h = read_header(path)?;
    if h.shape.len() != 1 {
        return Err(format!("{}: nodes must be a 1-D array, not shape {:?}", path.display(), h.shape).into());
    }
    let mut s = IntStream::new(&h, 0, h.elements())?;
    let mut out = Vec::with_capacity(h.elements() as usize);
    while let Some(v) = s.next_id()? {
        out.push(v);
    }
    Ok(out)
}

pub fn infer_cmd(a: InferArgs) -> CliResult {
    let model = Model::load(&a.model)?;
    let store = Arc::new(Store::open(&a.path, &OpenOptions { cache_bytes: a.cache, ..Default::default() })?);
    let nodes = match &a.nodes {
        Some(p) => read_nodes(p)?,
        None => (0..store.num_nodes()).collect(),
    };
    let o = InferOptions { fanouts: a.fanouts, batch_size: a.batch_size, features: a.features, seed: a.seed, workers: a.workers, ..Default::default() };
    let pb = indicatif::ProgressBar::new(nodes.len() as u64);
    pb.set_style(
        indicatif::ProgressStyle::with_template("{msg:>10} [{bar:40}] {pos}/{len} {per_sec} eta {eta}").expect("static template").progress_chars("=> "),
    );
    pb.set_message("infer");
    let out = infer_nodes(store, &model, &nodes, &o, &mut |done| pb.set_position(done as u64))?;
    pb.finish_and_clear();
    let bytes: Vec<u8> = out.data.iter().flat_map(|x| x.to_le_bytes()).collect();
    write_npy(&a.out, "<f4", &[out.rows as u64, out.cols as u64], &bytes)?;
    eprintln!("{} rows of {} columns written to {}", out.rows, out.cols, a.out.display());
    Ok(())
}
