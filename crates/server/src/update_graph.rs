//! UpdateGraph: a client stream of edge and tensor chunks becomes a new
//! store under the server's data dir, built by the import (`store::import`,
//! which lays out the graph while a second thread writes the tensors), then
//! served under the name the client gave. The chunks are checked as they
//! arrive and spooled to files under the data dir (`spool`), up to
//! `Limits::max_graph_bytes` in all, so the server holds one message, not
//! the graph; the import reads the spool and builds in
//! `<name>.partial-<pid>`, then renames it into place, so a refused stream,
//! a failed build or a client gone midway leaves nothing behind (a server
//! killed midway leaves partial directories, removed at its next start).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use solidgraph_store::order::VertexOrder;
use solidgraph_store::{DType, ImportOptions, import};
use tonic::{Request, Response, Status, Streaming};

use crate::arrays;
use crate::errors::{OrStatus, store_status};
use crate::gate::Gate;
use crate::proto::{Array, UpdateGraphOptions, UpdateGraphReply, UpdateGraphRequest};
use crate::spool::Spool;
use crate::stores::{Stores, check_new_name};
use crate::telemetry;

/// Names being built right now: a second stream for one of them is refused.
static BUILDING: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Holds a name in `BUILDING` until dropped.
struct Reserved(String);

impl Reserved {
    fn take(name: &str) -> Result<Reserved, Status> {
        let mut b = BUILDING.lock().unwrap_or_else(|p| p.into_inner());
        if !b.insert(name.to_string()) {
            return Err(Status::already_exists(format!("a store named {name:?} is being built by another UpdateGraph")));
        }
        Ok(Reserved(name.to_string()))
    }
}

impl Drop for Reserved {
    fn drop(&mut self) {
        BUILDING.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.0);
    }
}

fn options(o: Option<&UpdateGraphOptions>, max_vertices: u64) -> Result<ImportOptions, Status> {
    let d = UpdateGraphOptions::default();
    let o = o.unwrap_or(&d);
    if let Some(n) = o.num_nodes
        && n > max_vertices
    {
        return Err(Status::resource_exhausted(format!("{n} vertices exceed the server's limit of {max_vertices} vertices per UpdateGraph")));
    }
    let order = match o.order.as_str() {
        "" => VertexOrder::Input,
        s => VertexOrder::parse(s).ok_or_else(|| Status::invalid_argument(format!("order {s:?} must be \"input\" or \"degree\"")))?,
    };
    Ok(ImportOptions {
        undirected: o.undirected,
        self_loops: o.self_loops,
        dedup: o.dedup,
        in_edges: o.in_edges,
        lower_lists: o.lower_lists,
        num_nodes: o.num_nodes,
        order,
        ..Default::default()
    })
}

/// The stream's chunks, checked and spooled to disk as they arrive.
struct Chunks {
    spool: Spool,
    weights: Option<bool>,
    labels: Option<bool>,
    bytes: u64,
    /// Ids must be below this (`Limits::max_graph_vertices`).
    max_vertices: u64,
}

fn size(a: &Option<Array>) -> u64 {
    a.as_ref().map_or(0, |a| a.data.len() as u64)
}

impl Chunks {
    fn add(&mut self, m: &UpdateGraphRequest, limit: u64) -> Result<(), Status> {
        self.bytes += size(&m.src) + size(&m.dst) + size(&m.weights) + size(&m.labels) + size(&m.rows);
        if self.bytes > limit {
            return Err(Status::resource_exhausted(format!("the graph's chunks exceed the server's limit of {limit} bytes per UpdateGraph")));
        }
        if m.src.is_some() || m.dst.is_some() {
            self.edges(m)?;
        } else if m.weights.is_some() || m.labels.is_some() {
            return Err(Status::invalid_argument("edge weights or labels without src and dst"));
        }
        if !m.tensor.is_empty() || m.rows.is_some() {
            self.rows(&m.tensor, m.rows.as_ref())?;
        }
        Ok(())
    }

    fn edges(&mut self, m: &UpdateGraphRequest) -> Result<(), Status> {
        let src = arrays::ids(m.src.as_ref(), "src", usize::MAX)?;
        let dst = arrays::ids(m.dst.as_ref(), "dst", usize::MAX)?;
        if src.len() != dst.len() {
            return Err(Status::invalid_argument(format!("an edge chunk has {} sources but {} destinations", src.len(), dst.len())));
        }
        if let Some(&v) = src.iter().chain(&dst).find(|&&v| v >= self.max_vertices) {
            return Err(Status::resource_exhausted(format!("vertex id {v} is past the server's limit of {} vertices per UpdateGraph", self.max_vertices)));
        }
        let n = src.len();
        let weights = m.weights.as_ref().map(|w| arrays::f32s(Some(w), "weights", n)).transpose()?;
        let labels = m.labels.as_ref().map(|l| arrays::u32s(Some(l), "labels", n)).transpose()?;
        for (have, now, what) in [(&mut self.weights, weights.is_some(), "weights"), (&mut self.labels, labels.is_some(), "labels")] {
            if *have.get_or_insert(now) != now {
                return Err(Status::invalid_argument(format!("edge {what} must come with every edge chunk or with none")));
            }
        }
        self.spool.edges(&src, &dst, weights.as_deref(), labels.as_deref())
    }

    fn rows(&mut self, name: &str, a: Option<&Array>) -> Result<(), Status> {
        if name.is_empty() {
            return Err(Status::invalid_argument("tensor rows without a tensor name"));
        }
        let a = a.ok_or_else(|| Status::invalid_argument(format!("tensor {name:?}: a chunk without rows")))?;
        let dtype = DType::parse(&a.dtype).ok_or_else(|| {
            Status::invalid_argument(format!("tensor {name:?}: dtype {:?} is not one of float32, float16, int64, int32, uint8, bool", a.dtype))
        })?;
        let (n, dim) = match a.shape[..] {
            [n] => (n, 1),
            [n, d] => (n, d),
            _ => return Err(Status::invalid_argument(format!("tensor {name:?}: rows must be 1-D or 2-D, not of shape {:?}", a.shape))),
        };
        if let Some((t, d)) = self.spool.tensor(name)
            && (t, d) != (dtype, dim)
        {
            return Err(Status::invalid_argument(format!("tensor {name:?}: a chunk of {} x {dim} after chunks of {} x {d}", dtype.name(), t.name())));
        }
        let rows = arrays::rows(Some(a), &format!("tensor {name:?}"), dtype.name(), dtype.size(), dim, n)?;
        self.spool.rows(name, dtype, dim, n, &rows)
    }
}

/// Adds `m` to the spool on a blocking thread (file writes, off the
/// reactor, which serves every connection) and hands the chunks back; if
/// the call is dropped meanwhile, they are dropped there, spool files and all.
async fn add_chunk(chunks: Chunks, m: UpdateGraphRequest, limit: u64) -> Result<Chunks, Status> {
    let job = tokio::task::spawn_blocking(move || {
        let mut chunks = chunks;
        let res = chunks.add(&m, limit);
        (chunks, res)
    });
    let (chunks, res) = job.await.map_err(|_| Status::internal("spooling an UpdateGraph chunk failed inside the server (a bug): see the server log"))?;
    res.map(|()| chunks)
}

pub async fn update_graph(stores: Arc<Stores>, gate: Arc<Gate>, req: Request<Streaming<UpdateGraphRequest>>) -> Result<Response<UpdateGraphReply>, Status> {
    let dir: PathBuf = stores
        .data_dir()
        .map(Path::to_path_buf)
        .ok_or_else(|| Status::failed_precondition("this server has no --data-dir, so UpdateGraph cannot build stores"))?;
    let limit = gate.limits.max_graph_bytes;
    let mut stream = req.into_inner();
    let first = stream.message().await?.ok_or_else(|| Status::invalid_argument("an UpdateGraph stream must start with a message naming the new store"))?;
    let name = first.name.clone();
    check_new_name(&name)?;
    let _reserved = Reserved::take(&name)?;
    let path = dir.join(&name);
    if stores.contains(&name) || path.exists() {
        return Err(Status::already_exists(format!("a store named {name:?} exists")));
    }
    let max_vertices = gate.limits.max_graph_vertices;
    let mut o = options(first.options.as_ref(), max_vertices)?;
    let spool = Spool::create(dir.join(format!("{name}.spool.partial-{}", std::process::id())))?;
    let mut chunks = Chunks { spool, weights: None, labels: None, bytes: 0, max_vertices };
    chunks = add_chunk(chunks, first, limit).await?;
    while let Some(m) = stream.message().await? {
        if !m.name.is_empty() || m.options.is_some() {
            return Err(Status::invalid_argument("only the first message of an UpdateGraph stream names the store and its options"));
        }
        chunks = add_chunk(chunks, m, limit).await?;
    }
    telemetry::request_bytes("UpdateGraph", chunks.bytes);
    (o.weights, o.labels) = (chunks.weights.unwrap_or(false), chunks.labels.unwrap_or(false));
    let mut spool = chunks.spool;
    let at = path.clone();
    // The spool moves into the work, so its files outlive the import even
    // if the call is dropped meanwhile, and go with it.
    let report = gate
        .run("UpdateGraph", move || {
            let inputs = spool.finish()?;
            import(&at, &inputs.edges, &inputs.tensors, &o, &|_, _, _| {}).or_status()
        })
        .await?;
    tracing::info!(store = %name, nodes = report.num_nodes, edges = report.num_edges, "built by UpdateGraph");
    stores.add(&name, &path).map_err(|e| store_status(&e))?;
    Ok(Response::new(UpdateGraphReply { name, num_nodes: report.num_nodes, num_edges: report.num_edges }))
}
