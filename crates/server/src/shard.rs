//! Scale-out: the RPCs of a shard server, one serving a shard of
//! `solidgraph partition` (its `adj-out`, `adj-in` and `rows` stores). A
//! hop of a distributed sample draws here, for the frontier vertices this
//! shard owns, exactly what the single-store sampler draws for them: the
//! lists are the source's (same ids, order and weights) and every draw
//! comes from `rng_for(seed, hop, global id)`.

use std::path::Path;
use std::sync::Arc;

use solidgraph_engine::sampler::{ALL, choose, rng_for};
use solidgraph_store::partition::{ShardMeta, VERTEX_TENSOR};
use solidgraph_store::{Direction, Store};
use tonic::{Response, Status};

use crate::arrays::{self, Out};
use crate::errors::OrStatus;
use crate::graph::{ArraysStream, GraphService, Reply, messages};
use crate::proto::{ShardInfoReply, ShardSampleRequest};
use crate::shm::Slot;

/// The store names a shard server serves.
const ROWS: &str = "rows";

/// The shard's meta, beside its rows store.
fn meta(rows: &Store) -> Result<ShardMeta, Status> {
    let dir = rows.path().parent().unwrap_or(Path::new("."));
    ShardMeta::read(&dir.join("shard.meta"))
        .map_err(|e| Status::failed_precondition(format!("this server does not serve a shard of `solidgraph partition`: {e}")))
}

/// The adjacency store that holds `direction`'s lists.
fn adjacency_name(m: &ShardMeta, direction: &str) -> Result<&'static str, Status> {
    match direction {
        "out" => Ok("adj-out"),
        "in" | "" if m.undirected => Ok("adj-out"),
        "in" | "" if m.directions.iter().any(|d| d == "in") => Ok("adj-in"),
        "in" | "" => {
            Err(Status::failed_precondition("sampling direction \"in\" needs in-edges: the partitioned store has none (import it with in_edges=True)"))
        }
        d => Err(Status::invalid_argument(format!("direction must be \"out\" or \"in\", not {d:?}"))),
    }
}

impl GraphService {
    fn rows_store(&self) -> Result<Arc<Store>, Status> {
        Ok(self.stores.get(ROWS)?.store.clone())
    }

    pub(crate) async fn shard_info_impl(&self) -> Result<Response<ShardInfoReply>, Status> {
        let rows = self.rows_store()?;
        let m = self.gate.run("ShardInfo", move || meta(&rows)).await?;
        Ok(Response::new(ShardInfoReply {
            book_id: format!("{:016x}", m.book_id),
            shard: m.shard,
            parts: m.parts,
            directions: m.directions,
            undirected: m.undirected,
        }))
    }

    pub(crate) async fn shard_sample_impl(&self, r: ShardSampleRequest, slot: Option<Slot>) -> Result<Response<ArraysStream>, Status> {
        let lim = &self.gate.limits;
        let ids = arrays::ids(r.ids.as_ref(), "ids", lim.max_ids)?;
        let local = arrays::ids(r.local.as_ref(), "local", lim.max_ids)?;
        if ids.len() != local.len() {
            return Err(Status::invalid_argument(format!("{} ids but {} local ids", ids.len(), local.len())));
        }
        let k = r.fanout;
        if (k <= 0 && k != ALL) || k > lim.max_fanout {
            return Err(Status::invalid_argument(format!("fanout {k} must be -1 (all) or in 1..={}", lim.max_fanout)));
        }
        let rows = self.rows_store()?;
        let m = meta(&rows)?;
        if format!("{:016x}", m.book_id) != r.book_id {
            return Err(Status::failed_precondition(format!(
                "this server serves shard {} of {} of partition book {:016x}, not of the client's book {:?}",
                m.shard, m.parts, m.book_id, r.book_id
            )));
        }
        let adj_name = adjacency_name(&m, &r.direction)?;
        let adj = self.stores.get(adj_name)?.store.clone();
        let col = if adj_name == "adj-in" { 2 } else { 1 };
        let chunk = self.gate.limits.chunk_bytes;
        let msgs = self
            .gate
            .run("ShardSample", move || {
                let mut slot = slot;
                let out = draw(&adj, &rows, &ids, &local, col, &r)?;
                Ok(messages("ShardSample", Reply::Arrays(out), slot.as_mut(), chunk))
            })
            .await?;
        Ok(Response::new(ArraysStream::new(msgs.into_iter().map(Ok).collect())))
    }
}

/// The hop's draws for `ids`: per id the positions `choose` picks in its
/// list, as the single-store sampler picks them.
fn draw(adj: &Store, rows: &Store, ids: &[u64], local: &[u64], col: usize, r: &ShardSampleRequest) -> Result<Out, Status> {
    if r.weighted && !adj.has_weights() {
        return Err(Status::failed_precondition("weighted sampling needs edge weights, and this graph has none"));
    }
    let vt = rows.tensor(VERTEX_TENSOR, local).or_status()?;
    let cols = vt.dim as usize;
    let word = |i: usize, c: usize| u64::from_le_bytes(vt.data[(i * cols + c) * 8..(i * cols + c + 1) * 8].try_into().expect("8 bytes"));
    if let Some(i) = (0..ids.len()).find(|&i| word(i, 0) != ids[i]) {
        return Err(Status::invalid_argument(format!("vertex {} (local id {}) is not on this shard: the client's book disagrees", ids[i], local[i])));
    }
    let csr = adj.neighbors(ids, Direction::Out, r.weighted, false).or_status()?;
    let (mut count, mut nbr, mut edge, mut picks) = (Vec::with_capacity(ids.len()), Vec::new(), Vec::new(), Vec::new());
    for (i, &v) in ids.iter().enumerate() {
        let (a, b) = (csr.indptr[i] as usize, csr.indptr[i + 1] as usize);
        let w = csr.weights.as_ref().map(|w| &w[a..b]);
        choose(&mut rng_for(r.seed, r.hop, v), b - a, r.fanout, r.replace, w, &mut picks);
        let first = word(i, col);
        count.push(picks.len() as u64);
        nbr.extend(picks.iter().map(|&p| csr.indices[a + p]));
        edge.extend(picks.iter().map(|&p| first + p as u64));
    }
    let mut out = Out::default();
    out.int64("count", &count);
    out.int64("ids", &nbr);
    out.int64("edge", &edge);
    Ok(out)
}
