//! Metrics (Prometheus, served on `--metrics ADDR` at /metrics) and the
//! store counters behind them. Names follow Prometheus conventions:
//! `solidgraph_requests_total{method,code}`, the latency histogram
//! `solidgraph_request_seconds{method}`, `solidgraph_response_bytes_total`,
//! and per store the I/O, byte and cache counters, pending updates and
//! `solidgraph_store_wal_syncs_total` (syncs of the write-ahead log).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::PrometheusBuilder;
use tonic::Code;

use crate::stores::Stores;

const LATENCY_BUCKETS: &[f64] = &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0];

/// Starts the /metrics listener on `addr` (inside a tokio runtime).
pub fn install(addr: SocketAddr) -> Result<(), String> {
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .set_buckets_for_metric(metrics_exporter_prometheus::Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)
        .map_err(|e| e.to_string())?
        .install()
        .map_err(|e| format!("metrics on {addr}: {e}"))
}

/// A code's name as a static label (no allocation per request).
fn code_name(c: Code) -> &'static str {
    match c {
        Code::Ok => "Ok",
        Code::Cancelled => "Cancelled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

pub fn request(method: &'static str, code: Option<Code>, took: Duration) {
    let code = code_name(code.unwrap_or(Code::Ok));
    counter!("solidgraph_requests_total", "method" => method, "code" => code).increment(1);
    histogram!("solidgraph_request_seconds", "method" => method).record(took.as_secs_f64());
}

pub fn response_bytes(method: &'static str, n: u64) {
    counter!("solidgraph_response_bytes_total", "method" => method).increment(n);
}

pub fn request_bytes(method: &'static str, n: u64) {
    counter!("solidgraph_request_bytes_total", "method" => method).increment(n);
}

/// Copies each store's counters into gauges every `every` (a scrape sees
/// them at most that old).
pub async fn store_counters(stores: Arc<Stores>, every: Duration) {
    loop {
        for (name, s) in stores.all() {
            let st = s.store.stats();
            let rows = st.rows.unwrap_or_default();
            let n = name.clone();
            gauge!("solidgraph_store_ios", "store" => n.clone()).set(st.ios() as f64);
            gauge!("solidgraph_store_bytes_read", "store" => n.clone()).set(st.bytes_read() as f64);
            gauge!("solidgraph_store_page_cache_hits", "store" => n.clone()).set(st.cache.hits as f64);
            gauge!("solidgraph_store_page_cache_misses", "store" => n.clone()).set(st.cache.misses as f64);
            gauge!("solidgraph_store_row_cache_hits", "store" => n.clone()).set(rows.hits as f64);
            gauge!("solidgraph_store_row_cache_misses", "store" => n.clone()).set(rows.misses as f64);
            gauge!("solidgraph_store_pending_updates", "store" => n.clone()).set(s.store.pending_updates() as f64);
            // A counter: the store's own count only grows while it is open.
            counter!("solidgraph_store_wal_syncs_total", "store" => n).absolute(st.wal_syncs);
        }
        tokio::time::sleep(every).await;
    }
}
