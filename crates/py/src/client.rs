//! The remote client's bulk reads (`solidgraph.connect`): a server's
//! array replies (Neighbors, Degree, EdgeWeights, Tensor, SampleNeighbors,
//! RandomWalks) taken in by tonic's HTTP/2 channel with the GIL released
//! and decoded into numpy arrays over the received bytes.
//!
//! Each gRPC message is copied once, from the HTTP/2 data frames into an
//! 8-byte aligned buffer of its length; the server puts every chunk's data
//! at a multiple of 8 bytes into its message (solidgraph.proto), so an
//! array that arrives whole in one chunk is a numpy view of that buffer,
//! which the array keeps alive. Only an array split over several chunks is
//! copied again, into a buffer of its own. grpcio's receive path copied
//! each message three times in Python and held the GIL while doing it.
//!
//! The framing is by hand (as `solidgraph_server::replies` frames them):
//! tonic's codec would copy each message into a buffer whose alignment is
//! not ours to choose. Failures come back as a gRPC status code and
//! message, which Python maps to the same error classes the grpcio path
//! raises; a reply that breaks the framing is DATA_LOSS.

use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use numpy::npyffi::{self, PY_ARRAY_API, npy_intp};
use numpy::{PyArrayDescr, PyArrayDescrMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tonic::codegen::Service;
use tonic::codegen::http::{self, HeaderMap, HeaderValue};
use tonic::transport::{Channel, Endpoint};

/// gRPC status codes used here (the wire values).
const OK: u32 = 0;
const UNKNOWN: u32 = 2;
const INVALID_ARGUMENT: u32 = 3;
const DEADLINE_EXCEEDED: u32 = 4;
const RESOURCE_EXHAUSTED: u32 = 8;
const INTERNAL: u32 = 13;
const UNAVAILABLE: u32 = 14;
const DATA_LOSS: u32 = 15;
const UNAUTHENTICATED: u32 = 16;

/// Most dimensions an array of a reply may have.
const MAX_DIMS: usize = 8;
/// Most messages one reply may hold (16 MiB each at the server's default).
const MAX_MESSAGES: usize = 1 << 16;

/// A failed call: its gRPC status code and message.
struct Failure {
    code: u32,
    message: String,
}

impl Failure {
    fn new(code: u32, message: impl Into<String>) -> Failure {
        Failure { code, message: message.into() }
    }
}

/// The runtime that drives every channel's connection. Two workers: the
/// machines this runs on give a client process a core or two, and each
/// connection's frames are read by one task at a time anyway.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("solidgraph-client")
            .enable_all()
            .build()
            .expect("the client's runtime starts (threads and an epoll instance)")
    })
}

/// One connection to a server, for the calls that answer with arrays.
#[pyclass(frozen, module = "solidgraph._native", name = "RemoteChannel")]
pub struct RemoteChannel {
    channel: Channel,
    authority: String,
    authorization: Option<HeaderValue>,
    max_message: usize,
    /// The shared-memory region array replies go to (`shm_create`).
    shm: std::sync::Mutex<Option<std::sync::Arc<ShmPool>>>,
    /// Set when a server answered that it does not hold the region (it
    /// restarted, or the channel reconnected): the region is dropped and
    /// the caller registers a new one (`shm_lost`).
    shm_lost: std::sync::atomic::AtomicBool,
}

#[pymethods]
impl RemoteChannel {
    /// A plaintext HTTP/2 channel to `addr` ("host:port"), connected on
    /// its first call (as grpcio's channels are). `token`: the bearer
    /// token sent with every call; `max_message`: the largest reply
    /// message taken in (RESOURCE_EXHAUSTED above it).
    #[new]
    #[pyo3(signature = (addr, token=None, max_message=64 << 20))]
    fn new(addr: &str, token: Option<&str>, max_message: usize) -> PyResult<RemoteChannel> {
        let bad = |why: String| crate::errors::invalid(format!("cannot connect to {addr:?}: {why}"));
        let endpoint = Endpoint::from_shared(format!("http://{addr}")).map_err(|e| bad(e.to_string()))?;
        // Windows that take a whole sampling reply (~9 MB) without waiting
        // for the client's window updates, and frames of 1 MiB rather than
        // 16 KiB: fewer frame headers and wakeups per message.
        let endpoint = endpoint
            .tcp_nodelay(true)
            .initial_stream_window_size(32 << 20)
            .initial_connection_window_size(64 << 20)
            .max_frame_size(1 << 20)
            .connect_timeout(Duration::from_secs(20));
        let authorization = match token {
            None => None,
            Some(t) => Some(HeaderValue::from_str(&format!("Bearer {t}")).map_err(|_| bad("the token is not a valid header value".into()))?),
        };
        let _guard = runtime().enter();
        let channel = endpoint.connect_lazy();
        Ok(RemoteChannel {
            channel,
            authority: addr.to_string(),
            authorization,
            max_message,
            shm: std::sync::Mutex::new(None),
            shm_lost: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Calls the server-streaming method `path` ("/solidgraph.v1.Graph/
    /// Neighbors") with the encoded request message `request`, with a
    /// deadline of `timeout` seconds. Returns (status code, message,
    /// arrays): the arrays by name when the code is 0, else None.
    #[pyo3(signature = (path, request, timeout=None))]
    fn call(&self, py: Python<'_>, path: &str, request: &[u8], timeout: Option<f64>) -> PyResult<(u32, String, Option<Py<PyDict>>)> {
        let body = frame(request);
        let deadline = match timeout {
            Some(t) if !(t.is_finite() && t >= 0.0) => return Err(crate::errors::invalid(format!("timeout must be a number of seconds >= 0, not {t}"))),
            Some(t) => Some(Duration::from_secs_f64(t.min(1e9))),
            None => None,
        };
        let mut req = self.request(path, body, deadline).map_err(|f| crate::errors::invalid(f.message))?;
        let pool = self.shm.lock().expect("the shm lock is not poisoned").clone();
        let lease = pool.as_ref().and_then(|p| p.lend());
        if let Some(l) = &lease
            && let Some(h) = l.pool.header(l.index)
        {
            req.headers_mut().insert("solidgraph-shm", h);
        }
        let channel = self.channel.clone();
        let max_message = self.max_message;
        let unknown = std::sync::atomic::AtomicBool::new(false);
        let got = py.allow_threads(|| {
            let call = receive(channel, req, max_message, &unknown);
            let messages = runtime().block_on(async {
                match deadline {
                    Some(d) => tokio::time::timeout(d, call).await.unwrap_or_else(|_| Err(Failure::new(DEADLINE_EXCEEDED, "Deadline Exceeded"))),
                    None => call.await,
                }
            })?;
            assemble(messages, lease.as_ref().map(Lease::range))
        });
        if unknown.load(std::sync::atomic::Ordering::Relaxed)
            && let Some(l) = &lease
        {
            self.forget_region(&l.pool);
        }
        match got {
            Ok(arrays) => Ok((OK, String::new(), Some(to_numpy(py, arrays, lease)?))),
            Err(f) => Ok((f.code, f.message, None)),
        }
    }

    /// Calls the unary method `path` with the encoded request message;
    /// returns (status code, message, the reply message's bytes or None).
    /// For RegisterShm and ReleaseShm, which belong to this connection.
    #[pyo3(signature = (path, request, timeout=None))]
    fn unary(&self, py: Python<'_>, path: &str, request: &[u8], timeout: Option<f64>) -> PyResult<(u32, String, Option<Py<pyo3::types::PyBytes>>)> {
        let deadline = match timeout {
            Some(t) if !(t.is_finite() && t >= 0.0) => return Err(crate::errors::invalid(format!("timeout must be a number of seconds >= 0, not {t}"))),
            Some(t) => Some(Duration::from_secs_f64(t.min(1e9))),
            None => None,
        };
        let req = self.request(path, frame(request), deadline).map_err(|f| crate::errors::invalid(f.message))?;
        let (channel, max_message) = (self.channel.clone(), self.max_message);
        let unknown = std::sync::atomic::AtomicBool::new(false);
        let got = py.allow_threads(|| {
            let call = receive(channel, req, max_message, &unknown);
            let mut messages = runtime().block_on(async {
                match deadline {
                    Some(d) => tokio::time::timeout(d, call).await.unwrap_or_else(|_| Err(Failure::new(DEADLINE_EXCEEDED, "Deadline Exceeded"))),
                    None => call.await,
                }
            })?;
            match messages.len() {
                1 => Ok(messages.pop().expect("one message")),
                n => Err(Failure::new(INTERNAL, format!("a unary reply of {n} messages"))),
            }
        });
        match got {
            Ok(m) => Ok((OK, String::new(), Some(pyo3::types::PyBytes::new(py, m.bytes()).unbind()))),
            Err(f) => Ok((f.code, f.message, None)),
        }
    }

    /// Creates a shared-memory region of `slots` slots of `slot_bytes`
    /// (a file on /dev/shm, not yet used) and returns (path, size, cookie)
    /// for the server's RegisterShm; then `shm_attach` with the region's
    /// name, or `shm_abandon`.
    fn shm_create(&self, py: Python<'_>, slots: usize, slot_bytes: usize) -> PyResult<(String, u64, Py<pyo3::types::PyBytes>)> {
        let (pool, cookie) = ShmPool::create(slots, slot_bytes).map_err(|e| crate::errors::invalid(format!("creating a shared-memory region: {e}")))?;
        let out = (pool.path.display().to_string(), pool.len as u64, pyo3::types::PyBytes::new(py, &cookie).unbind());
        let old = self.shm.lock().expect("the shm lock is not poisoned").replace(std::sync::Arc::new(pool));
        self.shm_lost.store(false, std::sync::atomic::Ordering::Relaxed);
        drop(old);
        Ok(out)
    }

    /// Whether the server said it does not hold the region (it restarted,
    /// or the channel reconnected): the region is dropped, and calls reply
    /// inline until `shm_create` and `shm_attach` make a new one.
    fn shm_lost(&self) -> bool {
        self.shm_lost.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Maps the region the server registered as `region` and sends array
    /// replies there from now on (each call that finds a free slot).
    fn shm_attach(&self, region: String) -> PyResult<()> {
        let pool = self.shm.lock().expect("the shm lock is not poisoned").clone();
        let pool = pool.ok_or_else(|| crate::errors::invalid("no shared-memory region was created (shm_create)"))?;
        pool.attach(region).map_err(|e| crate::errors::invalid(format!("mapping the shared-memory region: {e}")))
    }

    /// Drops the region: calls reply inline again; arrays over its slots
    /// keep it mapped until they go.
    fn shm_abandon(&self) {
        let old = self.shm.lock().expect("the shm lock is not poisoned").take();
        drop(old);
    }

    /// (region name, free slots, slots) of the attached region, or None.
    fn shm_state(&self) -> Option<(String, usize, usize)> {
        let pool = self.shm.lock().expect("the shm lock is not poisoned").clone()?;
        let region = pool.region.get()?.clone();
        let free = pool.free.lock().expect("the free list's lock is not poisoned").len();
        Some((region, free, (pool.len - SHM_HEAD) / pool.slot_bytes))
    }

    fn __repr__(&self) -> String {
        format!("<solidgraph._native.RemoteChannel {}>", self.authority)
    }
}

impl RemoteChannel {
    /// Drops `pool` as the region, if it still is: the server does not
    /// hold it. Arrays over its slots keep its memory until they go.
    fn forget_region(&self, pool: &std::sync::Arc<ShmPool>) {
        let mut cur = self.shm.lock().expect("the shm lock is not poisoned");
        if cur.as_ref().is_some_and(|p| std::sync::Arc::ptr_eq(p, pool)) {
            let old = cur.take();
            self.shm_lost.store(true, std::sync::atomic::Ordering::Relaxed);
            drop(cur);
            drop(old);
        }
    }

    fn request(&self, path: &str, body: Bytes, deadline: Option<Duration>) -> Result<http::Request<tonic::body::Body>, Failure> {
        let uri = format!("http://{}{}", self.authority, path);
        let mut req = http::Request::new(tonic::body::Body::new(Once(Some(body))));
        *req.method_mut() = http::Method::POST;
        *req.uri_mut() = uri.parse().map_err(|_| Failure::new(INVALID_ARGUMENT, format!("{uri:?} is not a valid URI")))?;
        let h = req.headers_mut();
        h.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        h.insert(http::header::TE, HeaderValue::from_static("trailers"));
        if let Some(a) = &self.authorization {
            h.insert(http::header::AUTHORIZATION, a.clone());
        }
        if let Some(d) = deadline {
            // gRPC's timeout header: at most 8 digits and a unit.
            let ms = d.as_millis().clamp(1, 99_999_999);
            h.insert("grpc-timeout", HeaderValue::from_str(&format!("{ms}m")).expect("digits and a unit are a valid header value"));
        }
        Ok(req)
    }
}

/// The request message with gRPC's prefix (uncompressed, 4-byte length).
fn frame(message: &[u8]) -> Bytes {
    let mut b = Vec::with_capacity(5 + message.len());
    b.push(0);
    b.extend_from_slice(&(message.len() as u32).to_be_bytes());
    b.extend_from_slice(message);
    Bytes::from(b)
}

/// A request body of one data frame.
struct Once(Option<Bytes>);

impl http_body::Body for Once {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.0.take().map(|b| Ok(http_body::Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_none()
    }
}

/// A gRPC message's bytes in an 8-byte aligned buffer.
struct Message {
    words: Vec<u64>,
    len: usize,
}

impl Message {
    /// A buffer an array's chunks are copied into, in any order.
    fn zeroed(len: usize) -> Message {
        Message { words: vec![0; len.div_ceil(8)], len }
    }

    /// A buffer filled front to back by `append`, never zeroed: once
    /// glibc's mmap threshold has risen past a reply's size, a zeroed one
    /// costs a memset of the whole reply (14% of the client's CPU).
    fn filled_later(len: usize) -> Message {
        Message { words: Vec::with_capacity(len.div_ceil(8)), len }
    }

    /// Copies `data` to byte `at` of a `filled_later` buffer, where the
    /// bytes before `at` are filled; when that completes the message, its
    /// last word's padding is zeroed and the words become its contents.
    fn append(&mut self, at: usize, data: &[u8]) {
        let words = self.len.div_ceil(8);
        assert!(self.words.is_empty() && self.words.capacity() >= words, "append to a filled_later buffer");
        assert!(at + data.len() <= self.len, "{} bytes at {at} overrun a message of {}", data.len(), self.len);
        let base = self.words.as_mut_ptr().cast::<u8>();
        // SAFETY: bytes at..at + len lie inside the capacity (asserted),
        // `data` is another allocation; set_len follows only once every
        // byte of every word is written (the message, then its padding).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), base.add(at), data.len());
            if at + data.len() == self.len {
                std::ptr::write_bytes(base.add(self.len), 0, words * 8 - self.len);
                self.words.set_len(words);
            }
        }
    }

    fn bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }
}

/// Sends the call and reads the reply's messages, each into its own
/// aligned buffer; the status from the trailers (or from the headers of a
/// Trailers-Only reply). Sets `unknown` when the server says it does not
/// hold the shared-memory region the request named.
async fn receive(
    mut channel: Channel,
    req: http::Request<tonic::body::Body>,
    max_message: usize,
    unknown: &std::sync::atomic::AtomicBool,
) -> Result<Vec<Message>, Failure> {
    let unavailable = |e: tonic::transport::Error| {
        // The channel enforces the grpc-timeout header itself, so a short
        // deadline may fire there rather than in `call`'s timer.
        if timed_out(&e) { Failure::new(DEADLINE_EXCEEDED, "Deadline Exceeded") } else { Failure::new(UNAVAILABLE, transport_message(&e)) }
    };
    std::future::poll_fn(|cx| channel.poll_ready(cx)).await.map_err(unavailable)?;
    let reply = channel.call(req).await.map_err(unavailable)?;
    let (head, mut body) = reply.into_parts();
    if head.headers.get("solidgraph-shm").is_some_and(|v| v == "unknown-region") {
        unknown.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    // Trailers-Only: the status in the headers, no messages.
    match status(&head.headers) {
        Some(Err(f)) => return Err(f),
        Some(Ok(())) => return Ok(Vec::new()),
        None => {}
    }
    if head.status != http::StatusCode::OK {
        return Err(Failure::new(http_code(head.status), format!("the server answered HTTP {}", head.status)));
    }
    let mut reader = Reader::new(max_message);
    loop {
        let frame = std::future::poll_fn(|cx| http_body::Body::poll_frame(Pin::new(&mut body), cx)).await;
        let frame = match frame {
            None => return Err(Failure::new(INTERNAL, "the reply ended without a status (no trailers)")),
            Some(Err(e)) => return Err(Failure::new(UNAVAILABLE, format!("the reply broke off: {e}"))),
            Some(Ok(f)) => f,
        };
        match frame.into_data() {
            Ok(data) => reader.take(data)?,
            Err(frame) => {
                let Ok(trailers) = frame.into_trailers() else { continue };
                return match status(&trailers) {
                    Some(Err(f)) => Err(f),
                    Some(Ok(())) => reader.finish(),
                    None => Err(Failure::new(INTERNAL, "the reply's trailers hold no grpc-status")),
                };
            }
        }
    }
}

/// Whether tonic's own deadline (`TimeoutExpired`) is in `e`'s source chain.
fn timed_out(e: &tonic::transport::Error) -> bool {
    let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(x) = src {
        if x.is::<tonic::TimeoutExpired>() {
            return true;
        }
        src = x.source();
    }
    false
}

fn transport_message(e: &tonic::transport::Error) -> String {
    // The source chain says what failed (connection refused, reset, ...).
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(x) = src {
        s.push_str(": ");
        s.push_str(&x.to_string());
        src = x.source();
    }
    s
}

/// gRPC's mapping of HTTP statuses of replies without a grpc-status.
fn http_code(s: http::StatusCode) -> u32 {
    match s.as_u16() {
        400 => INTERNAL,
        401 => UNAUTHENTICATED,
        403 => 7,
        404 => 12,
        429 | 502..=504 => UNAVAILABLE,
        _ => UNKNOWN,
    }
}

/// The grpc-status of `headers`: None without one, Ok for OK, else the
/// failure with its percent-decoded grpc-message.
fn status(headers: &HeaderMap) -> Option<Result<(), Failure>> {
    let code = headers.get("grpc-status")?;
    let code: u32 = match std::str::from_utf8(code.as_bytes()).ok().and_then(|s| s.parse().ok()) {
        Some(c) if c <= 16 => c,
        _ => return Some(Err(Failure::new(UNKNOWN, format!("the reply's grpc-status {code:?} is not a status code")))),
    };
    if code == OK {
        return Some(Ok(()));
    }
    let message = headers.get("grpc-message").map(|m| percent_decode(m.as_bytes())).unwrap_or_default();
    Some(Err(Failure { code, message }))
}

fn percent_decode(s: &[u8]) -> String {
    let hex = |c: u8| (c as char).to_digit(16);
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match (s[i], s.get(i + 1).and_then(|&c| hex(c)), s.get(i + 2).and_then(|&c| hex(c))) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Cuts the reply's data frames into gRPC messages: a 5-byte prefix
/// (compression flag, big-endian length), then the message, copied into an
/// aligned buffer of its length.
struct Reader {
    max_message: usize,
    prefix: [u8; 5],
    have_prefix: usize,
    current: Option<(Message, usize)>,
    done: Vec<Message>,
}

impl Reader {
    fn new(max_message: usize) -> Reader {
        Reader { max_message, prefix: [0; 5], have_prefix: 0, current: None, done: Vec::new() }
    }

    fn take(&mut self, mut data: Bytes) -> Result<(), Failure> {
        while data.has_remaining() {
            if let Some((msg, filled)) = &mut self.current {
                let n = (msg.len - *filled).min(data.len());
                msg.append(*filled, &data[..n]);
                *filled += n;
                data.advance(n);
                if *filled == msg.len {
                    let (m, _) = self.current.take().expect("current is Some in this arm");
                    self.done.push(m);
                }
                continue;
            }
            let n = (5 - self.have_prefix).min(data.len());
            self.prefix[self.have_prefix..self.have_prefix + n].copy_from_slice(&data[..n]);
            self.have_prefix += n;
            data.advance(n);
            if self.have_prefix == 5 {
                self.start_message()?;
            }
        }
        Ok(())
    }

    fn start_message(&mut self) -> Result<(), Failure> {
        self.have_prefix = 0;
        if self.prefix[0] != 0 {
            return Err(Failure::new(INTERNAL, "the server sent a compressed message, which this client did not ask for"));
        }
        let len = u32::from_be_bytes([self.prefix[1], self.prefix[2], self.prefix[3], self.prefix[4]]) as usize;
        if len > self.max_message {
            return Err(Failure::new(
                RESOURCE_EXHAUSTED,
                format!("a reply message of {len} bytes is over the limit of {} (connect's max_message)", self.max_message),
            ));
        }
        if self.done.len() >= MAX_MESSAGES {
            return Err(Failure::new(RESOURCE_EXHAUSTED, format!("a reply of over {MAX_MESSAGES} messages")));
        }
        let msg = Message::filled_later(len);
        if len == 0 {
            self.done.push(msg);
        } else {
            self.current = Some((msg, 0));
        }
        Ok(())
    }

    fn finish(self) -> Result<Vec<Message>, Failure> {
        if self.current.is_some() || self.have_prefix != 0 {
            return Err(Failure::new(DATA_LOSS, "the reply ended inside a message"));
        }
        Ok(self.done)
    }
}

/// One chunk of an `Arrays` message (solidgraph.proto's ArrayChunk), its
/// data as a byte range of the message.
struct Chunk {
    name: String,
    dtype: String,
    shape: Vec<u64>,
    offset: u64,
    data: std::ops::Range<usize>,
    /// (offset, length) in the shared-memory region, when it went there.
    shm: Option<(u64, u64)>,
}

fn malformed(what: &str) -> Failure {
    Failure::new(DATA_LOSS, format!("a result message is malformed: {what}"))
}

fn varint(b: &[u8], i: &mut usize) -> Result<u64, Failure> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let x = *b.get(*i).ok_or_else(|| malformed("it ends inside a number"))?;
        *i += 1;
        v |= u64::from(x & 0x7f) << shift;
        if x < 0x80 {
            return Ok(v);
        }
    }
    Err(malformed("a number of over 10 bytes"))
}

/// The fields of a protobuf message: (field, wire type, varint value or
/// the byte range of a length-delimited value) from `base` on.
fn fields(b: &[u8], mut f: impl FnMut(u64, u64, u64, std::ops::Range<usize>) -> Result<(), Failure>) -> Result<(), Failure> {
    let mut i = 0;
    while i < b.len() {
        let key = varint(b, &mut i)?;
        let (field, wire) = (key >> 3, key & 7);
        match wire {
            0 => {
                let v = varint(b, &mut i)?;
                f(field, wire, v, 0..0)?;
            }
            2 => {
                let n = varint(b, &mut i)?;
                let end =
                    usize::try_from(n).ok().and_then(|n| i.checked_add(n)).filter(|&e| e <= b.len()).ok_or_else(|| malformed("a field runs past its end"))?;
                f(field, wire, 0, i..end)?;
                i = end;
            }
            1 | 5 => i += if wire == 1 { 8 } else { 4 },
            _ => return Err(malformed(&format!("a field of wire type {wire}"))),
        }
    }
    if i != b.len() {
        return Err(malformed("a fixed-size field runs past its end"));
    }
    Ok(())
}

fn chunks(msg: &[u8], out: &mut Vec<(usize, Chunk)>, index: usize) -> Result<(), Failure> {
    let text = |r: std::ops::Range<usize>| String::from_utf8(msg[r].to_vec()).map_err(|_| malformed("a name that is not UTF-8"));
    fields(msg, |field, wire, _, range| {
        if field != 1 || wire != 2 {
            return Ok(());
        }
        let base = range.start;
        let mut c = Chunk { name: String::new(), dtype: String::new(), shape: Vec::new(), offset: 0, data: 0..0, shm: None };
        fields(&msg[range], |f, w, v, r| {
            let r = base + r.start..base + r.end;
            match (f, w) {
                (1, 2) => c.name = text(r)?,
                (2, 2) => c.dtype = text(r)?,
                (3, 2) => {
                    let mut j = r.start;
                    while j < r.end {
                        c.shape.push(varint(&msg[..r.end], &mut j)?);
                    }
                }
                (3, 0) => c.shape.push(v),
                (4, 0) => c.offset = v,
                (5, 2) => c.data = r,
                (6, 2) => {
                    let mut span = (0, 0);
                    fields(&msg[r], |f, w, v, _| {
                        match (f, w) {
                            (1, 0) => span.0 = v,
                            (2, 0) => span.1 = v,
                            _ => {}
                        }
                        Ok(())
                    })?;
                    c.shm = Some(span);
                }
                _ => {}
            }
            if c.shape.len() > MAX_DIMS {
                return Err(malformed(&format!("an array of over {MAX_DIMS} dimensions")));
            }
            Ok(())
        })?;
        if !c.name.is_empty() {
            out.push((index, c)); // a chunk without a name is padding
        }
        Ok(())
    })
}

/// The bytes an element of `dtype` takes.
fn itemsize(dtype: &str) -> Option<usize> {
    Some(match dtype {
        "bool" | "uint8" | "int8" => 1,
        "float16" | "int16" | "uint16" => 2,
        "float32" | "int32" | "uint32" => 4,
        "float64" | "int64" | "uint64" => 8,
        _ => return None,
    })
}

/// Where an array's bytes are: a range of one message (the array arrived
/// whole in one aligned chunk), or a buffer of its own.
enum Data {
    View {
        message: usize,
        range: std::ops::Range<usize>,
    },
    /// Bytes of the shared-memory region, inside the call's slot.
    Shm(std::ops::Range<usize>),
    Owned(Message),
}

struct Assembled {
    name: String,
    dtype: String,
    shape: Vec<u64>,
    data: Data,
    got: usize,
}

/// The named arrays of a reply's messages. Chunks never overlap (the
/// server slices each array once), so an array whose chunks' lengths add
/// up to its size has every byte.
fn assemble(messages: Vec<Message>, slot: Option<std::ops::Range<usize>>) -> Result<(Vec<Message>, Vec<Assembled>), Failure> {
    let mut all = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        chunks(m.bytes(), &mut all, i)?;
    }
    let total: usize = messages.iter().map(|m| m.len).sum();
    let mut out: Vec<Assembled> = Vec::new();
    for (index, c) in all {
        if let Some(span) = c.shm {
            out.push(in_slot(&c, span, slot.as_ref(), &out)?);
            continue;
        }
        let pos = match out.iter().position(|a| a.name == c.name) {
            Some(p) => p,
            None => {
                let item = itemsize(&c.dtype).ok_or_else(|| malformed(&format!("array {:?} has dtype {:?}", c.name, c.dtype)))?;
                let size = c
                    .shape
                    .iter()
                    .try_fold(item as u64, |a, &d| a.checked_mul(d))
                    .and_then(|s| usize::try_from(s).ok())
                    .filter(|&s| s <= total)
                    .ok_or_else(|| malformed(&format!("array {:?} of shape {:?} is larger than the reply", c.name, c.shape)))?;
                let whole = c.offset == 0 && c.data.len() == size;
                let aligned = (messages[index].bytes().as_ptr() as usize + c.data.start).is_multiple_of(item);
                let data = if whole && aligned { Data::View { message: index, range: c.data.clone() } } else { Data::Owned(Message::zeroed(size)) };
                out.push(Assembled { name: c.name.clone(), dtype: c.dtype.clone(), shape: c.shape.clone(), data, got: 0 });
                out.len() - 1
            }
        };
        let a = &mut out[pos];
        let size = match &a.data {
            Data::View { range, .. } | Data::Shm(range) => range.len(),
            Data::Owned(m) => m.len,
        };
        let end = usize::try_from(c.offset).ok().and_then(|o| o.checked_add(c.data.len()));
        let item = itemsize(&a.dtype).unwrap_or(1);
        match end {
            Some(end) if end <= size && c.data.len().is_multiple_of(item) && a.got + c.data.len() <= size => {
                if let Data::Owned(m) = &mut a.data {
                    m.bytes_mut()[end - c.data.len()..end].copy_from_slice(&messages[index].bytes()[c.data.clone()]);
                }
                a.got += c.data.len();
            }
            _ => return Err(malformed(&format!("array {:?}: a chunk of {} bytes at {} does not fit its {size} bytes", a.name, c.data.len(), c.offset))),
        }
    }
    for a in &out {
        let size = match &a.data {
            Data::View { range, .. } | Data::Shm(range) => range.len(),
            Data::Owned(m) => m.len,
        };
        if a.got != size {
            return Err(malformed(&format!("array {:?}: {} bytes arrived for {size}", a.name, a.got)));
        }
    }
    Ok((messages, out))
}

/// An array the server wrote into the call's shared-memory slot: whole,
/// inside the slot, aligned for its dtype, and named once.
fn in_slot(c: &Chunk, (offset, length): (u64, u64), slot: Option<&std::ops::Range<usize>>, seen: &[Assembled]) -> Result<Assembled, Failure> {
    let Some(slot) = slot else {
        return Err(malformed(&format!("array {:?} is in shared memory, which this call did not offer", c.name)));
    };
    if seen.iter().any(|a| a.name == c.name) || c.offset != 0 || !c.data.is_empty() {
        return Err(malformed(&format!("array {:?}: a shared-memory chunk that is not the whole array", c.name)));
    }
    let item = itemsize(&c.dtype).ok_or_else(|| malformed(&format!("array {:?} has dtype {:?}", c.name, c.dtype)))?;
    let size = c.shape.iter().try_fold(item as u64, |a, &d| a.checked_mul(d));
    let start = usize::try_from(offset).ok();
    let range = match (size, start) {
        (Some(s), Some(start))
            if s == length && start >= slot.start && start.checked_add(s as usize).is_some_and(|e| e <= slot.end) && start.is_multiple_of(item) =>
        {
            start..start + s as usize
        }
        _ => return Err(malformed(&format!("array {:?}: {length} bytes at {offset} of shared memory do not fit its shape or the slot", c.name))),
    };
    Ok(Assembled { name: c.name.clone(), dtype: c.dtype.clone(), shape: c.shape.clone(), got: range.len(), data: Data::Shm(range) })
}

/// Keeps a reply's buffer alive for the numpy arrays over it.
#[pyclass(frozen, module = "solidgraph._native", name = "_ReplyBuffer")]
struct ReplyBuffer {
    #[allow(dead_code)] // held for its memory, read through the arrays
    message: Message,
}

/// The arrays as numpy arrays over the buffers (no copy); each array's
/// base object owns the buffer. Writable: the buffers are this reply's
/// alone, as the local Graph's results are the caller's.
fn to_numpy(py: Python<'_>, (messages, arrays): (Vec<Message>, Vec<Assembled>), lease: Option<Lease>) -> PyResult<Py<PyDict>> {
    // The slot's owner object, made only when an array is in it; else the
    // lease drops here and the slot is free again.
    let mut slot_owner: Option<Bound<'_, ShmSlot>> = None;
    let mut lease = lease;
    let owners: Vec<Option<Bound<'_, ReplyBuffer>>> =
        messages.into_iter().map(|m| if m.len == 0 { Ok(None) } else { Bound::new(py, ReplyBuffer { message: m }).map(Some) }).collect::<PyResult<_>>()?;
    let out = PyDict::new(py);
    for a in arrays {
        let (owner, ptr) = match a.data {
            Data::View { message, range } => {
                let o = owners[message].clone().expect("a view's message is not empty");
                let ptr = o.get().message.bytes()[range].as_ptr();
                (o.into_any(), ptr)
            }
            Data::Owned(m) => {
                let o = Bound::new(py, ReplyBuffer { message: m })?;
                let ptr = o.get().message.bytes().as_ptr();
                (o.into_any(), ptr)
            }
            Data::Shm(range) => {
                if slot_owner.is_none() {
                    let l = lease.take().expect("assemble accepts shared-memory arrays only with a lease");
                    slot_owner = Some(Bound::new(py, ShmSlot { lease: l })?);
                }
                let o = slot_owner.clone().expect("set above");
                let ptr = o.get().lease.ptr(range.start).cast_const();
                (o.into_any(), ptr)
            }
        };
        let descr = PyArrayDescr::new(py, a.dtype.as_str())?;
        let mut dims: Vec<npy_intp> = a.shape.iter().map(|&d| d as npy_intp).collect();
        // SAFETY: `ptr` points at prod(shape) * itemsize bytes (checked in
        // assemble) inside `owner`'s buffer or shared-memory slot, which the
        // array holds as its base and which nothing else reads or writes
        // (the server wrote the slot before replying; the slot is lent to
        // no other call until its owner is dropped); NewFromDescr steals
        // the descr reference, SetBaseObject the owner's.
        let arr = unsafe {
            let raw = PY_ARRAY_API.PyArray_NewFromDescr(
                py,
                PY_ARRAY_API.get_type_object(py, npyffi::NpyTypes::PyArray_Type),
                descr.into_dtype_ptr(),
                dims.len() as std::os::raw::c_int,
                dims.as_mut_ptr(),
                std::ptr::null_mut(),
                ptr as *mut std::os::raw::c_void,
                npyffi::NPY_ARRAY_WRITEABLE,
                std::ptr::null_mut(),
            );
            let arr = Bound::from_owned_ptr_or_err(py, raw)?;
            if PY_ARRAY_API.PyArray_SetBaseObject(py, raw as *mut npyffi::PyArrayObject, owner.into_ptr()) != 0 {
                return Err(PyErr::fetch(py));
            }
            arr
        };
        out.set_item(a.name, arr)?;
    }
    Ok(out.unbind())
}

/// The client's shared-memory region (solidgraph.proto's RegisterShm): a
/// file on /dev/shm it creates (0600, an unguessable name, never following
/// a symlink), cut into slots of `slot_bytes`, each lent to one call at a
/// time and back in the free list only once every array over it is gone.
/// Its first page holds the cookie the server checks at registration.
pub struct ShmPool {
    path: std::path::PathBuf,
    file: std::fs::File,
    len: usize,
    slot_bytes: usize,
    /// The mapping once registered (then the file is unlinked).
    map: OnceLock<Mapping>,
    region: OnceLock<String>,
    free: std::sync::Mutex<Vec<usize>>,
}

/// Where the slots start: after the cookie's page.
const SHM_HEAD: usize = 4096;
/// Most slots a region holds.
const MAX_SLOTS: usize = 4096;

struct Mapping(*mut u8);

// SAFETY: the mapping's memory is plain bytes; each slot is written by the
// server only while one call holds it, and read through the arrays after.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl ShmPool {
    /// Creates the file (not yet mapped): `slots` slots of `slot_bytes`.
    fn create(slots: usize, slot_bytes: usize) -> std::io::Result<(ShmPool, Vec<u8>)> {
        use std::io::{Error, ErrorKind, Read, Write};
        use std::os::unix::fs::OpenOptionsExt;
        if slots == 0 || slots > MAX_SLOTS || slot_bytes == 0 || !slot_bytes.is_multiple_of(SHM_HEAD) {
            return Err(Error::new(ErrorKind::InvalidInput, format!("1-{MAX_SLOTS} slots of a multiple of {SHM_HEAD} bytes, not {slots} of {slot_bytes}")));
        }
        let len = slots.checked_mul(slot_bytes).and_then(|n| n.checked_add(SHM_HEAD)).ok_or_else(|| Error::new(ErrorKind::InvalidInput, "region too large"))?;
        let mut random = [0u8; 48];
        std::fs::File::open("/dev/urandom")?.read_exact(&mut random)?;
        let hex: String = random[..16].iter().map(|b| format!("{b:02x}")).collect();
        let path = std::path::PathBuf::from(format!("/dev/shm/solidgraph-{}-{hex}", std::process::id()));
        let mut file =
            std::fs::OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(&path)?;
        let cookie = random[16..].to_vec();
        let setup = file.set_len(len as u64).and_then(|_| file.write_all(&cookie));
        if let Err(e) = setup {
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        let free = (0..slots).rev().collect();
        Ok((ShmPool { path, file, len, slot_bytes, map: OnceLock::new(), region: OnceLock::new(), free: std::sync::Mutex::new(free) }, cookie))
    }

    /// Maps the registered file, its pages faulted in now rather than on a
    /// call's first use of a slot, and unlinks it: the memory lives while
    /// this mapping or the server's does.
    fn attach(&self, region: String) -> std::io::Result<()> {
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh shared mapping of our own file of `len` bytes.
        let ptr = unsafe {
            libc::mmap(std::ptr::null_mut(), self.len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_POPULATE, self.file.as_raw_fd(), 0)
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let _ = self.map.set(Mapping(ptr.cast()));
        let _ = self.region.set(region);
        self.unlink();
        Ok(())
    }

    fn unlink(&self) {
        let _ = std::fs::remove_file(&self.path);
    }

    /// A free slot, or None when every slot holds a reply still in use.
    fn lend(self: &std::sync::Arc<Self>) -> Option<Lease> {
        self.map.get()?;
        let index = self.free.lock().expect("the free list's lock is not poisoned").pop()?;
        Some(Lease { pool: self.clone(), index })
    }

    /// The request header naming slot `index`: "REGION/OFFSET/CAPACITY".
    fn header(&self, index: usize) -> Option<HeaderValue> {
        let region = self.region.get()?;
        HeaderValue::from_str(&format!("{region}/{}/{}", SHM_HEAD + index * self.slot_bytes, self.slot_bytes)).ok()
    }
}

impl Drop for ShmPool {
    fn drop(&mut self) {
        if let Some(m) = self.map.get() {
            // SAFETY: the mapping made in `attach`; no lease (and so no
            // array) outlives the pool, since each holds an Arc of it.
            unsafe { libc::munmap(m.0.cast(), self.len) };
        } else {
            self.unlink();
        }
    }
}

/// One call's slot; back in the free list when dropped.
struct Lease {
    pool: std::sync::Arc<ShmPool>,
    index: usize,
}

impl Lease {
    /// The slot's byte range in the region.
    fn range(&self) -> std::ops::Range<usize> {
        let start = SHM_HEAD + self.index * self.pool.slot_bytes;
        start..start + self.pool.slot_bytes
    }

    fn ptr(&self, offset: usize) -> *mut u8 {
        let m = self.pool.map.get().expect("a lease is of a mapped pool");
        assert!(offset < self.pool.len);
        // SAFETY: inside the mapping (asserted).
        unsafe { m.0.add(offset) }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.pool.free.lock().expect("the free list's lock is not poisoned").push(self.index);
    }
}

/// Keeps a shared-memory slot lent for the numpy arrays over it.
#[pyclass(frozen, module = "solidgraph._native", name = "_ShmSlot")]
struct ShmSlot {
    lease: Lease,
}
