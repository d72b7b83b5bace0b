//! The Graph service: reads, sampling and walks, each the same call as the
//! local API (`solidgraph.Graph`), with ids mapped the same way.

use std::sync::Arc;

use solidgraph_engine::loader::batch_seed;
use solidgraph_engine::sampler::{self, Sample, SampleOptions, Subgraph};
use solidgraph_engine::walks::{self, WalkOptions};
use solidgraph_store::superblock::TensorMeta;
use solidgraph_store::{Direction, Store};
use tonic::{Request, Response, Status};

use crate::arrays::{self, Out};
use crate::errors::OrStatus;
use crate::gate::Gate;
use crate::proto::graph_server::Graph;
use crate::proto::*;
use crate::shm::{Slot, span};
use crate::stores::Stores;
use crate::telemetry;

pub struct GraphService {
    pub stores: Arc<Stores>,
    pub gate: Arc<Gate>,
    /// Callers' shared-memory regions for array replies (`shm`).
    pub shm: Arc<crate::shm::ShmRegions>,
}

/// Most vertex lists of a read that may run on the reactor: a handful of
/// cached lists take microseconds.
const INLINE_IDS: usize = 16;

/// A reply's messages, all ready: a stream for tonic, and an iterator for
/// `replies`, which frames them itself.
pub struct ArraysStream(std::vec::IntoIter<Result<Arrays, Status>>);

impl ArraysStream {
    pub fn new(msgs: Vec<Result<Arrays, Status>>) -> ArraysStream {
        ArraysStream(msgs.into_iter())
    }
}

impl Iterator for ArraysStream {
    type Item = Result<Arrays, Status>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }
}

impl tokio_stream::Stream for ArraysStream {
    type Item = Result<Arrays, Status>;

    fn poll_next(mut self: std::pin::Pin<&mut Self>, _cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Self::Item>> {
        std::task::Poll::Ready(self.0.next())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

fn direction(s: &str, default: Direction) -> Result<Direction, Status> {
    if s.is_empty() { Ok(default) } else { s.parse::<Direction>().or_status() }
}

fn internal(store: &Store, mut ids: Vec<u64>) -> Result<Vec<u64>, Status> {
    store.to_internal(&mut ids).or_status()?;
    Ok(ids)
}

/// What a call's work produced: arrays to send, or the message saying
/// where it wrote them in the caller's slot (and how many bytes they are).
pub enum Reply {
    Arrays(Out),
    Placed(Arrays, u64),
}

/// The reply's messages: `Placed` as it is; `Arrays` written into `slot`
/// when there is one and they fit, else inline in messages of about
/// `chunk` bytes.
pub(crate) fn messages(method: &'static str, reply: Reply, slot: Option<&mut Slot>, chunk: usize) -> Vec<Arrays> {
    match reply {
        Reply::Placed(msg, bytes) => {
            telemetry::response_bytes(method, bytes);
            vec![msg]
        }
        Reply::Arrays(out) => {
            telemetry::response_bytes(method, out.bytes());
            match slot {
                Some(slot) => match slot.place(out) {
                    Ok(msg) => vec![msg],
                    Err(out) => out.into_messages(chunk),
                },
                None => out.into_messages(chunk),
            }
        }
    }
}

impl GraphService {
    /// Runs `work` on the store `name` through the gate and streams its
    /// arrays.
    async fn arrays(
        &self,
        method: &'static str,
        name: &str,
        slot: Option<Slot>,
        work: impl FnOnce(&Store, &Gate) -> Result<Out, Status> + Send + 'static,
    ) -> Result<Response<ArraysStream>, Status> {
        self.arrays_of(method, name, 0, slot, move |s, g, _| work(s, g).map(Reply::Arrays)).await
    }

    /// `arrays` for a read of `ids` vertex lists: at most `INLINE_IDS` of
    /// a warm store run on the reactor (`Gate::run_inline`). `work` may
    /// write its arrays into the caller's slot itself (`Reply::Placed`);
    /// arrays it returns go there after it, on the same thread.
    async fn arrays_of(
        &self,
        method: &'static str,
        name: &str,
        ids: usize,
        slot: Option<Slot>,
        work: impl FnOnce(&Store, &Gate, Option<&mut Slot>) -> Result<Reply, Status> + Send + 'static,
    ) -> Result<Response<ArraysStream>, Status> {
        let served = self.stores.get(name)?;
        let gate = self.gate.clone();
        let chunk = gate.limits.chunk_bytes;
        let job = move |store: &Store, gate: &Gate| {
            let mut slot = slot;
            let reply = work(store, gate, slot.as_mut())?;
            Ok(messages(method, reply, slot.as_mut(), chunk))
        };
        let msgs = if (1..=INLINE_IDS).contains(&ids) && served.is_warm() {
            self.gate.run_inline(method, || job(&served.store, &gate))?
        } else {
            let store = served.store.clone();
            self.gate.run(method, move || job(&store, &gate)).await?
        };
        Ok(Response::new(ArraysStream::new(msgs.into_iter().map(Ok).collect())))
    }
}

/// `names` without repeats, in order: a reply names each array once, and a
/// local sample's tensors are a dict by name too.
fn unique(names: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for n in names {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// A sample's arrays as the reply sends them.
fn sample_out(sm: Sample, tensors: &[String]) -> Out {
    let mut out = Out::default();
    let n = sm.node.len();
    // The sample's arrays go out as the engine filled them.
    out.int64_owned("node", sm.node);
    out.int64_owned("row", sm.row);
    out.int64_owned("col", sm.col);
    out.int64_owned("edge", sm.edge);
    out.int64_owned("num_sampled_nodes", sm.num_sampled_nodes);
    out.int64_owned("num_sampled_edges", sm.num_sampled_edges);
    for (name, rows) in tensors.iter().zip(sm.tensors) {
        out.rows(&format!("tensor/{name}"), rows, n);
    }
    out
}

/// The bytes of little-endian u64 words (the server runs on little-endian
/// hosts only: `arrays`).
fn word_bytes(v: &[u64]) -> &[u8] {
    // SAFETY: any bytes are valid u8 and u8 needs no alignment; the slice
    // covers exactly the words.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// The sample written into `slot`: the features gathered straight into
/// it, then the id arrays copied after them; `row` and `col` one after
/// the other, so a client can take them as one (2, E) array. None when
/// they do not fit (the sample is then gathered as usual).
fn sample_into(s: &Store, sub: Subgraph, o: &SampleOptions, slot: &mut Slot) -> Result<Result<Reply, Subgraph>, Status> {
    let (n, e) = (sub.nodes().len(), sub.edges());
    let metas: Vec<TensorMeta> = o.tensors.iter().map(|t| s.tensor_meta(t)).collect::<Result<_, _>>().or_status()?;
    let rows = |m: &TensorMeta| n * m.row_bytes() as usize;
    // num_sampled_nodes and num_sampled_edges: at most one entry a hop and one more.
    let counts = 8 * (o.fanouts.len() + 1);
    let lens = metas.iter().map(rows).chain([8 * n, 16 * e, 8 * e, counts, counts]);
    if !slot.fits(lens) {
        return Ok(Err(sub));
    }
    let mut carve = slot.carve();
    let short = || Status::internal("a sample outgrew the slot it was laid out in");
    let mut spans = Vec::with_capacity(metas.len());
    let mut bufs = Vec::with_capacity(metas.len());
    for m in &metas {
        let (at, buf) = carve.take(rows(m)).ok_or_else(short)?;
        spans.push(at);
        bufs.push(buf);
    }
    let sm = sub.gather_into(s, &o.tensors, &mut bufs).or_status()?;
    let mut msg = Arrays::default();
    let mut put = |arrays: &[(&str, &[u64])]| -> Result<(), Status> {
        // Arrays of one length: one piece, one after the other.
        let len = arrays[0].1.len();
        if arrays.iter().any(|a| a.1.len() != len) {
            return Err(Status::internal("a sample whose rows and cols differ in length"));
        }
        let (at, dst) = carve.take(8 * len * arrays.len()).ok_or_else(short)?;
        for (k, (name, a)) in arrays.iter().enumerate() {
            dst[8 * len * k..8 * len * (k + 1)].copy_from_slice(word_bytes(a));
            msg.chunks.push(span(name.to_string(), "int64", vec![len as u64], at + (8 * len * k) as u64, 8 * len));
        }
        Ok(())
    };
    put(&[("node", &sm.node)])?;
    put(&[("row", &sm.row), ("col", &sm.col)])?;
    put(&[("edge", &sm.edge)])?;
    put(&[("num_sampled_nodes", &sm.num_sampled_nodes)])?;
    put(&[("num_sampled_edges", &sm.num_sampled_edges)])?;
    for ((name, m), at) in o.tensors.iter().zip(&metas).zip(spans) {
        msg.chunks.push(span(format!("tensor/{name}"), m.dtype.name(), arrays::rows_shape(m.dim, n), at, rows(m)));
    }
    let bytes = msg.chunks.iter().map(|c| c.shm.as_ref().map_or(0, |s| s.length)).sum();
    Ok(Ok(Reply::Placed(msg, bytes)))
}

impl GraphService {
    pub(crate) async fn neighbors_to(&self, r: NeighborsRequest, slot: Option<Slot>) -> Result<Response<ArraysStream>, Status> {
        let dir = direction(&r.direction, Direction::Out)?;
        let ids = arrays::ids(r.ids.as_ref(), "ids", self.gate.limits.max_ids)?;
        self.arrays_of("Neighbors", &r.store, ids.len(), slot, move |s, _, _| {
            let ids = internal(s, ids)?;
            let mut csr = s.neighbors(&ids, dir, r.with_weights, r.with_labels).or_status()?;
            s.to_external(&mut csr.indices).or_status()?;
            let mut out = Out::default();
            out.int64("indptr", &csr.indptr);
            out.int64("indices", &csr.indices);
            if let Some(w) = &csr.weights {
                out.float32("weights", w);
            }
            if let Some(l) = &csr.labels {
                out.uint32("labels", l);
            }
            Ok(Reply::Arrays(out))
        })
        .await
    }

    pub(crate) async fn degree_to(&self, r: DegreeRequest, slot: Option<Slot>) -> Result<Response<ArraysStream>, Status> {
        let dir = direction(&r.direction, Direction::Out)?;
        let ids = arrays::ids(r.ids.as_ref(), "ids", self.gate.limits.max_ids)?;
        self.arrays_of("Degree", &r.store, ids.len(), slot, move |s, _, _| {
            let deg = s.degree(&internal(s, ids)?, dir).or_status()?;
            let mut out = Out::default();
            out.int64("degree", &deg);
            Ok(Reply::Arrays(out))
        })
        .await
    }

    pub(crate) async fn edge_weights_to(&self, r: EdgeWeightsRequest, slot: Option<Slot>) -> Result<Response<ArraysStream>, Status> {
        let max = self.gate.limits.max_ids;
        let (src, dst) = (arrays::ids(r.src.as_ref(), "src", max)?, arrays::ids(r.dst.as_ref(), "dst", max)?);
        self.arrays("EdgeWeights", &r.store, slot, move |s, _| {
            let w = s.edge_weights(&internal(s, src)?, &internal(s, dst)?).or_status()?;
            let mut out = Out::default();
            out.float32("weights", &w);
            Ok(out)
        })
        .await
    }

    pub(crate) async fn tensor_to(&self, r: TensorRequest, slot: Option<Slot>) -> Result<Response<ArraysStream>, Status> {
        let ids = arrays::ids(r.ids.as_ref(), "ids", self.gate.limits.max_ids)?;
        self.arrays_of("Tensor", &r.store, 0, slot, move |s, _, slot| {
            let n = ids.len();
            let ids = internal(s, ids)?;
            if let Some(slot) = slot {
                // The rows gathered straight into the caller's slot.
                let m = s.tensor_meta(&r.name).or_status()?;
                let len = n * m.row_bytes() as usize;
                if slot.fits([len]) {
                    let (at, buf) = slot.carve().take(len).expect("the rows fit (checked above)");
                    s.tensor_into(&r.name, &ids, buf).or_status()?;
                    let chunk = span("rows".into(), m.dtype.name(), arrays::rows_shape(m.dim, n), at, len);
                    return Ok(Reply::Placed(Arrays { chunks: vec![chunk] }, len as u64));
                }
            }
            let rows = s.tensor(&r.name, &ids).or_status()?;
            let mut out = Out::default();
            out.rows("rows", rows, n);
            Ok(Reply::Arrays(out))
        })
        .await
    }

    pub(crate) async fn sample_neighbors_to(&self, r: SampleNeighborsRequest, slot: Option<Slot>) -> Result<Response<ArraysStream>, Status> {
        let lim = &self.gate.limits;
        let seeds = arrays::ids(r.seeds.as_ref(), "seeds", lim.max_ids)?;
        if let Some(&f) = r.fanouts.iter().find(|&&f| f > lim.max_fanout) {
            return Err(Status::resource_exhausted(format!("fanout {f} exceeds the server's limit of {}", lim.max_fanout)));
        }
        let max_fanout = if r.max_fanout <= 0 { lim.max_fanout } else { r.max_fanout.min(lim.max_fanout) };
        let seed = match r.batch {
            Some(i) => batch_seed(r.seed, i),
            None => r.seed,
        };
        let o = SampleOptions {
            fanouts: r.fanouts,
            replace: r.replace,
            weighted: r.weighted,
            direction: direction(&r.direction, Direction::In)?,
            seed,
            max_fanout,
            tensors: unique(r.tensors),
        };
        self.arrays_of("SampleNeighbors", &r.store, 0, slot, move |s, _, slot| {
            // One version of the graph for every read of this call (`Store::view`).
            let view = s.view();
            let s: &Store = &view;
            let mut sub = sampler::sample_subgraph(s, &seeds, &o).or_status()?;
            if let Some(slot) = slot {
                // The features gathered straight into the caller's slot.
                match sample_into(s, sub, &o, slot)? {
                    Ok(placed) => return Ok(placed),
                    Err(back) => sub = back,
                }
            }
            Ok(Reply::Arrays(sample_out(sub.gather(s, &o.tensors).or_status()?, &o.tensors)))
        })
        .await
    }

    pub(crate) async fn random_walks_to(&self, r: RandomWalksRequest, slot: Option<Slot>) -> Result<Response<ArraysStream>, Status> {
        let starts = arrays::ids(r.starts.as_ref(), "starts", self.gate.limits.max_ids)?;
        let length = usize::try_from(r.length).unwrap_or(usize::MAX);
        if length > walks::MAX_LENGTH {
            return Err(Status::resource_exhausted(format!("walks of length {length} exceed the limit of {}", walks::MAX_LENGTH)));
        }
        let cells = (starts.len() as u64).saturating_mul(r.length + 1);
        if cells > self.gate.limits.max_ids as u64 * 64 {
            return Err(Status::resource_exhausted(format!("{cells} walk steps exceed the server's limit of {} per request", self.gate.limits.max_ids * 64)));
        }
        let o = WalkOptions {
            length,
            p: if r.p == 0.0 { 1.0 } else { r.p },
            q: if r.q == 0.0 { 1.0 } else { r.q },
            seed: r.seed,
            direction: direction(&r.direction, Direction::Out)?,
        };
        self.arrays("RandomWalks", &r.store, slot, move |s, _| {
            let w = walks::random_walks(s, &starts, &o).or_status()?;
            let mut out = Out::default();
            out.int64_2d("walks", &w, length as u64 + 1);
            Ok(out)
        })
        .await
    }
}

#[tonic::async_trait]
impl Graph for GraphService {
    async fn list_stores(&self, _req: Request<ListStoresRequest>) -> Result<Response<ListStoresReply>, Status> {
        Ok(Response::new(ListStoresReply { names: self.stores.names() }))
    }

    async fn info(&self, req: Request<InfoRequest>) -> Result<Response<InfoReply>, Status> {
        let name = req.into_inner().store;
        let served = self.stores.get(&name)?;
        let (s, writable) = (served.store.clone(), served.writable);
        let name = if name.is_empty() { self.stores.names().remove(0) } else { name };
        let reply = self
            .gate
            .run("Info", move || {
                let tensors = s.tensors().into_iter().map(|t| TensorInfo { name: t.name, dtype: t.dtype.name().into(), dim: t.dim }).collect();
                Ok(InfoReply {
                    name,
                    num_nodes: s.num_nodes(),
                    num_edges: s.num_edges(),
                    directed: s.directed(),
                    has_weights: s.has_weights(),
                    has_labels: s.has_labels(),
                    has_in_edges: s.gtt(Direction::In).is_ok(),
                    has_lower_lists: s.has_lower_lists(),
                    tensors,
                    pending_updates: s.pending_updates(),
                    writable,
                    page_size: s.page_size() as u64,
                })
            })
            .await?;
        Ok(Response::new(reply))
    }

    type NeighborsStream = ArraysStream;
    async fn neighbors(&self, req: Request<NeighborsRequest>) -> Result<Response<ArraysStream>, Status> {
        self.neighbors_to(req.into_inner(), None).await
    }

    type DegreeStream = ArraysStream;
    async fn degree(&self, req: Request<DegreeRequest>) -> Result<Response<ArraysStream>, Status> {
        self.degree_to(req.into_inner(), None).await
    }

    type EdgeWeightsStream = ArraysStream;
    async fn edge_weights(&self, req: Request<EdgeWeightsRequest>) -> Result<Response<ArraysStream>, Status> {
        self.edge_weights_to(req.into_inner(), None).await
    }

    type TensorStream = ArraysStream;
    async fn tensor(&self, req: Request<TensorRequest>) -> Result<Response<ArraysStream>, Status> {
        self.tensor_to(req.into_inner(), None).await
    }

    type SampleNeighborsStream = ArraysStream;
    async fn sample_neighbors(&self, req: Request<SampleNeighborsRequest>) -> Result<Response<ArraysStream>, Status> {
        self.sample_neighbors_to(req.into_inner(), None).await
    }

    type RandomWalksStream = ArraysStream;
    async fn random_walks(&self, req: Request<RandomWalksRequest>) -> Result<Response<ArraysStream>, Status> {
        self.random_walks_to(req.into_inner(), None).await
    }

    type AnalyticsStream = crate::analytics::AnalyticsStream;
    async fn analytics(&self, req: Request<AnalyticsRequest>) -> Result<Response<Self::AnalyticsStream>, Status> {
        crate::analytics::analytics(&self.stores, self.gate.clone(), req).await
    }

    async fn shard_info(&self, _req: Request<ShardInfoRequest>) -> Result<Response<ShardInfoReply>, Status> {
        self.shard_info_impl().await
    }

    type ShardSampleStream = ArraysStream;
    async fn shard_sample(&self, req: Request<ShardSampleRequest>) -> Result<Response<ArraysStream>, Status> {
        self.shard_sample_impl(req.into_inner(), None).await
    }

    async fn register_shm(&self, req: Request<RegisterShmRequest>) -> Result<Response<RegisterShmReply>, Status> {
        let peer = req.remote_addr();
        let r = req.into_inner();
        let shm = self.shm.clone();
        // Opening and populating the mapping is file I/O and page faults: not on the reactor.
        let region = tokio::task::spawn_blocking(move || shm.register(peer, &r.path, r.size, &r.cookie))
            .await
            .map_err(|e| Status::internal(format!("registering the region: {e}")))??;
        Ok(Response::new(RegisterShmReply { region }))
    }

    async fn release_shm(&self, req: Request<ReleaseShmRequest>) -> Result<Response<ReleaseShmReply>, Status> {
        let peer = req.remote_addr();
        self.shm.release(peer, &req.into_inner().region);
        Ok(Response::new(ReleaseShmReply {}))
    }
}
