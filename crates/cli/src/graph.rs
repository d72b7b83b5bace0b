//! Subcommands over a store: import, info, verify, neighbors.

use std::path::PathBuf;

use clap::Args;
use solidgraph_store::order::VertexOrder;
use solidgraph_store::{BackendKind, Direction, EdgeInput, ImportOptions, OpenOptions, Store, TensorData, TensorInput, import};

use crate::util::{CliResult, backend_choice, for_cli, parse_backend, parse_order, parse_size, parse_vertex, progress_bar};

#[derive(Args)]
pub struct ImportArgs {
    /// Store directory to create (must not exist).
    pub out: PathBuf,
    /// Edge input: SNAP text (`src dst [weight [label]]`), CSV with a header
    /// (src,dst[,weight][,label]), or .npy ((2, E) or (E, 2) integers).
    /// Repeat for several files; `A.npy:B.npy` reads sources and destinations
    /// from two 1-D arrays.
    #[arg(long = "edges", required = true)]
    pub edges: Vec<String>,
    /// Node tensor NAME=FILE.npy, (n,) or (n, d); repeatable.
    #[arg(long = "tensor")]
    pub tensors: Vec<String>,
    /// Store every edge in both directions.
    #[arg(long)]
    pub undirected: bool,
    /// Give every vertex a self-loop (once).
    #[arg(long)]
    pub self_loops: bool,
    /// Drop repeated edges.
    #[arg(long)]
    pub dedup: bool,
    /// Keep edge weights (third column / `weight`).
    #[arg(long)]
    pub weights: bool,
    /// Keep edge labels (fourth column / `label`).
    #[arg(long)]
    pub labels: bool,
    /// Also store in-edges of a directed graph.
    #[arg(long = "in-edges")]
    pub in_edges: bool,
    /// With --undirected: also store each vertex's neighbors up to itself,
    /// every edge once (about half the adjacency again on disk). PageRank
    /// and WCC then read half the bytes per pass. Updates do not keep them:
    /// the next merge drops them.
    #[arg(long = "lower-lists")]
    pub lower_lists: bool,
    /// Vertex count; ids must be below it (default: largest id + 1).
    #[arg(long)]
    pub num_nodes: Option<u64>,
    /// How the store numbers vertices inside: `input` keeps your ids;
    /// `degree` renumbers hubs first (fewer bytes per edge, faster analytics
    /// and sampling; one more pass over the edges). Ids you pass and get
    /// back are yours either way.
    #[arg(long, default_value = "input", value_parser = parse_order)]
    pub order: VertexOrder,
    /// Bytes per page, a power of two from 4 KiB (the flash page, the
    /// unit of every read) to 64 KiB.
    #[arg(long, default_value = "4096", value_parser = parse_size)]
    pub page_size: u64,
    /// Share of each packed page filled now. Below 1 the rest is room for
    /// updates; at 1 (the default: most stores are read far more than
    /// written) a merge that grows a full page spreads its lists over more
    /// pages, each left 10% empty.
    #[arg(long, default_value_t = 1.0)]
    pub fill_factor: f64,
    /// Memory for sorting; inputs larger than this are sorted on disk.
    #[arg(long, default_value = "1GiB", value_parser = parse_size)]
    pub memory_budget: u64,
    /// Files to stripe the store over.
    #[arg(long, default_value_t = 1)]
    pub members: usize,
    /// Print the import report as JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_tensor(spec: &str) -> CliResult<TensorInput> {
    let (name, file) = spec.split_once('=').ok_or_else(|| format!("--tensor {spec:?}: expected NAME=FILE.npy"))?;
    Ok(TensorInput { name: name.to_string(), data: TensorData::Npy(PathBuf::from(file)) })
}

pub fn import_cmd(a: ImportArgs) -> CliResult {
    let edges: Vec<EdgeInput> = a
        .edges
        .iter()
        .map(|e| match e.split_once(':') {
            Some((s, d)) if s.ends_with(".npy") && d.ends_with(".npy") => EdgeInput::NpyPair(s.into(), d.into()),
            _ => EdgeInput::File(e.into()),
        })
        .collect();
    let tensors = a.tensors.iter().map(|t| parse_tensor(t)).collect::<CliResult<Vec<_>>>()?;
    let o = ImportOptions {
        undirected: a.undirected,
        self_loops: a.self_loops,
        dedup: a.dedup,
        weights: a.weights,
        labels: a.labels,
        in_edges: a.in_edges,
        lower_lists: a.lower_lists,
        page_size: a.page_size as usize,
        fill_factor: a.fill_factor,
        memory_budget: a.memory_budget,
        num_nodes: a.num_nodes,
        order: a.order,
        members: a.members,
        ..Default::default()
    };
    let pb = progress_bar(0, "import");
    pb.set_style(
        indicatif::ProgressStyle::with_template("{msg:>14} [{bar:40}] {pos}/{len} {per_sec} eta {eta}").expect("static template").progress_chars("=> "),
    );
    if a.json {
        pb.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let progress = |phase: &str, done: u64, total: u64| {
        pb.set_message(phase.to_string());
        pb.set_length(total);
        pb.set_position(done);
    };
    let r = import(&a.out, &edges, &tensors, &o, &progress)?;
    pb.finish_and_clear();
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "num_nodes": r.num_nodes, "num_edges": r.num_edges, "input_edges": r.input_edges,
                "pages": r.pages, "bytes": r.bytes, "runs": r.runs, "seconds": r.seconds,
                "edges_per_s": r.input_edges as f64 / r.seconds,
                "phases": r.phases.iter().map(|(k, v)| serde_json::json!([k, v])).collect::<Vec<_>>(),
                "phase_cpu": r.phases.iter().zip(&r.phase_cpu).map(|((k, _), c)| serde_json::json!([k, c])).collect::<Vec<_>>(),
            })
        );
    } else {
        println!(
            "imported {} input edges -> {} vertices, {} stored edges, {} pages ({:.1} MiB) in {:.2} s ({:.0} edges/s, {} sorted runs)",
            r.input_edges,
            r.num_nodes,
            r.num_edges,
            r.pages,
            r.bytes as f64 / (1 << 20) as f64,
            r.seconds,
            r.input_edges as f64 / r.seconds,
            r.runs
        );
    }
    Ok(())
}

#[derive(Args)]
pub struct InfoArgs {
    pub path: PathBuf,
    /// Print every field as one line of JSON, for scripts.
    #[arg(long)]
    pub json: bool,
    /// I/O backend: uring or posix (default: SOLIDGRAPH_IO_BACKEND, else io_uring when the kernel allows it).
    #[arg(long, value_parser = parse_backend)]
    pub backend: Option<BackendKind>,
}

/// Bytes in the largest binary unit that keeps a whole number in front.
fn human(bytes: u64) -> String {
    let b = bytes as f64;
    match bytes {
        0..1024 => format!("{bytes} B"),
        1024..0x10_0000 => format!("{:.1} KiB", b / 1024.0),
        0x10_0000..0x4000_0000 => format!("{:.1} MiB", b / (1u64 << 20) as f64),
        _ => format!("{:.1} GiB", b / (1u64 << 30) as f64),
    }
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

pub fn info_cmd(a: InfoArgs) -> CliResult {
    let s = Store::open(&a.path, &OpenOptions { cache_bytes: 0, backend: backend_choice(a.backend), ..Default::default() })?;
    let sb = s.superblock();
    let tensors: Vec<serde_json::Value> =
        sb.tensors.iter().map(|t| serde_json::json!({"name": t.name, "dtype": t.dtype.name(), "dim": t.dim, "rows": t.rows, "pages": t.pages})).collect();
    let j = serde_json::json!({
        "path": a.path, "format_version": sb.version, "epoch": sb.epoch,
        "num_nodes": s.num_nodes(), "num_edges": s.num_edges(), "pending_updates": s.pending_updates(), "directed": sb.directed,
        "in_edges": sb.inn.is_some() || !sb.directed, "weights": sb.fmt.weights, "labels": sb.fmt.labels,
        "page_size": sb.page_size, "members": sb.members, "stripe_pages": sb.stripe_pages,
        "pages": sb.total_pages, "bytes": s.size_bytes(),
        "out_adjacency_pages": sb.out.adj_pages, "out_gtt_entries": sb.out.gtt_entries,
        "in_adjacency_pages": sb.inn.map(|d| d.adj_pages),
        "lower_lists": s.has_lower_lists(), "lower_adjacency_pages": sb.lower.map(|l| l.dir.adj_pages), "backend": s.volume().backend().name(),
        "tensors": tensors,
    });
    if a.json {
        println!("{j}");
        return Ok(());
    }
    let tensors: Vec<String> = sb.tensors.iter().map(|t| format!("{} {}[{}] ({} rows)", t.name, t.dtype.name(), t.dim, t.rows)).collect();
    println!("{}: SolidGraph store, format {}", a.path.display(), sb.version);
    println!("  nodes        {}", s.num_nodes());
    println!("  edges        {} stored ({})", s.num_edges(), if sb.directed { "directed" } else { "undirected: each edge in both lists" });
    if sb.directed {
        println!("  in-edges     {}", yes_no(sb.inn.is_some()));
    }
    println!("  weights      {}", yes_no(sb.fmt.weights));
    println!("  labels       {}", yes_no(sb.fmt.labels));
    println!("  tensors      {}", if tensors.is_empty() { "none".to_string() } else { tensors.join(", ") });
    println!("  order        {}", if s.reordered() { "degree (renumbered inside; ids in and out stay yours)" } else { "input (your ids)" });
    if s.has_lower_lists() {
        println!("  lower lists  yes");
    }
    println!("  pending      {} update batches (not merged yet)", s.pending_updates());
    println!(
        "  on disk      {} in {} pages of {} KiB, {} member file{}",
        human(s.size_bytes()),
        sb.total_pages,
        sb.page_size / 1024,
        sb.members,
        if sb.members == 1 { "" } else { "s" }
    );
    println!("  I/O backend  {}", s.volume().backend().name());
    Ok(())
}

#[derive(Args)]
pub struct VerifyArgs {
    pub path: PathBuf,
    /// I/O backend: uring or posix (default: SOLIDGRAPH_IO_BACKEND, else io_uring when the kernel allows it).
    #[arg(long, value_parser = parse_backend)]
    pub backend: Option<BackendKind>,
}

pub fn verify_cmd(a: VerifyArgs) -> CliResult {
    let s = Store::open(&a.path, &OpenOptions { cache_bytes: 0, backend: backend_choice(a.backend), ..Default::default() })?;
    let pb = progress_bar(s.superblock().total_pages, "verify");
    pb.set_style(indicatif::ProgressStyle::with_template("{msg:>10} [{bar:40}] {pos}/{len} pages").expect("static template").progress_chars("=> "));
    let r = s.verify(&mut |done, total| {
        pb.set_length(total);
        pb.set_position(done);
    });
    pb.finish_and_clear();
    let r = r?;
    println!("ok: {} pages, {} edges, {} tensor pages, {} free pages; every checksum and invariant holds", r.pages, r.edges, r.tensor_pages, r.free_pages);
    Ok(())
}

#[derive(Args)]
pub struct NeighborsArgs {
    pub path: PathBuf,
    /// Comma-separated vertex ids.
    // Negative numbers are values here, so that `--ids -1` meets our
    // "negative vertex id" rather than clap's "unexpected argument".
    #[arg(long, value_delimiter = ',', required = true, allow_negative_numbers = true, value_parser = parse_vertex)]
    pub ids: Vec<u64>,
    /// out or in.
    #[arg(long, default_value = "out")]
    pub direction: String,
    /// Print each neighbor's edge weight too.
    #[arg(long)]
    pub weights: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// I/O backend: uring or posix (default: SOLIDGRAPH_IO_BACKEND, else io_uring when the kernel allows it).
    #[arg(long, value_parser = parse_backend)]
    pub backend: Option<BackendKind>,
}

pub fn neighbors_cmd(a: NeighborsArgs) -> CliResult {
    neighbors(a).map_err(for_cli)
}

fn neighbors(a: NeighborsArgs) -> CliResult {
    let s = Store::open(&a.path, &OpenOptions { cache_bytes: 0, backend: backend_choice(a.backend), ..Default::default() })?;
    let dir: Direction = a.direction.parse()?;
    let mut ids = a.ids.clone();
    s.to_internal(&mut ids)?;
    let mut csr = s.neighbors(&ids, dir, a.weights, false)?;
    s.to_external(&mut csr.indices)?;
    let list = |i: usize| {
        let (lo, hi) = (csr.indptr[i] as usize, csr.indptr[i + 1] as usize);
        (&csr.indices[lo..hi], csr.weights.as_ref().map(|w| &w[lo..hi]))
    };
    if a.json {
        let m: serde_json::Map<String, serde_json::Value> = a
            .ids
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let (n, w) = list(i);
                let val = match w {
                    Some(w) => serde_json::json!({"neighbors": n, "weights": w}),
                    None => serde_json::json!(n),
                };
                (v.to_string(), val)
            })
            .collect();
        println!("{}", serde_json::Value::Object(m));
    } else {
        for (i, v) in a.ids.iter().enumerate() {
            let (n, w) = list(i);
            let items: Vec<String> = match w {
                Some(w) => n.iter().zip(w).map(|(x, y)| format!("{x}:{y}")).collect(),
                None => n.iter().map(|x| x.to_string()).collect(),
            };
            println!("{v}: {}", items.join(" "));
        }
    }
    Ok(())
}
