//! The server alone, without the CLI's other commands: the same
//! `solidgraph_server::serve` as `solidgraph serve`, with the few options a
//! benchmark needs, so that profiling the server does not wait on linking
//! the whole CLI.
//!
//!     cargo build --release -p solidgraph-server --example serve
//!     target/release/examples/serve serve STORE... [--read-only] [--listen ADDR] [--cache BYTES] [--max-concurrent N]
//!
//! (The first `serve` makes it a drop-in for the CLI binary in
//! benchmarks/server_small_ab.sh and SOLIDGRAPH_BIN.)

use std::path::PathBuf;

use solidgraph_server::{Limits, ServeOptions, serve};
use solidgraph_store::OpenOptions;

fn main() -> Result<(), String> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("SOLIDGRAPH_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .try_init();
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() != Some("serve") {
        return Err("usage: serve serve STORE... [--read-only] [--listen ADDR] [--cache BYTES] [--max-concurrent N]".into());
    }
    let (mut stores, mut listen, mut read_only) = (Vec::new(), "127.0.0.1:50051".to_string(), false);
    let (mut cache, mut limits) = (256u64 << 20, Limits::default());
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--read-only" => read_only = true,
            "--listen" => listen = value()?,
            "--cache" => cache = value()?.parse().map_err(|e| format!("--cache: {e}"))?,
            "--max-concurrent" => limits.max_concurrent = value()?.parse().map_err(|e| format!("--max-concurrent: {e}"))?,
            _ if a.starts_with("--") => return Err(format!("unknown option {a}")),
            _ => stores.push(PathBuf::from(a)),
        }
    }
    let open = OpenOptions { cache_bytes: cache, writable: !read_only, ..Default::default() };
    let threads = limits.max_concurrent;
    serve(ServeOptions {
        stores,
        data_dir: None,
        listen,
        tokens: None,
        metrics: None,
        tls: None,
        limits,
        open,
        threads,
        reactor_threads: 1,
        shm: Default::default(),
    })
}
