//! `serve`: opens the stores, binds, and runs the services with health,
//! reflection, auth, limits, metrics and TLS until SIGTERM or SIGINT; then
//! it stops accepting, lets in-flight calls finish, and flushes every
//! store's WAL.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use solidgraph_store::OpenOptions;
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic::{Request, Status};

use crate::auth::{Role, Tokens};
use crate::gate::Gate;
use crate::graph::GraphService;
use crate::limits::Limits;
use crate::proto::graph_server::GraphServer;
use crate::proto::updates_server::UpdatesServer;
use crate::replies::Replies;
use crate::stores::Stores;
use crate::telemetry;
use crate::updates::UpdatesService;

/// PEM files for TLS; with `client_ca`, clients must present a certificate
/// it signed (mutual TLS).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
}

#[derive(Clone)]
pub struct ServeOptions {
    pub stores: Vec<PathBuf>,
    /// Where UpdateGraph builds new stores; its stores are served too.
    pub data_dir: Option<PathBuf>,
    pub listen: String,
    pub tokens: Option<PathBuf>,
    pub metrics: Option<SocketAddr>,
    pub tls: Option<TlsFiles>,
    pub limits: Limits,
    pub open: OpenOptions,
    /// Blocking threads for request work (at least `limits.max_concurrent`).
    pub threads: usize,
    /// Threads of the reactor, which runs HTTP/2 and the small reads
    /// (`gate`); 1 unless many cores serve many small requests.
    pub reactor_threads: usize,
    /// Array replies through callers' shared memory (`shm`).
    pub shm: crate::shm::ShmOptions,
}

fn read(p: &PathBuf) -> Result<Vec<u8>, String> {
    std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))
}

fn tls_config(t: &TlsFiles) -> Result<ServerTlsConfig, String> {
    let mut cfg = ServerTlsConfig::new().identity(Identity::from_pem(read(&t.cert)?, read(&t.key)?));
    if let Some(ca) = &t.client_ca {
        cfg = cfg.client_ca_root(Certificate::from_pem(read(ca)?));
    }
    Ok(cfg)
}

/// Runs the server until SIGTERM or SIGINT. Prints `listening on ADDR`
/// (the bound address, so port 0 works) on stdout once it accepts calls.
pub fn serve(opts: ServeOptions) -> Result<(), String> {
    opts.limits.check()?;
    keep_freed_memory();
    let tokens = match &opts.tokens {
        Some(p) => Tokens::load(p).map_err(|e| e.to_string())?,
        None => Tokens::none(),
    };
    // One reactor thread by default: a small request then wakes no other
    // thread on its way (PERFORMANCE.md, Server), and request work runs on
    // the blocking pool.
    let mut rt = match opts.reactor_threads {
        0 => return Err("--reactor-threads must be at least 1".into()),
        1 => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
    };
    let rt = rt
        .enable_all()
        .max_blocking_threads(opts.threads.max(opts.limits.max_concurrent) + 4)
        .thread_name("solidgraph-serve")
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    rt.block_on(run(opts, tokens))
}

/// Request work runs on the blocking pool's threads, whose glibc arenas
/// give the memory of each reply's buffers back to the kernel when the
/// call ends (heaps trimmed, large blocks unmapped), so the next call
/// faults it in again (docs/PERFORMANCE.md, Server). Fixed thresholds
/// keep up to `TRIM_THRESHOLD` free per arena instead; setting them also
/// turns off glibc's adaptive ones.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // Largest allocation served from an arena rather than its own mmap
        // (glibc's most), and the free memory an arena keeps at its top.
        const MMAP_THRESHOLD: i32 = 32 << 20;
        const TRIM_THRESHOLD: i32 = 128 << 20;
        // SAFETY: mallopt changes the allocator's parameters under its
        // own lock; any thread may call it.
        let ok = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 };
        if !ok {
            tracing::warn!("mallopt refused the allocator thresholds; replies' memory is faulted in per call");
        }
    }
}

async fn run(opts: ServeOptions, tokens: Tokens) -> Result<(), String> {
    let listener = TcpListener::bind(&opts.listen).await.map_err(|e| format!("listen on {}: {e}", opts.listen))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    if !tokens.enabled() && !addr.ip().is_loopback() {
        return Err(format!("refusing to listen on {addr} without --tokens: an unauthenticated server listens on loopback only (127.0.0.1, ::1)"));
    }
    let stores = Arc::new(Stores::open(&opts.stores, opts.data_dir.as_deref(), &opts.open).map_err(|e| e.to_string())?);
    if let Some(m) = opts.metrics {
        telemetry::install(m)?;
        tokio::spawn(telemetry::store_counters(stores.clone(), Duration::from_secs(1)));
    }
    tokio::spawn(crate::stores::track_warmth(stores.clone(), Duration::from_millis(100)));
    let gate = Arc::new(Gate::new(opts.limits.clone()));
    let max = opts.limits.max_message_bytes;

    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_serving::<GraphServer<GraphService>>().await;
    reporter.set_serving::<UpdatesServer<UpdatesService>>().await;
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(crate::proto::DESCRIPTOR)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .map_err(|e| e.to_string())?;

    let shm = Arc::new(crate::shm::ShmRegions::new(opts.shm.clone()));
    let read_auth = tokens.clone();
    let graph = Replies::new(Arc::new(GraphService { stores: stores.clone(), gate: gate.clone(), shm: shm.clone() }), max);
    let graph = tonic::service::interceptor::InterceptedService::new(graph, move |r: Request<()>| -> Result<Request<()>, Status> {
        read_auth.check(&r, Role::Read)?;
        Ok(r)
    });
    let write_auth = tokens.clone();
    let updates = UpdatesServer::new(UpdatesService { stores: stores.clone(), gate }).max_decoding_message_size(max).max_encoding_message_size(max);
    let updates = tonic::service::interceptor::InterceptedService::new(updates, move |r: Request<()>| -> Result<Request<()>, Status> {
        write_auth.check(&r, Role::Write)?;
        Ok(r)
    });

    let mut builder = Server::builder().timeout(opts.limits.deadline).tcp_nodelay(true);
    if let Some(t) = &opts.tls {
        builder = builder.tls_config(tls_config(t)?).map_err(|e| format!("TLS: {e}"))?;
    }
    // tonic's OUT_OF_RANGE for an oversize message goes out as RESOURCE_EXHAUSTED.
    let mut builder = builder.layer(tower::util::MapResponseLayer::new(crate::oversize::response));
    let router = builder.add_service(health).add_service(reflection).add_service(graph).add_service(updates);
    tracing::info!(%addr, stores = ?stores.names(), auth = tokens.enabled(), tls = opts.tls.is_some(), "listening");
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "listening on {addr}");
        let _ = out.flush();
    }
    // No Nagle delay for small replies; keepalive finds dead clients.
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true)).with_keepalive(Some(Duration::from_secs(60)));
    // Each connection's shared-memory regions go when it ends.
    let incoming = tokio_stream::StreamExt::map(incoming, move |c| c.map(|s| crate::shm::Conn::new(s, shm.clone())));
    router.serve_with_incoming_shutdown(incoming, shutdown_signal()).await.map_err(|e| format!("server: {e}"))?;
    tracing::info!("stopped accepting; in-flight calls done; flushing the WAL");
    for (name, s) in stores.all() {
        if s.writable
            && let Err(e) = s.store.flush()
        {
            tracing::error!(store = %name, error = %e, "flush at shutdown failed");
            return Err(format!("{name}: flush at shutdown: {e}"));
        }
    }
    tracing::info!("shut down");
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::error!("cannot install signal handlers; stop the server with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM"),
        _ = int.recv() => tracing::info!("SIGINT"),
    }
}
