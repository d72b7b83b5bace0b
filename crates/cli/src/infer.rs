//! `solidgraph infer STORE --model DIR (--nodes FILE.npy | --all) --out FILE.npy`:
//! GNN inference next to the store (crates/runner), output rows as a float32 .npy;
//! `--all --tensor NAME`: whole-graph inference layer by layer (`runner::whole`)
//! into `STORE/infer/NAME/out.rows`, resumable, with a report per layer.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use solidgraph_runner::Model;
use solidgraph_runner::infer::{InferOptions, infer_nodes};
use solidgraph_runner::whole::{WholeOptions, infer_all};
use solidgraph_store::import::npy::{IntStream, read_header, write_npy};
use solidgraph_store::{OpenOptions, Store};

use crate::util::{CliResult, parse_size};

#[derive(Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["nodes", "all"])))]
#[command(group(clap::ArgGroup::new("dest").required(true).args(["out", "tensor"])))]
pub struct InferArgs {
    /// The store.
    pub path: PathBuf,
    /// Model directory (model.json + weights.safetensors), e.g. from solidgraph.infer.export.
    #[arg(long)]
    pub model: PathBuf,
    /// Target nodes: a 1-D integer .npy file.
    #[arg(long)]
    pub nodes: Option<PathBuf>,
    /// Every node: with --out, in batches over full neighbourhoods; with --tensor, layer by layer.
    #[arg(long)]
    pub all: bool,
    /// With --all: whole-graph inference layer by layer (each layer one pass over the in-lists
    /// and the previous layer's rows) into STORE/infer/NAME/out.rows (float32 rows in node
    /// order, checksummed in out.crc); a rerun after a crash resumes at the unfinished layer.
    #[arg(long, requires = "all")]
    pub tensor: Option<String>,
    /// With --tensor: bytes of rows one chunk holds at most (the memory bound), e.g. 256M.
    #[arg(long, default_value = "256M", value_parser = parse_size)]
    pub chunk_bytes: u64,
    /// With --tensor: keep the intermediate layers' row files.
    #[arg(long)]
    pub keep_intermediate: bool,
    /// With --tensor: bytes of the previous layer's most referenced rows each
    /// layer keeps in memory for all its chunks, e.g. 256M (0: none).
    #[arg(long, default_value = "256M", value_parser = parse_size)]
    pub row_cache_bytes: u64,
    /// With --tensor: every layer pulls (each destination chunk gathers its
    /// sources' rows) instead of pushing the layers of linear aggregations.
    #[arg(long, requires = "tensor")]
    pub pull: bool,
    /// With --tensor: also add the output to the store as node tensor NAME
    /// (opens the store writable; refused if the name is in use).
    #[arg(long, requires = "tensor")]
    pub add_tensor: bool,
    /// With --tensor: the per-layer report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
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
    pub out: Option<PathBuf>,
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

fn bar(len: u64) -> indicatif::ProgressBar {
    let pb = indicatif::ProgressBar::new(len);
    pb.set_style(
        indicatif::ProgressStyle::with_template("{msg:>10} [{bar:40}] {pos}/{len} {per_sec} eta {eta}").expect("static template").progress_chars("=> "),
    );
    pb
}

/// `--all --tensor NAME`: layer by layer, one progress bar per layer.
fn infer_all_cmd(a: &InferArgs, store: &Store, model: &Model, name: &str) -> CliResult {
    let o = WholeOptions {
        out: name.to_string(),
        features: a.features.clone(),
        chunk_bytes: a.chunk_bytes as usize,
        keep_intermediate: a.keep_intermediate,
        store_tensor: a.add_tensor,
        row_cache_bytes: a.row_cache_bytes,
        push: !a.pull,
    };
    let pb = bar(store.num_nodes());
    let r = infer_all(store, model, &o, &mut |p| {
        pb.set_message(format!("layer {}/{}", p.level + 1, p.levels));
        pb.set_position(p.done);
    })?;
    pb.finish_and_clear();
    let levels: Vec<serde_json::Value> = r
        .levels
        .iter()
        .map(|l| {
            serde_json::json!({"layer": l.level + 1, "skipped": l.skipped, "seconds": l.seconds, "store_bytes": l.store_bytes,
                "row_bytes": l.row_bytes, "row_read_bytes": l.row_read_bytes, "pinned_bytes": l.pinned_bytes, "written_bytes": l.written_bytes, "ranges": l.ranges})
        })
        .collect();
    if a.json {
        let j = serde_json::json!({"path": r.path, "rows": r.rows, "cols": r.cols, "degree_seconds": r.degree_seconds, "layers": levels});
        println!("{j}");
    } else {
        for l in &r.levels {
            let what = if l.skipped {
                "done before (skipped)".to_string()
            } else {
                format!(
                    "{:.2} s, {} B read from the store, {} B of rows gathered ({} B read from row files, {} B pinned), {} B written, {}",
                    l.seconds,
                    l.store_bytes,
                    l.row_bytes,
                    l.row_read_bytes,
                    l.pinned_bytes,
                    l.written_bytes,
                    if l.ranges > 0 { format!("pushed in {} destination ranges", l.ranges) } else { "pulled".into() }
                )
            };
            eprintln!("layer {}: {what}", l.level + 1);
        }
        eprintln!("{} rows of {} columns in {}", r.rows, r.cols, r.path.display());
    }
    Ok(())
}

pub fn infer_cmd(a: InferArgs) -> CliResult {
    let model = Model::load(&a.model)?;
    let store = Arc::new(Store::open(&a.path, &OpenOptions { cache_bytes: a.cache, writable: a.add_tensor, ..Default::default() })?);
    if let Some(name) = &a.tensor {
        return infer_all_cmd(&a, &store, &model, name);
    }
    let Some(out_path) = a.out.clone() else {
        return Err("--out FILE.npy names where the rows go (or --all --tensor NAME)".into());
    };
    let nodes = match &a.nodes {
        Some(p) => read_nodes(p)?,
        None => (0..store.num_nodes()).collect(),
    };
    let o = InferOptions { fanouts: a.fanouts, batch_size: a.batch_size, features: a.features, seed: a.seed, workers: a.workers, ..Default::default() };
    let pb = bar(nodes.len() as u64);
    pb.set_message("infer");
    let out = infer_nodes(store, &model, &nodes, &o, &mut |done| pb.set_position(done as u64))?;
    pb.finish_and_clear();
    let bytes: Vec<u8> = out.data.iter().flat_map(|x| x.to_le_bytes()).collect();
    write_npy(&out_path, "<f4", &[out.rows as u64, out.cols as u64], &bytes)?;
    eprintln!("{} rows of {} columns written to {}", out.rows, out.cols, out_path.display());
    Ok(())
}
