//! The Graph service: reads, sampling and walks, each the same call as the
//! local API (`solidgraph.Graph`), with ids mapped the same way.

use std::sync::Arc;

use solidgraph_engine::loader::batch_seed;
use solidgraph_engine::sampler::{self, SampleOptions};
use solidgraph_engine::walks::{self, WalkOptions};
use solidgraph_store::{Direction, Store};
use tonic::{Request, Response, Status};

use crate::arrays::{self, Out};
use crate::errors::OrStatus;
use crate::gate::Gate;
use crate::proto::graph_server::Graph;
use crate::proto::*;
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

impl GraphService {
    /// Runs `work` on the store `name` through the gate and streams its
    /// arrays.
    async fn arrays(
        &self,
        method: &'static str,
        name: &str,
        work: impl FnOnce(&Store, &Gate) -> Result<Out, Status> + Send + 'static,
    ) -> Result<Response<ArraysStream>, Status> {
        self.arrays_of(method, name, 0, work).await
    }

    /// `arrays` for a read of `ids` vertex lists: at most `INLINE_IDS` of
    /// a warm store run on the reactor (`Gate::run_inline`).
    async fn arrays_of(
        &self,
        method: &'static str,
        name: &str,
        ids: usize,
        work: impl FnOnce(&Store, &Gate) -> Result<Out, Status> + Send + 'static,
    ) -> Result<Response<ArraysStream>, Status> {
        let served = self.stores.get(name)?;
        let gate = self.gate.clone();
        let chunk = gate.limits.chunk_bytes;
        let out = if (1..=INLINE_IDS).contains(&ids) && served.is_warm() {
            self.gate.run_inline(method, || work(&served.store, &gate))?
        } else {
            let store = served.store.clone();
            self.gate.run(method, move || work(&store, &gate)).await?
        };
        telemetry::response_bytes(method, out.bytes());
        let msgs: Vec<Result<Arrays, Status>> = out.into_messages(chunk).into_iter().map(Ok).collect();
        Ok(Response::new(ArraysStream::new(msgs)))
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
        let r = req.into_inner();
        let dir = direction(&r.direction, Direction::Out)?;
        let ids = arrays::ids(r.ids.as_ref(), "ids", self.gate.limits.max_ids)?;
        self.arrays_of("Neighbors", &r.store, ids.len(), move |s, _| {
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
            Ok(out)
        })
        .await
    }

    type DegreeStream = ArraysStream;
    async fn degree(&self, req: Request<DegreeRequest>) -> Result<Response<ArraysStream>, Status> {
        let r = req.into_inner();
        let dir = direction(&r.direction, Direction::Out)?;
        let ids = arrays::ids(r.ids.as_ref(), "ids", self.gate.limits.max_ids)?;
        self.arrays_of("Degree", &r.store, ids.len(), move |s, _| {
            let deg = s.degree(&internal(s, ids)?, dir).or_status()?;
            let mut out = Out::default();
            out.int64("degree", &deg);
            Ok(out)
        })
        .await
    }

    type EdgeWeightsStream = ArraysStream;
    async fn edge_weights(&self, req: Request<EdgeWeightsRequest>) -> Result<Response<ArraysStream>, Status> {
        let r = req.into_inner();
        let max = self.gate.limits.max_ids;
        let (src, dst) = (arrays::ids(r.src.as_ref(), "src", max)?, arrays::ids(r.dst.as_ref(), "dst", max)?);
        self.arrays("EdgeWeights", &r.store, move |s, _| {
            let w = s.edge_weights(&internal(s, src)?, &internal(s, dst)?).or_status()?;
            let mut out = Out::default();
            out.float32("weights", &w);
            Ok(out)
        })
        .await
    }

    type TensorStream = ArraysStream;
    async fn tensor(&self, req: Request<TensorRequest>) -> Result<Response<ArraysStream>, Status> {
        let r = req.into_inner();
        let ids = arrays::ids(r.ids.as_ref(), "ids", self.gate.limits.max_ids)?;
        self.arrays("Tensor", &r.store, move |s, _| {
            let n = ids.len();
            let rows = s.tensor(&r.name, &internal(s, ids)?).or_status()?;
            let mut out = Out::default();
            out.rows("rows", rows, n);
            Ok(out)
        })
        .await
    }

    type SampleNeighborsStream = ArraysStream;
    async fn sample_neighbors(&self, req: Request<SampleNeighborsRequest>) -> Result<Response<ArraysStream>, Status> {
        let r = req.into_inner();
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
            tensors: r.tensors,
        };
        self.arrays("SampleNeighbors", &r.store, move |s, _| {
            let sm = sampler::sample_neighbors(s, &seeds, &o).or_status()?;
            let mut out = Out::default();
            let n = sm.node.len();
            // The sample's arrays go out as the engine filled them.
            out.int64_owned("node", sm.node);
            out.int64_owned("row", sm.row);
            out.int64_owned("col", sm.col);
            out.int64_owned("edge", sm.edge);
            out.int64_owned("num_sampled_nodes", sm.num_sampled_nodes);
            out.int64_owned("num_sampled_edges", sm.num_sampled_edges);
            for (name, rows) in o.tensors.iter().zip(sm.tensors) {
                out.rows(&format!("tensor/{name}"), rows, n);
            }
            Ok(out)
        })
        .await
    }

    type RandomWalksStream = ArraysStream;
    async fn random_walks(&self, req: Request<RandomWalksRequest>) -> Result<Response<ArraysStream>, Status> {
        let r = req.into_inner();
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
        self.arrays("RandomWalks", &r.store, move |s, _| {
            let w = walks::random_walks(s, &starts, &o).or_status()?;
            let mut out = Out::default();
            out.int64_2d("walks", &w, length as u64 + 1);
            Ok(out)
        })
        .await
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
        self.shard_sample_impl(req.into_inner()).await
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
