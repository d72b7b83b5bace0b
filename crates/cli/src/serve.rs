//! `solidgraph serve`: the gRPC server (solidgraph-server) over one or more
//! stores, each served under its directory name.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use solidgraph_server::{Limits, ServeOptions, TlsFiles};
use solidgraph_store::{BackendKind, OpenOptions};

use crate::util::{CliResult, backend_choice, parse_backend, parse_size};

#[derive(Args)]
pub struct ServeArgs {
    /// Store directories to serve; clients name each by its directory name.
    #[arg(required_unless_present = "data_dir")]
    pub stores: Vec<PathBuf>,
    /// Directory of stores: every store in it is served, and UpdateGraph
    /// builds new ones there.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Most bytes of edges and tensors one UpdateGraph stream may send
    /// (spooled to disk under --data-dir until the build).
    #[arg(long, default_value = "64GiB", value_parser = parse_size)]
    pub max_graph: u64,
    /// Most vertices a store built by UpdateGraph may have (declared, or the
    /// largest id + 1).
    #[arg(long, default_value_t = 1 << 32)]
    pub max_graph_vertices: u64,
    /// Address to listen on (port 0: any free port; the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:50051")]
    pub listen: String,
    /// Bearer tokens, one `TOKEN read|write` per line. Without it the server
    /// listens on loopback addresses only.
    #[arg(long)]
    pub tokens: Option<PathBuf>,
    /// Serve Prometheus metrics at http://ADDR/metrics.
    #[arg(long)]
    pub metrics: Option<SocketAddr>,
    /// Serve the stores read-only (Updates calls fail).
    #[arg(long)]
    pub read_only: bool,
    /// TLS certificate chain (PEM); needs --tls-key.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM): mutual TLS.
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// Page cache per store.
    #[arg(long, default_value = "256MiB", value_parser = parse_size)]
    pub cache: u64,
    /// Row cache per store (read-only serving only; 0: none).
    #[arg(long, default_value = "0", value_parser = parse_size)]
    pub row_cache: u64,
    /// I/O backend.
    #[arg(long, value_parser = parse_backend)]
    pub backend: Option<BackendKind>,
    /// Requests running at once.
    #[arg(long, default_value_t = Limits::default().max_concurrent)]
    pub max_concurrent: usize,
    /// Most vertex ids (or edges) per request.
    #[arg(long, default_value_t = Limits::default().max_ids)]
    pub max_ids: usize,
    /// Largest sampling fanout.
    #[arg(long, default_value_t = Limits::default().max_fanout)]
    pub max_fanout: i64,
    /// Largest request or response message.
    #[arg(long, default_value = "64MiB", value_parser = parse_size)]
    pub max_message: u64,
    /// Longest a request may run, in seconds (a client's shorter deadline wins).
    #[arg(long, default_value_t = 300.0)]
    pub deadline: f64,
    /// Threads running HTTP/2 and the small reads (request work has its own
    /// pool); more only for many small requests on many cores.
    #[arg(long, default_value_t = 1)]
    pub reactor_threads: usize,
    /// Let clients on this host (loopback connections, files of the
    /// server's user on tmpfs) take array replies through shared memory.
    #[arg(long)]
    pub shm: bool,
}

pub fn serve_cmd(a: ServeArgs) -> CliResult {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("SOLIDGRAPH_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    if !(a.deadline > 0.0 && a.deadline.is_finite()) {
        return Err(format!("--deadline {} must be a positive number of seconds", a.deadline).into());
    }
    let d = Limits::default();
    let limits = Limits {
        max_message_bytes: usize::try_from(a.max_message)?,
        max_ids: a.max_ids,
        max_fanout: a.max_fanout,
        max_concurrent: a.max_concurrent,
        deadline: Duration::from_secs_f64(a.deadline),
        chunk_bytes: d.chunk_bytes.min(usize::try_from(a.max_message)? / 2),
        max_graph_bytes: a.max_graph,
        max_graph_vertices: a.max_graph_vertices,
        ..d
    };
    let tls = a.tls_cert.map(|cert| TlsFiles { cert, key: a.tls_key.expect("clap requires it"), client_ca: a.tls_client_ca });
    let open = OpenOptions {
        cache_bytes: a.cache,
        backend: backend_choice(a.backend),
        writable: !a.read_only,
        row_cache_bytes: if a.read_only { a.row_cache } else { 0 },
        ..Default::default()
    };
    let threads = limits.max_concurrent;
    solidgraph_server::serve(ServeOptions {
        stores: a.stores,
        data_dir: a.data_dir,
        listen: a.listen,
        tokens: a.tokens,
        metrics: a.metrics,
        tls,
        limits,
        open,
        threads,
        reactor_threads: a.reactor_threads,
        shm: solidgraph_server::ShmOptions { enabled: a.shm, ..Default::default() },
    })?;
    Ok(())
}
