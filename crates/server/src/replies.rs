//! Array replies framed by hand. tonic's codec encodes each reply message
//! into one buffer: a copy of every byte, into fresh memory for a sampled
//! batch's megabytes. The calls that answer with `Arrays` go through this
//! service instead: it decodes the request as tonic would, runs the same
//! handler (`GraphService`), and hands hyper each chunk's data as the
//! `Bytes` it already is, behind a few bytes of protobuf framing written
//! here, so h2 writes the data to the socket from where the engine left it.
//! Other calls, and requests it does not take (a compressed request), go
//! to tonic's generated service unchanged.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http_body::{Body as HttpBody, Frame};
use prost::Message;
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::{BoxFuture, http};
use tonic::server::NamedService;
use tonic::transport::server::TcpConnectInfo;
use tower::Service;

use crate::graph::{ArraysStream, GraphService};
use crate::proto::graph_server::GraphServer;
use crate::proto::{ArrayChunk, Arrays};
use crate::shm::{Lent, Slot};

/// gRPC's message prefix: a compression flag, then a big-endian length.
const PREFIX: usize = 5;

/// Data at most this long is copied into its framing instead of going out
/// as a frame of its own: a copy of a few KiB costs less than a frame.
const INLINE_DATA: usize = 4096;

/// The Graph calls answered here.
#[derive(Clone, Copy, Debug)]
enum Call {
    Neighbors,
    Degree,
    EdgeWeights,
    Tensor,
    SampleNeighbors,
    RandomWalks,
    ShardSample,
}

impl Call {
    fn of(path: &str) -> Option<Call> {
        Some(match path.strip_prefix("/solidgraph.v1.Graph/")? {
            "Neighbors" => Call::Neighbors,
            "Degree" => Call::Degree,
            "EdgeWeights" => Call::EdgeWeights,
            "Tensor" => Call::Tensor,
            "SampleNeighbors" => Call::SampleNeighbors,
            "RandomWalks" => Call::RandomWalks,
            "ShardSample" => Call::ShardSample,
            _ => return None,
        })
    }
}

/// The Graph service with its array replies framed here.
#[derive(Clone)]
pub struct Replies {
    graph: Arc<GraphService>,
    inner: GraphServer<GraphService>,
    max_message: usize,
}

impl Replies {
    pub fn new(graph: Arc<GraphService>, max_message: usize) -> Replies {
        let inner = GraphServer::from_arc(graph.clone()).max_decoding_message_size(max_message).max_encoding_message_size(max_message);
        Replies { graph, inner, max_message }
    }
}

impl NamedService for Replies {
    const NAME: &'static str = <GraphServer<GraphService> as NamedService>::NAME;
}

impl Service<http::Request<Body>> for Replies {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let identity = req.headers().get("grpc-encoding").is_none_or(|v| v == "identity");
        let Some(call) = Call::of(req.uri().path()).filter(|_| identity) else {
            return self.inner.call(req);
        };
        let (graph, max) = (self.graph.clone(), self.max_message);
        let lent = shm_slot(&graph, &req);
        Box::pin(async move {
            let unknown = matches!(lent, Ok(Some(Lent::Unknown)));
            let slot = lent.map(|l| match l {
                Some(Lent::Slot(s)) => Some(s),
                _ => None,
            });
            let reply = match (slot, request(req.into_body(), max).await) {
                (Ok(slot), Ok(msg)) => answer(&graph, call, msg, slot).await,
                (Err(s), _) | (_, Err(s)) => Err(s),
            };
            let mut r = match reply {
                Ok(stream) => respond(stream, max),
                Err(s) => s.into_http(),
            };
            if unknown {
                r.headers_mut().insert(crate::shm::HEADER, http::HeaderValue::from_static(crate::shm::UNKNOWN));
            }
            Ok(r)
        })
    }
}

/// What the shared-memory slot the request names (`shm`) gets, from a
/// loopback peer only; None without a header or from another host.
fn shm_slot(graph: &GraphService, req: &http::Request<Body>) -> Result<Option<Lent>, Status> {
    let Some(h) = req.headers().get(crate::shm::HEADER) else {
        return Ok(None);
    };
    let peer = req.extensions().get::<TcpConnectInfo>().and_then(|i| i.remote_addr());
    match peer {
        Some(p) if p.ip().is_loopback() => graph.shm.slot(p, h.as_bytes()).map(Some),
        _ => Ok(None),
    }
}

/// The one message of a unary request's body, without its prefix; a
/// message over `max` bytes is refused before more of it is read.
async fn request(mut body: Body, max: usize) -> Result<Bytes, Status> {
    let mut buf = BytesMut::new();
    while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await {
        let frame = frame.map_err(|e| Status::internal(format!("reading the request: {e}")))?;
        if let Ok(data) = frame.into_data() {
            buf.extend_from_slice(&data);
            if let Some(len) = declared(&buf) {
                too_large(len, max)?;
            }
        }
    }
    let Some(len) = declared(&buf) else {
        return Err(Status::internal("the request has no message"));
    };
    if buf[0] != 0 {
        return Err(Status::internal("a compressed message without grpc-encoding"));
    }
    if buf.len() != PREFIX + len {
        return Err(Status::internal(format!("the request's body holds {} bytes, not one message of {len}", buf.len() - PREFIX)));
    }
    Ok(buf.freeze().slice(PREFIX..))
}

/// The length a message's prefix declares, once the prefix is in `buf`.
fn declared(buf: &[u8]) -> Option<usize> {
    let len: [u8; 4] = buf.get(1..PREFIX)?.try_into().ok()?;
    Some(u32::from_be_bytes(len) as usize)
}

/// tonic's refusal of a message over the limit, with gRPC's code for it.
fn too_large(len: usize, max: usize) -> Result<(), Status> {
    if len > max {
        return Err(Status::resource_exhausted(format!(
            "Error, decoded message length too large: found {len} bytes, the limit is: {max} bytes (the server's --max-message)"
        )));
    }
    Ok(())
}

fn decode<M: Message + Default>(msg: Bytes) -> Result<M, Status> {
    M::decode(msg).map_err(|e| Status::invalid_argument(format!("the request is not a valid message: {e}")))
}

/// Runs `call`'s handler on the request message; its arrays go to `slot`
/// when the caller named one (`shm`).
async fn answer(g: &GraphService, call: Call, msg: Bytes, slot: Option<Slot>) -> Result<ArraysStream, Status> {
    let reply = match call {
        Call::Neighbors => g.neighbors_to(decode(msg)?, slot).await,
        Call::Degree => g.degree_to(decode(msg)?, slot).await,
        Call::EdgeWeights => g.edge_weights_to(decode(msg)?, slot).await,
        Call::Tensor => g.tensor_to(decode(msg)?, slot).await,
        Call::SampleNeighbors => g.sample_neighbors_to(decode(msg)?, slot).await,
        Call::RandomWalks => g.random_walks_to(decode(msg)?, slot).await,
        Call::ShardSample => g.shard_sample_impl(decode(msg)?, slot).await,
    }?;
    Ok(reply.into_inner())
}

/// The reply: the messages' frames, then gRPC's OK in the trailers (or the
/// stream's error, after the messages before it).
fn respond(stream: ArraysStream, max: usize) -> http::Response<Body> {
    let mut frames = VecDeque::new();
    let mut status = Status::ok("");
    for msg in stream {
        match msg.and_then(|m| frame(&m, max, &mut frames)) {
            Ok(()) => {}
            Err(s) => {
                status = s;
                break;
            }
        }
    }
    let mut trailers = http::HeaderMap::new();
    if status.add_header(&mut trailers).is_err() {
        trailers.insert(Status::GRPC_STATUS, http::HeaderValue::from(i32::from(status.code())));
    }
    let mut r = http::Response::new(Body::new(Frames { frames, trailers: Some(trailers) }));
    r.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/grpc"));
    r
}

/// Appends one message's frames: its prefix and each chunk's fields as
/// bytes written here, each chunk's data (past `INLINE_DATA`) as itself.
/// The bytes are those prost writes for the message.
fn frame(m: &Arrays, max: usize, out: &mut VecDeque<Bytes>) -> Result<(), Status> {
    let len = m.encoded_len();
    if len > max {
        return Err(Status::resource_exhausted(format!("a reply message of {len} bytes is over the server's limit of {max}")));
    }
    let mut head = BytesMut::with_capacity(64 * m.chunks.len() + PREFIX);
    head.put_u8(0);
    head.put_u32(u32::try_from(len).map_err(|_| Status::internal("a reply message over 4 GiB"))?);
    let start = out.len();
    for c in &m.chunks {
        let body = c.encoded_len();
        prost::encoding::encode_key(1, prost::encoding::WireType::LengthDelimited, &mut head);
        prost::encoding::encode_varint(body as u64, &mut head);
        if c.data.len() <= INLINE_DATA {
            c.encode_raw(&mut head);
            continue;
        }
        // The chunk's fields before its data (the last field), then the data's key and length.
        let fields = ArrayChunk { name: c.name.clone(), dtype: c.dtype.clone(), shape: c.shape.clone(), offset: c.offset, data: Bytes::new(), shm: None };
        fields.encode_raw(&mut head);
        prost::encoding::encode_key(5, prost::encoding::WireType::LengthDelimited, &mut head);
        prost::encoding::encode_varint(c.data.len() as u64, &mut head);
        out.push_back(head.split().freeze());
        out.push_back(c.data.clone());
    }
    if !head.is_empty() {
        out.push_back(head.freeze());
    }
    debug_assert_eq!(out.range(start..).map(Bytes::len).sum::<usize>(), PREFIX + len);
    Ok(())
}

/// A reply body: data frames, then the trailers.
struct Frames {
    frames: VecDeque<Bytes>,
    trailers: Option<http::HeaderMap>,
}

impl HttpBody for Frames {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if let Some(data) = self.frames.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }

    fn is_end_stream(&self) -> bool {
        self.frames.is_empty() && self.trailers.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrays::Out;

    /// The frames hold exactly prost's encoding of each message, behind
    /// gRPC's prefix.
    #[test]
    fn frames_are_prosts_bytes() {
        let mut out = Out::default();
        out.int64("small", &[1, 2, 3]);
        out.int64("large", &(0..5000).collect::<Vec<u64>>());
        out.float32("empty", &[]);
        out.uint32("other", &(0..3000).collect::<Vec<u32>>());
        for chunk in [1 << 20, 10_000, 3] {
            let msgs = out.clone().into_messages(chunk);
            let mut frames = VecDeque::new();
            for m in &msgs {
                frame(m, 64 << 20, &mut frames).unwrap();
            }
            let got: Vec<u8> = frames.iter().flat_map(|b| b.iter().copied()).collect();
            let mut want = Vec::new();
            for m in &msgs {
                let b = m.encode_to_vec();
                want.push(0);
                want.extend_from_slice(&(b.len() as u32).to_be_bytes());
                want.extend_from_slice(&b);
            }
            assert_eq!(got, want, "chunk {chunk}");
        }
        let big = out.into_messages(1 << 20);
        assert_eq!(frame(&big[0], 100, &mut VecDeque::new()).unwrap_err().code(), tonic::Code::ResourceExhausted);
    }

    #[test]
    fn requests_are_checked() {
        let body = |b: &[u8]| Body::new(http_body_util_full(Bytes::copy_from_slice(b)));
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let ok = rt.block_on(request(body(&[0, 0, 0, 0, 2, 8, 1]), 100)).unwrap();
        assert_eq!(&ok[..], &[8, 1]);
        let big = rt.block_on(request(body(&[0, 0, 0, 1, 0]), 100)).unwrap_err();
        assert_eq!(big.code(), tonic::Code::ResourceExhausted);
        assert!(big.message().contains("too large") && big.message().contains("limit is: 100 bytes"), "{}", big.message());
        assert_eq!(rt.block_on(request(body(&[]), 100)).unwrap_err().code(), tonic::Code::Internal);
        assert_eq!(rt.block_on(request(body(&[1, 0, 0, 0, 0]), 100)).unwrap_err().code(), tonic::Code::Internal);
        assert_eq!(rt.block_on(request(body(&[0, 0, 0, 0, 2, 8]), 100)).unwrap_err().code(), tonic::Code::Internal);
        let bad = decode::<crate::proto::NeighborsRequest>(Bytes::from_static(&[0xff])).unwrap_err();
        assert_eq!(bad.code(), tonic::Code::InvalidArgument);
    }

    /// A body of one data frame.
    fn http_body_util_full(b: Bytes) -> Frames {
        Frames { frames: VecDeque::from([b]), trailers: None }
    }
}
