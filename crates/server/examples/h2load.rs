//! A lean load generator for the small-request bar: `clients` concurrent
//! one-vertex Neighbors calls, each a stream on one of `connections`
//! HTTP/2 connections (client i on connection i % connections, as gRPC
//! clients in one process share a channel), back to back for `seconds`;
//! prints requests/s, p50/p99 latency and its own CPU time a request.
//!
//!     cargo build --release -p solidgraph-server --example h2load
//!     target/release/examples/h2load ADDR STORE CLIENTS SECONDS [CONNECTIONS] [VERTICES]
//!
//! It costs the machine it shares with the server little: requests are
//! encoded once up front (gRPC frames of 8,192 uniform random vertices
//! below VERTICES, default the store's count from Info), each call goes out
//! through `h2` directly (no tower stack, no protobuf decoding of replies)
//! on one thread. Every reply is checked: HTTP 200, a well-framed message
//! and grpc-status 0 in the trailers, else it stops with the error.

use std::time::{Duration, Instant};

use bytes::Bytes;
use prost::Message;
use solidgraph_server::proto::graph_client::GraphClient;
use solidgraph_server::proto::{Array, InfoRequest, NeighborsRequest};
use tokio::net::TcpStream;
use tonic::codegen::http::{self, HeaderMap, HeaderValue, Method, Request, Uri};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Requests encoded up front; a call takes one at random.
const ENCODED: usize = 8192;

/// The calls' shared, ready-made parts.
struct Calls {
    uri: Uri,
    headers: HeaderMap,
    bodies: Vec<Bytes>,
}

impl Calls {
    fn new(authority: &str, store: &str, n: u64) -> Result<Calls, Error> {
        let uri: Uri = format!("http://{authority}/solidgraph.v1.Graph/Neighbors").parse()?;
        let mut headers = HeaderMap::new();
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert(http::header::TE, HeaderValue::from_static("trailers"));
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let bodies = (0..ENCODED)
            .map(|_| {
                x = xorshift(x);
                let ids = Array { dtype: "int64".into(), shape: vec![1], data: ((x % n) as i64).to_le_bytes().to_vec().into() };
                let msg =
                    NeighborsRequest { store: store.into(), ids: Some(ids), direction: String::new(), with_weights: false, with_labels: false }.encode_to_vec();
                let mut b = Vec::with_capacity(5 + msg.len());
                b.push(0);
                b.extend_from_slice(&(msg.len() as u32).to_be_bytes());
                b.extend_from_slice(&msg);
                Bytes::from(b)
            })
            .collect();
        Ok(Calls { uri, headers, bodies })
    }

    fn request(&self) -> Request<()> {
        let mut r = Request::new(());
        *r.method_mut() = Method::POST;
        *r.uri_mut() = self.uri.clone();
        *r.headers_mut() = self.headers.clone();
        r
    }
}

fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// One call: the request out, the whole reply read and checked. Returns
/// the reply's message bytes.
async fn call(h2: &mut h2::client::SendRequest<Bytes>, calls: &Calls, body: Bytes) -> Result<usize, Error> {
    let (reply, mut send) = h2.send_request(calls.request(), false)?;
    send.send_data(body, true)?;
    let reply = reply.await?;
    if reply.status() != http::StatusCode::OK {
        return Err(format!("HTTP status {}", reply.status()).into());
    }
    // A refusal comes as gRPC's Trailers-Only reply: the status in the headers.
    status(reply.headers())?;
    let mut body = reply.into_body();
    let mut bytes = 0usize;
    // The message's prefix, however the data frames split it.
    let mut prefix = [0u8; 5];
    while let Some(data) = body.data().await {
        let data = data?;
        if bytes < prefix.len() {
            let n = (prefix.len() - bytes).min(data.len());
            prefix[bytes..bytes + n].copy_from_slice(&data[..n]);
        }
        bytes += data.len();
        body.flow_control().release_capacity(data.len())?;
    }
    let trailers = body.trailers().await?.ok_or("a reply without trailers")?;
    if !status(&trailers)? {
        return Err("a reply without grpc-status".into());
    }
    // Neighbors answers in one message when the list is small: its prefix
    // must declare the rest of the body.
    let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    if bytes < prefix.len() || prefix[0] != 0 || len + prefix.len() != bytes {
        return Err(format!("a reply of {bytes} bytes is not one uncompressed gRPC message (its prefix: {prefix:?})").into());
    }
    Ok(bytes)
}

/// Whether `h` holds a grpc-status; an error if it is not OK.
fn status(h: &HeaderMap) -> Result<bool, Error> {
    let Some(status) = h.get("grpc-status") else {
        return Ok(false);
    };
    if status != "0" {
        let msg = h.get("grpc-message").map(|m| String::from_utf8_lossy(m.as_bytes()).into_owned()).unwrap_or_default();
        return Err(format!("grpc-status {status:?}: {msg}").into());
    }
    Ok(true)
}

/// One client's calls until `until`: each call's latency in microseconds.
async fn client(mut h2: h2::client::SendRequest<Bytes>, calls: std::rc::Rc<Calls>, seed: u64, until: Instant) -> Result<Vec<u32>, Error> {
    let mut lat = Vec::with_capacity(1 << 16);
    let mut x = seed | 1;
    while Instant::now() < until {
        x = xorshift(x);
        let body = calls.bodies[(x % ENCODED as u64) as usize].clone();
        let t = Instant::now();
        h2 = h2.ready().await?;
        call(&mut h2, &calls, body).await?;
        lat.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32);
    }
    Ok(lat)
}

/// CPU time (user + system) of this process so far.
fn cpu_time() -> Duration {
    // SAFETY: getrusage only writes into the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    if !(5..=7).contains(&args.len()) {
        return Err("usage: h2load ADDR STORE CLIENTS SECONDS [CONNECTIONS] [VERTICES]".into());
    }
    let (addr, store) = (&args[1], &args[2]);
    let clients: u64 = args[3].parse()?;
    let seconds: f64 = args[4].parse()?;
    let conns = args.get(5).map(|k| k.parse::<u64>()).transpose()?.unwrap_or(clients).clamp(1, clients.max(1));
    let vertices = args.get(6).map(|v| v.parse::<u64>()).transpose()?;
    let authority = addr.strip_prefix("http://").unwrap_or(addr).to_string();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async {
        let n = match vertices {
            Some(n) => n,
            None => GraphClient::connect(format!("http://{authority}")).await?.info(InfoRequest { store: store.clone() }).await?.into_inner().num_nodes,
        };
        if n == 0 {
            return Err("the store has no vertices".into());
        }
        let calls = std::rc::Rc::new(Calls::new(&authority, store, n)?);
        let mut senders = Vec::new();
        for _ in 0..conns {
            let tcp = TcpStream::connect(&authority).await?;
            tcp.set_nodelay(true)?;
            let (send, conn) = h2::client::Builder::new().initial_window_size(1 << 20).initial_connection_window_size(1 << 24).handshake(tcp).await?;
            tokio::task::spawn_local(async move {
                if let Err(e) = conn.await {
                    eprintln!("connection: {e}");
                }
            });
            senders.push(send);
        }
        let (cpu0, t0) = (cpu_time(), Instant::now());
        let until = t0 + Duration::from_secs_f64(seconds);
        let tasks: Vec<_> =
            (0..clients).map(|i| tokio::task::spawn_local(client(senders[(i % conns) as usize].clone(), calls.clone(), 0x9E37_79B9 * (i + 1), until))).collect();
        let mut lat = Vec::new();
        for t in tasks {
            lat.extend(t.await??);
        }
        let (took, cpu) = (t0.elapsed().as_secs_f64(), (cpu_time() - cpu0).as_secs_f64());
        lat.sort_unstable();
        let q = |p: f64| lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1))).copied().unwrap_or(0);
        let reqs = lat.len().max(1) as f64;
        println!(
            "{{\"clients\": {clients}, \"connections\": {conns}, \"requests\": {}, \"seconds\": {took:.2}, \"requests_per_s\": {:.0}, \"p50_us\": {}, \"p99_us\": {}, \"own_cpu_us\": {:.1}}}",
            lat.len(),
            lat.len() as f64 / took,
            q(0.5),
            q(0.99),
            cpu * 1e6 / reqs
        );
        Ok(())
    })
}
