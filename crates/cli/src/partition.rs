//! `solidgraph partition`: a store split into shard stores and a partition
//! book (`solidgraph_store::partition`), for `solidgraph serve` per shard
//! and `solidgraph.distributed` on the client.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use solidgraph_store::import::npy::{IntStream, read_header};
use solidgraph_store::partition::{Method, PartitionOptions, partition};
use solidgraph_store::{BackendKind, OpenOptions, Store};

use crate::util::{CliResult, backend_choice, for_cli, parse_backend, parse_size};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum MethodArg {
    /// A hash of the vertex id: even shards, most edges cut.
    Hash,
    /// One pass of linear deterministic greedy (LDG) over the lists: memory O(vertices).
    Stream,
}

#[derive(Args)]
pub struct PartitionArgs {
    /// The store to split.
    pub input: PathBuf,
    /// Where the shards and the book go (must not exist, or be empty).
    pub out_dir: PathBuf,
    /// Number of shards.
    #[arg(long)]
    pub parts: u32,
    /// How vertices are assigned (`solidgraph partition --method metis` runs
    /// pymetis from the Python package's console script).
    #[arg(long, value_enum, default_value = "stream")]
    pub method: MethodArg,
    /// A 1-D integer .npy with each vertex's shard (overrides --method).
    #[arg(long)]
    pub assignment: Option<PathBuf>,
    /// Memory for the import's sort buffers per shard store (e.g. 1G).
    #[arg(long, default_value = "1G", value_parser = parse_size)]
    pub memory: u64,
    /// Print the report as one line of JSON.
    #[arg(long)]
    pub json: bool,
    /// I/O backend: uring or posix.
    #[arg(long, value_parser = parse_backend)]
    pub backend: Option<BackendKind>,
}

fn read_assignment(path: &std::path::Path) -> CliResult<Vec<u32>> {
    let h = read_header(path)?;
    if h.shape.len() != 1 {
        return Err(format!("{}: the assignment must be a 1-D array, not shape {:?}", path.display(), h.shape).into());
    }
    let mut s = IntStream::new(&h, 0, h.elements())?;
    let mut out = Vec::with_capacity(h.elements() as usize);
    while let Some(v) = s.next_id()? {
        let k = u32::try_from(v).map_err(|_| format!("{}: element {}: shard {v} is too large", path.display(), out.len()))?;
        out.push(k);
    }
    Ok(out)
}

pub fn partition_cmd(a: PartitionArgs) -> CliResult {
    let method = match (&a.assignment, a.method) {
        (Some(p), _) => Method::Given(read_assignment(p)?),
        (None, MethodArg::Hash) => Method::Hash,
        (None, MethodArg::Stream) => Method::Stream,
    };
    let src = Store::open(&a.input, &OpenOptions { cache_bytes: 256 << 20, backend: backend_choice(a.backend), ..Default::default() })?;
    let o = PartitionOptions { parts: a.parts, method, memory_budget: a.memory };
    let r = partition(&src, &a.out_dir, &o, &|_, _, _| {}).map_err(|e| for_cli(e.into()))?;
    let cut = r.cut_edges as f64 / r.num_edges.max(1) as f64;
    if a.json {
        let j = serde_json::json!({
            "out_dir": a.out_dir, "parts": r.parts, "num_nodes": r.num_nodes, "num_edges": r.num_edges,
            "cut_edges": r.cut_edges, "edge_cut": cut, "balance": r.balance(), "shard_nodes": r.shard_nodes,
            "shard_edges": r.shard_edges, "book_id": format!("{:016x}", r.book_id), "seconds": r.seconds,
        });
        println!("{j}");
    } else {
        println!("{} shards of {} vertices, {} edges in {:.1} s; book {:016x}", r.parts, r.num_nodes, r.num_edges, r.seconds, r.book_id);
        println!("edge cut: {} of {} out-edges ({:.1}%); balance (largest / even share): {:.3}", r.cut_edges, r.num_edges, 100.0 * cut, r.balance());
        for (k, (n, e)) in r.shard_nodes.iter().zip(&r.shard_edges).enumerate() {
            println!("shard-{k}: {n} vertices, {e} out-edges");
        }
        println!("serve each with: solidgraph serve {}/shard-K/adj-* {}/shard-K/rows", a.out_dir.display(), a.out_dir.display());
    }
    Ok(())
}
