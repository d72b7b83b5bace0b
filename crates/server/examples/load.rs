//! A load generator for the small-request bar: `clients` concurrent gRPC
//! clients, each sending one-vertex Neighbors calls back to back for
//! `seconds`, over `connections` HTTP/2 connections (one per client unless
//! given; client i uses connection i % connections, as gRPC clients in one
//! process share a channel); prints requests/s and the p50/p99 latency.
//!
//!     cargo run --release -p solidgraph-server --example load -- ADDR STORE CLIENTS SECONDS [CONNECTIONS]
//!
//! ADDR is `http://host:port` of `solidgraph serve`; vertices are drawn
//! uniformly below the store's vertex count (warm after the first pass).

use std::time::{Duration, Instant};

use solidgraph_server::proto::graph_client::GraphClient;
use solidgraph_server::proto::{Array, InfoRequest, NeighborsRequest};
use tonic::transport::{Channel, Endpoint};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// One client's calls until `until`: each call's latency in microseconds.
async fn client(channel: Channel, store: String, n: u64, seed: u64, until: Instant) -> Result<Vec<u32>, Error> {
    let mut c = GraphClient::new(channel);
    let mut lat = Vec::new();
    let mut x = seed | 1;
    while Instant::now() < until {
        // xorshift64: a cheap uniform vertex per call.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let v = (x % n) as i64;
        let ids = Array { dtype: "int64".into(), shape: vec![1], data: v.to_le_bytes().to_vec().into() };
        let req = NeighborsRequest { store: store.clone(), ids: Some(ids), direction: String::new(), with_weights: false, with_labels: false };
        let t = Instant::now();
        let mut s = c.neighbors(req).await?.into_inner();
        while s.message().await?.is_some() {}
        lat.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32);
    }
    Ok(lat)
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let (addr, store, clients, seconds, conns) = match &args[..] {
        [_, a, s, c, t] => (a, s, c.parse::<u64>()?, t.parse::<f64>()?, None),
        [_, a, s, c, t, k] => (a, s, c.parse::<u64>()?, t.parse::<f64>()?, Some(k.parse::<u64>()?)),
        _ => return Err("usage: load ADDR STORE CLIENTS SECONDS [CONNECTIONS]".into()),
    };
    let conns = conns.unwrap_or(clients).clamp(1, clients.max(1));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let mut channels = Vec::new();
        for _ in 0..conns {
            channels.push(Endpoint::from_shared(addr.clone())?.tcp_nodelay(true).connect().await?);
        }
        let n = GraphClient::new(channels[0].clone()).info(InfoRequest { store: store.clone() }).await?.into_inner().num_nodes;
        let until = Instant::now() + Duration::from_secs_f64(seconds);
        let t0 = Instant::now();
        let tasks: Vec<_> = (0..clients).map(|i| tokio::spawn(client(channels[(i % conns) as usize].clone(), store.clone(), n, 0x9E37_79B9 * (i + 1), until))).collect();
        let mut lat = Vec::new();
        for t in tasks {
            lat.extend(t.await??);
        }
        let took = t0.elapsed().as_secs_f64();
        lat.sort_unstable();
        let q = |p: f64| lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1))).copied().unwrap_or(0);
        println!(
            "{{\"clients\": {clients}, \"connections\": {conns}, \"requests\": {}, \"seconds\": {took:.2}, \"requests_per_s\": {:.0}, \"p50_us\": {}, \"p99_us\": {}}}",
            lat.len(),
            lat.len() as f64 / took,
            q(0.5),
            q(0.99)
        );
        Ok(())
    })
}
