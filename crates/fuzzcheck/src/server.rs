//! `server`: request messages of every method the server accepts, decoded,
//! checked and run by the Graph and Updates services (as `serve` routes
//! them, without a network) against a fresh copy of the store fixture on
//! the simulated disk, writable, so updates and merges run too.
//!
//! data[0] picks the method; data[1..] is a list of messages, each `len
//! u16 | bytes`, framed as gRPC's length-prefixed messages in one request
//! body (UpdateGraph streams several; a unary call given more is refused).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use http_body_util::Full;
use solidgraph_io::SimDisk;
use solidgraph_server::{Limits, Stores, inproc};
use solidgraph_store::{BackendChoice, OpenOptions};
use tonic::body::Body;
use tonic::codegen::http;
use tonic::codegen::{Body as _, Bytes, Service};

/// Every method the server's Graph and Updates services answer.
pub const METHODS: [&str; 20] = [
    "/solidgraph.v1.Graph/ListStores",
    "/solidgraph.v1.Graph/Info",
    "/solidgraph.v1.Graph/Neighbors",
    "/solidgraph.v1.Graph/Degree",
    "/solidgraph.v1.Graph/EdgeWeights",
    "/solidgraph.v1.Graph/Tensor",
    "/solidgraph.v1.Graph/SampleNeighbors",
    "/solidgraph.v1.Graph/RandomWalks",
    "/solidgraph.v1.Graph/Analytics",
    "/solidgraph.v1.Graph/ShardInfo",
    "/solidgraph.v1.Graph/ShardSample",
    "/solidgraph.v1.Updates/AddVertices",
    "/solidgraph.v1.Updates/DeleteVertices",
    "/solidgraph.v1.Updates/AddEdges",
    "/solidgraph.v1.Updates/DeleteEdges",
    "/solidgraph.v1.Updates/UpdateEdgeWeights",
    "/solidgraph.v1.Updates/UpdateTensor",
    "/solidgraph.v1.Updates/Flush",
    "/solidgraph.v1.Updates/Merge",
    "/solidgraph.v1.Updates/UpdateGraph",
];

/// The name the fixture is served under (its directory's name).
pub const STORE: &str = "g.sg";

/// Reply bytes read at most (replies of the small fixture are KiBs; the
/// limits bound the rest).
const MAX_REPLY: usize = 64 << 20;

/// Limits small enough that no input makes the server's work large: ids,
/// fanouts and messages are what the fuzzer varies, and the limits'
/// checks are part of what it reaches.
fn limits() -> Limits {
    Limits {
        max_message_bytes: 1 << 20,
        max_ids: 4096,
        max_fanout: 64,
        max_concurrent: 2,
        max_queued: 4,
        deadline: Duration::from_secs(10),
        chunk_bytes: 256 << 10,
        max_graph_bytes: 1 << 20,
        max_graph_vertices: 1 << 20,
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_all().max_blocking_threads(4).build().expect("a tokio runtime"))
}

/// The gRPC body `server` makes of `data[1..]`.
pub fn body(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 2 <= data.len() {
        let len = u16::from_le_bytes([data[at], data[at + 1]]) as usize;
        let m = &data[at + 2..(at + 2 + len).min(data.len())];
        out.push(0);
        out.extend_from_slice(&(m.len() as u32).to_be_bytes());
        out.extend_from_slice(m);
        at += 2 + len;
    }
    out
}

pub fn server(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else { return };
    let method = METHODS[sel as usize % METHODS.len()];
    let f = crate::fixture();
    let scratch = crate::scratch();
    // A fresh copy per input: the fixture's directory (its log emptied;
    // not its member file, which the simulated disk holds), its image on a
    // new simulated disk, and an empty data dir.
    let dir = scratch.join(STORE);
    let data_dir = scratch.join("served");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&data_dir);
    std::fs::create_dir_all(&dir).expect("scratch store dir");
    std::fs::create_dir_all(&data_dir).expect("scratch data dir");
    let member = solidgraph_store::member_path(&f.dir, 0);
    for e in std::fs::read_dir(&f.dir).expect("fixture dir") {
        let p = e.expect("fixture entry").path();
        if p.is_file() && p != member && p.file_name().is_some_and(|n| n != "wal.log") {
            std::fs::copy(&p, dir.join(p.file_name().expect("a name"))).expect("copy fixture file");
        }
    }
    std::fs::write(dir.join("wal.log"), b"").expect("empty log");
    let disk = SimDisk::new(1, 1);
    disk.load(0, f.image.clone());
    let o = OpenOptions { writable: true, cache_bytes: 1 << 20, backend: BackendChoice::Sim(disk), ..Default::default() };
    let Ok(stores) = Stores::open(&[&dir], Some(&data_dir), &o) else { return };
    let mut routes = inproc::routes(Arc::new(stores), limits());
    let req = http::Request::builder()
        .method("POST")
        .uri(format!("http://in-process{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Body::new(Full::new(Bytes::from(body(rest)))))
        .expect("a request");
    runtime().block_on(async move {
        let Ok(resp) = routes.call(req).await;
        let mut b = resp.into_body();
        let mut read = 0;
        while let Some(frame) = std::future::poll_fn(|cx| std::pin::Pin::new(&mut b).poll_frame(cx)).await {
            let Ok(frame) = frame else { break };
            if let Ok(d) = frame.into_data() {
                read += d.len();
                assert!(read <= MAX_REPLY, "{method}: a reply past {MAX_REPLY} bytes");
            }
        }
    });
}
