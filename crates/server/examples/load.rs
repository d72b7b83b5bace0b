//! A load generator for the small-request bar: `clients` concurrent gRPC
//! clients, each on its own HTTP/2 connection, each sending one-vertex
//! Neighbors calls back to back for `seconds`; prints requests/s and the
//! p50/p99 latency.
//!
//!     cargo run --release -p solidgraph-server --example load -- ADDR STORE CLIENTS SECONDS
//!
//! ADDR is `http://host:port` of `solidgraph serve`; vertices are drawn
//! uniformly below the store's vertex count (warm after the first pass).

use std::time::{Duration, Instant};

use solidgraph_server::proto::graph_client::GraphClient;
use solidgraph_server::proto::{Array, InfoRequest, NeighborsRequest};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// One client's calls until `until`: each call's latency in microseconds.
async fn client(addr: String, store: String, n: u64, seed: u64, until: Instant) -> Result<Vec<u32>, Error> {
    let mut c = GraphClient::connect(addr).await?;
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
    let [_, addr, store, clients, seconds] = &args[..] else {
        return Err("usage: load ADDR STORE CLIENTS SECONDS".into());
    };
    let (clients, seconds): (u64, f64) = (clients.parse()?, seconds.parse()?);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(async {
        let n = GraphClient::connect(addr.clone()).await?.info(InfoRequest { store: store.clone() }).await?.into_inner().num_nodes;
        let until = Instant::now() + Duration::from_secs_f64(seconds);
        let t0 = Instant::now();
        let tasks: Vec<_> = (0..clients).map(|i| tokio::spawn(client(addr.clone(), store.clone(), n, 0x9E37_79B9 * (i + 1), until))).collect();
        let mut lat = Vec::new();
        for t in tasks {
            lat.extend(t.await??);
        }
        let took = t0.elapsed().as_secs_f64();
        lat.sort_unstable();
        let q = |p: f64| lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1))).copied().unwrap_or(0);
        println!(
            "{{\"clients\": {clients}, \"requests\": {}, \"seconds\": {took:.2}, \"requests_per_s\": {:.0}, \"p50_us\": {}, \"p99_us\": {}}}",
            lat.len(),
            lat.len() as f64 / took,
            q(0.5),
            q(0.99)
        );
        Ok(())
    })
}
