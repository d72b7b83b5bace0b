//! `solidgraph.open` and the `Graph` it returns: batched reads of a store,
//! numpy out without copies, the GIL released while the store works.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use solidgraph_engine::loader::{DEFAULT_LOOKAHEAD, PrefetchOptions, Prefetcher};
use solidgraph_engine::sampler::{self, SampleOptions};
use solidgraph_engine::walks::{self, WalkOptions};
use solidgraph_engine::{bfs, cdlp, kcore, lcc, mis, pagerank, sssp, wcc};
use solidgraph_io::sync::MutexExt;
use solidgraph_store::{Direction, OpenOptions, RowAdmission, Store};

use crate::convert::{int64_array, row_bytes, typed_vec, u64_vec};
use crate::errors::{err, invalid};
use crate::loader::SampleLoader;
use crate::progress::{ProgressArg, Reporter};
use crate::sample::{PySample, rows_array, to_py};

/// The open store of a Graph, reopened in a forked child: threads do not
/// survive fork(), and the parent's I/O state (io_uring rings, locks that
/// its other threads held at the fork) must not be used in the child. The
/// parent's handle is abandoned there (never dropped, never touched).
pub struct StoreSlot {
    path: PathBuf,
    opts: OpenOptions,
    /// (pid that opened it, the store; None once closed).
    cur: Mutex<(u32, Option<Arc<Store>>)>,
    /// A snapshot cannot be reopened in a child: its view is this
    /// process's memory.
    snapshot: bool,
}

impl StoreSlot {
    fn new(path: PathBuf, opts: OpenOptions, store: Store, snapshot: bool) -> StoreSlot {
        StoreSlot { path, opts, cur: Mutex::new((std::process::id(), Some(Arc::new(store)))), snapshot }
    }

    pub fn get(&self) -> solidgraph_store::Result<Arc<Store>> {
        use solidgraph_store::StoreError::Invalid;
        let mut cur = self.cur.locked();
        let pid = std::process::id();
        if cur.0 != pid {
            if self.snapshot {
                return Err(Invalid("a snapshot cannot be used in a forked child; take one there".into()));
            }
            // The parent keeps the writer lock; a child reads.
            let opts = OpenOptions { writable: false, ..self.opts.clone() };
            let fresh = Arc::new(Store::open(&self.path, &opts)?);
            std::mem::forget(cur.1.replace(fresh));
            cur.0 = pid;
        }
        cur.1.clone().ok_or_else(|| Invalid(if self.snapshot { "this snapshot was released (its `with` block ended)" } else { "this graph was closed" }.into()))
    }

    fn close(&self) {
        let mut cur = self.cur.locked();
        if cur.0 == std::process::id() {
            cur.1 = None;
        }
    }
}

/// An open SolidGraph store. Every method takes a whole batch of vertices.
/// Safe to share between Python threads: the store is immutable once open
/// and its page cache does its own locking. Safe after fork: a child
/// reopens the store on first use.
#[pyclass(frozen, module = "solidgraph")]
pub struct Graph {
    // Behind an Arc so the engine objects made from a graph (loaders) can
    // hold the same open store and its cache, and reopen it after a fork.
    slot: Arc<StoreSlot>,
}

/// A vertex id argument: negative ids are InvalidArgumentError, like ids
/// past the end, not Python's OverflowError.
fn vertex_id(v: i64, what: &str) -> PyResult<u64> {
    u64::try_from(v).map_err(|_| invalid(format!("{what} {v} is not a vertex id (ids are >= 0)")))
}

/// User ids to the store's (a store imported with `order="degree"`
/// renumbers vertices inside; every id crossing this API is the user's).
fn internal(store: &Store, mut ids: Vec<u64>) -> PyResult<Vec<u64>> {
    store.to_internal(&mut ids).map_err(err)?;
    Ok(ids)
}

pub(crate) fn parse_direction(s: &str) -> PyResult<Direction> {
    s.parse().map_err(err)
}

// `Graph.sample_loader`'s `lookahead` default, written out in its signature
// and in the stub, is the engine's: a change there fails to compile here.
const _: () = assert!(DEFAULT_LOOKAHEAD == 32, "update sample_loader's signature and _native.pyi");

/// `seed=None`: a fresh seed from os.urandom for every call.
pub fn seed_or_random(py: Python<'_>, seed: Option<u64>) -> PyResult<u64> {
    match seed {
        Some(s) => Ok(s),
        None => {
            let b: Vec<u8> = py.import("os")?.call_method1("urandom", (8,))?.extract()?;
            Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
        }
    }
}

fn sample_options(
    fanouts: Vec<i64>,
    replace: bool,
    weighted: bool,
    direction: &str,
    seed: u64,
    tensors: Vec<String>,
    max_fanout: i64,
) -> PyResult<SampleOptions> {
    Ok(SampleOptions { fanouts, replace, weighted, direction: parse_direction(direction)?, seed, max_fanout, tensors })
}

/// Tensor names as a list of str (a single str is one name, not letters).
fn names(obj: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if let Ok(s) = obj.extract::<String>() {
        return Ok(vec![s]);
    }
    obj.try_iter()?.map(|x| x?.extract::<String>()).collect::<PyResult<_>>().map_err(|_| invalid("tensors must be a tensor name or a sequence of names"))
}

/// Fanouts from a sequence of ints.
fn fanouts(obj: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    obj.extract::<Vec<i64>>().map_err(|_| invalid("fanouts must be a sequence of ints (-1: all neighbors)"))
}

impl Graph {
    pub(crate) fn store(&self) -> PyResult<Arc<Store>> {
        self.slot.get().map_err(err)
    }
}

#[pymethods]
impl Graph {
    #[getter]
    fn num_nodes(&self) -> PyResult<u64> {
        Ok(self.store()?.num_nodes())
    }

    #[getter]
    fn num_edges(&self) -> PyResult<u64> {
        Ok(self.store()?.num_edges())
    }

    #[getter]
    fn directed(&self) -> PyResult<bool> {
        Ok(self.store()?.directed())
    }

    #[getter]
    fn has_weights(&self) -> PyResult<bool> {
        Ok(self.store()?.has_weights())
    }

    #[getter]
    fn has_labels(&self) -> PyResult<bool> {
        Ok(self.store()?.has_labels())
    }

    /// Whether "in" reads work: undirected, or imported with in_edges.
    #[getter]
    fn has_in_edges(&self) -> PyResult<bool> {
        Ok(self.store()?.gtt(Direction::In).is_ok())
    }

    /// Whether PageRank and WCC read lower lists (imported with
    /// lower_lists=True, no updates since).
    #[getter]
    fn has_lower_lists(&self) -> PyResult<bool> {
        Ok(self.store()?.has_lower_lists())
    }

    /// Pickles as (path, cache_bytes): unpickling (e.g. in a spawned
    /// worker) opens the store again.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (PathBuf, u64))> {
        Ok((py.import("solidgraph._native")?.getattr("open")?, (self.slot.path.clone(), self.slot.opts.cache_bytes)))
    }

    #[getter]
    fn path(&self) -> PyResult<PathBuf> {
        Ok(self.store()?.path().to_path_buf())
    }

    /// name -> (dtype, dim) of every node tensor.
    #[getter]
    fn tensors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for t in self.store()?.tensors() {
            d.set_item(&t.name, (t.dtype.name(), t.dim))?;
        }
        Ok(d)
    }

    /// Neighbor lists of `ids` as (indptr, indices[, weights][, labels]):
    /// the list of ids[i] is indices[indptr[i]:indptr[i + 1]], sorted (by
    /// the store's ids: on a store imported with `order="degree"` that is
    /// not ascending user id).
    #[pyo3(signature = (ids, direction="out", with_weights=false, with_labels=false))]
    fn neighbors<'py>(
        &self,
        py: Python<'py>,
        ids: &Bound<'py, PyAny>,
        direction: &str,
        with_weights: bool,
        with_labels: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let dir = parse_direction(direction)?;
        let store = self.store()?;
        let ids = internal(&store, u64_vec(ids, "ids")?)?;
        let mut csr = py.allow_threads(|| store.neighbors(&ids, dir, with_weights, with_labels)).map_err(err)?;
        store.to_external(&mut csr.indices).map_err(err)?;
        let mut out = vec![int64_array(py, csr.indptr)?, int64_array(py, csr.indices)?];
        if let Some(w) = csr.weights {
            out.push(PyArray1::from_vec(py, w).into_any());
        }
        if let Some(l) = csr.labels {
            out.push(PyArray1::from_vec(py, l).into_any());
        }
        PyTuple::new(py, out)
    }

    /// Degrees of `ids` ("out" or "in").
    #[pyo3(signature = (ids, direction="out"))]
    fn degree<'py>(&self, py: Python<'py>, ids: &Bound<'py, PyAny>, direction: &str) -> PyResult<Bound<'py, PyAny>> {
        let dir = parse_direction(direction)?;
        let store = self.store()?;
        let ids = internal(&store, u64_vec(ids, "ids")?)?;
        let deg = py.allow_threads(|| store.degree(&ids, dir)).map_err(err)?;
        int64_array(py, deg)
    }

    /// Weight of each edge src[i] -> dst[i]; NaN where there is none.
    fn edge_weights<'py>(&self, py: Python<'py>, src: &Bound<'py, PyAny>, dst: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let store = self.store()?;
        let (src, dst) = (internal(&store, u64_vec(src, "src")?)?, internal(&store, u64_vec(dst, "dst")?)?);
        let w = py.allow_threads(|| store.edge_weights(&src, &dst)).map_err(err)?;
        Ok(PyArray1::from_vec(py, w))
    }

    /// Rows `ids` of node tensor `name` in its dtype: (n, dim), or (n,) for
    /// one element per row.
    fn tensor<'py>(&self, py: Python<'py>, name: &str, ids: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let store = self.store()?;
        let ids = internal(&store, u64_vec(ids, "ids")?)?;
        let rows = py.allow_threads(|| store.tensor(name, &ids)).map_err(err)?;
        // The row bytes move into numpy and are viewed as the stored dtype:
        // no copy, and one path for every dtype (float16 and bool included).
        rows_array(py, rows, ids.len())
    }

    /// Page cache, row cache and I/O counters since open or `reset_stats()`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.store()?.stats();
        let d = PyDict::new(py);
        set_cache_stats(&d, "cache", &s.cache)?;
        set_cache_stats(&d, "row_cache", &s.rows.unwrap_or_default())?;
        d.set_item("pages_read", s.pages_read())?;
        d.set_item("ios", s.ios())?;
        d.set_item("bytes_read", s.bytes_read())?;
        Ok(d)
    }

    fn reset_stats(&self) -> PyResult<()> {
        self.store()?.reset_stats();
        Ok(())
    }

    /// Empties the page cache, for cold-cache measurements.
    fn clear_cache(&self) -> PyResult<()> {
        self.store()?.clear_cache();
        Ok(())
    }

    /// Reads every page and checks checksums and invariants; raises
    /// CorruptionError naming the first bad page.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let store = self.store()?;
        let r = py.allow_threads(|| store.verify(&mut |_, _| {})).map_err(err)?;
        let d = PyDict::new(py);
        d.set_item("pages", r.pages)?;
        d.set_item("edges", r.edges)?;
        d.set_item("tensor_pages", r.tensor_pages)?;
        d.set_item("free_pages", r.free_pages)?;
        Ok(d)
    }

    // ---- GNN sampling and walks ------------------------------------------

    /// Multi-hop neighbor sampling for one mini-batch (GraphSAGE): see
    /// `solidgraph.Sample` for the result. `fanouts[h]` neighbors per node at
    /// hop h (-1: all); `direction="in"` samples the nodes pointing at each
    /// node (PyG's default). `seed=None` draws a fresh seed per call.
    #[pyo3(signature = (seeds, fanouts, replace=false, weighted=false, direction="in", seed=None, tensors=None, max_fanout=10000))]
    #[allow(clippy::too_many_arguments)]
    fn sample_neighbors(
        &self,
        py: Python<'_>,
        seeds: &Bound<'_, PyAny>,
        fanouts: &Bound<'_, PyAny>,
        replace: bool,
        weighted: bool,
        direction: &str,
        seed: Option<u64>,
        tensors: Option<&Bound<'_, PyAny>>,
        max_fanout: i64,
    ) -> PyResult<PySample> {
        let seeds = u64_vec(seeds, "seeds")?;
        let tensors = tensors.map(names).transpose()?.unwrap_or_default();
        let o = sample_options(self::fanouts(fanouts)?, replace, weighted, direction, seed_or_random(py, seed)?, tensors, max_fanout)?;
        let store = self.store()?;
        let s = py.allow_threads(|| sampler::sample_neighbors(&store, &seeds, &o)).map_err(err)?;
        to_py(py, s, &o.tensors)
    }

    /// Samples the mini-batches `batches` (a sequence of seed arrays) on
    /// `workers` Rust threads, at most `prefetch` ahead, and returns an
    /// iterator over them in order (the GIL is released while it waits).
    /// Batch i is sampled with a seed derived from (seed, i). Sampling runs
    /// `lookahead` batches ahead of the feature gather so the row cache
    /// keeps the rows they will ask for. `buffer_bytes` caps the bytes of
    /// the batches held (`solidgraph.loader_memory`).
    // `lookahead` is the literal so Python sees its value (pyo3 shows a
    // constant default as "..."); an assertion above keeps it the engine's.
    #[pyo3(signature = (batches, fanouts, replace=false, weighted=false, direction="in", seed=None, tensors=None, workers=2, prefetch=4, max_fanout=10000, lookahead=32, buffer_bytes=None))]
    #[allow(clippy::too_many_arguments)]
    fn sample_loader(
        &self,
        py: Python<'_>,
        batches: &Bound<'_, PyAny>,
        fanouts: &Bound<'_, PyAny>,
        replace: bool,
        weighted: bool,
        direction: &str,
        seed: Option<u64>,
        tensors: Option<&Bound<'_, PyAny>>,
        workers: usize,
        prefetch: usize,
        max_fanout: i64,
        lookahead: usize,
        buffer_bytes: Option<u64>,
    ) -> PyResult<SampleLoader> {
        let batches: Vec<Vec<u64>> = batches.try_iter()?.map(|b| u64_vec(&b?, "seeds")).collect::<PyResult<_>>()?;
        let tensors = tensors.map(names).transpose()?.unwrap_or_default();
        let o = sample_options(self::fanouts(fanouts)?, replace, weighted, direction, seed_or_random(py, seed)?, tensors.clone(), max_fanout)?;
        let store = self.store()?;
        let slot = self.slot.clone();
        let cfg = PrefetchOptions { workers, prefetch, lookahead, buffer_bytes, reopen: Some(Arc::new(move || Ok(slot.get()?))) };
        let p = py.allow_threads(|| Prefetcher::new(store, batches, o, cfg)).map_err(err)?;
        Ok(SampleLoader::new(p, tensors))
    }

    /// GNN inference next to the store: the output rows of `model` (a model
    /// directory or `solidgraph.infer.load(dir)`) for `nodes`, a float32
    /// array of shape (len(nodes), out_dim) in the order of `nodes`. Per batch
    /// of `batch_size` nodes the engine samples (`fanouts`, -1: all; None:
    /// the full neighbourhood, which equals full-batch inference), gathers
    /// `features` (one store tensor per model input) and runs the model,
    /// sampling the next batches while this one computes. Batch i samples
    /// with `solidgraph.infer.batch_seed(seed, i)`. See `solidgraph.infer`.
    /// A full-neighbourhood request of more than one batch reads its reach
    /// once, projecting rows by a linear first layer as they arrive, when the
    /// projected rows fit `stream_bytes` (0: batch by batch) and `path`
    /// allows: "auto" (the cheaper by the cost model), "stream" or "batched";
    /// `solidgraph.infer.last_request()` says which path ran and why.
    #[pyo3(signature = (model, nodes, fanouts=None, batch_size=1024, features=crate::infer::Features::x(), seed=0, workers=2, prefetch=2, progress=ProgressArg::default(), stream_bytes=512 << 20, path="auto"))]
    #[pyo3(
        text_signature = "(self, model, nodes, fanouts=None, batch_size=1024, features='x', seed=0, workers=2, prefetch=2, progress=False, stream_bytes=536870912, path='auto')"
    )]
    #[allow(clippy::too_many_arguments)]
    fn infer<'py>(
        &self,
        py: Python<'py>,
        model: &Bound<'py, PyAny>,
        nodes: &Bound<'py, PyAny>,
        fanouts: Option<&Bound<'py, PyAny>>,
        batch_size: usize,
        features: crate::infer::Features,
        seed: u64,
        workers: usize,
        prefetch: usize,
        progress: ProgressArg<'py>,
        stream_bytes: usize,
        path: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let fanouts = fanouts.map(self::fanouts).transpose()?;
        crate::infer::infer(
            py,
            self.store()?,
            self.slot.clone(),
            model,
            nodes,
            fanouts,
            batch_size,
            features,
            seed,
            (workers, prefetch, stream_bytes, path),
            progress,
        )
    }

    /// Whole-graph GNN inference layer by layer: every node's output row of
    /// `model`, each layer one pass over the in-lists and the previous
    /// layer's rows, written to checksummed files in `STORE/infer/out_tensor/`
    /// (memory bounded by `chunk_bytes`). Returns a read-only float32
    /// numpy.memmap of shape (num_nodes, out_dim) in node order. A call
    /// interrupted (a crash, a kill) resumes at the first unfinished layer
    /// when repeated with the same model and store. With
    /// `store_tensor=True` (a writable Graph) the output is also added to
    /// the store as node tensor `out_tensor` (see `add_tensor`). Each layer
    /// keeps the `row_cache_bytes` of the previous layer's rows its edges
    /// reference most (hub rows) in memory for all of its chunks. With
    /// `push` (default) a layer of linear aggregations (sum, mean, GCN's)
    /// reads the previous layer's rows once per destination range, in
    /// source order, instead (its accumulators take `row_cache_bytes`).
    /// See `solidgraph.infer`.
    #[pyo3(signature = (model, out_tensor="emb".to_string(), features=crate::infer::Features::x(), chunk_bytes=256 << 20, keep_intermediate=false, store_tensor=false, row_cache_bytes=256 << 20, progress=ProgressArg::default(), push=true))]
    #[pyo3(
        text_signature = "(self, model, out_tensor='emb', features='x', chunk_bytes=268435456, keep_intermediate=False, store_tensor=False, row_cache_bytes=268435456, progress=False, push=True)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn infer_all<'py>(
        &self,
        py: Python<'py>,
        model: &Bound<'py, PyAny>,
        out_tensor: String,
        features: crate::infer::Features,
        chunk_bytes: usize,
        keep_intermediate: bool,
        store_tensor: bool,
        row_cache_bytes: u64,
        progress: ProgressArg<'py>,
        push: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let memory = (chunk_bytes, row_cache_bytes, push);
        crate::infer::infer_all(py, self.store()?, model, out_tensor, features, memory, keep_intermediate, store_tensor, progress)
    }

    /// Random walks from `starts`, all advanced together: an int64 array of
    /// shape (len(starts), length + 1) whose first column is `starts`.
    /// p != 1 or q != 1 gives node2vec's second-order walks. A walk at a
    /// vertex without edges in `direction` stays there.
    #[pyo3(signature = (starts, length, p=1.0, q=1.0, seed=None, direction="out"))]
    #[allow(clippy::too_many_arguments)]
    fn random_walks<'py>(
        &self,
        py: Python<'py>,
        starts: &Bound<'py, PyAny>,
        length: usize,
        p: f64,
        q: f64,
        seed: Option<u64>,
        direction: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let starts = u64_vec(starts, "starts")?;
        let o = WalkOptions { length, p, q, seed: seed_or_random(py, seed)?, direction: parse_direction(direction)? };
        let store = self.store()?;
        let w = py.allow_threads(|| walks::random_walks(&store, &starts, &o)).map_err(err)?;
        int64_array(py, w)?.call_method1("reshape", ((starts.len(), length + 1),))
    }

    /// GraphSAINT random-walk subgraph: the nodes walks of `walk_length`
    /// from `roots` visit (sorted), the stored edges among them as local
    /// `row` -> `col`, and `tensors` rows for the nodes.
    #[pyo3(signature = (roots, walk_length, seed=None, tensors=None, direction="out"))]
    fn saint_subgraph(
        &self,
        py: Python<'_>,
        roots: &Bound<'_, PyAny>,
        walk_length: usize,
        seed: Option<u64>,
        tensors: Option<&Bound<'_, PyAny>>,
        direction: &str,
    ) -> PyResult<PySample> {
        let roots = u64_vec(roots, "roots")?;
        let tensors = tensors.map(names).transpose()?.unwrap_or_default();
        let (seed, dir) = (seed_or_random(py, seed)?, parse_direction(direction)?);
        let store = self.store()?;
        let s = py.allow_threads(|| sampler::saint_subgraph(&store, &roots, walk_length, seed, dir, &tensors)).map_err(err)?;
        to_py(py, s, &tensors)
    }

    // ---- analytics -------------------------------------------------------

    /// Breadth-first search over out-edges: int64 levels (unreached:
    /// 2**63 - 1). With `target`, stops once the target's level is known.
    /// With `parents=True`, returns (levels, parents): the parent on a
    /// shortest path (the source is its own; -1 when unreached).
    #[pyo3(signature = (source, target=None, parents=false, progress=ProgressArg::default()))]
    #[pyo3(text_signature = "(self, source, target=None, parents=False, progress=False)")]
    fn bfs<'py>(&self, py: Python<'py>, source: i64, target: Option<i64>, parents: bool, progress: ProgressArg<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (source, target) = (vertex_id(source, "source")?, target.map(|t| vertex_id(t, "target")).transpose()?);
        let rep = Reporter::new(py, "bfs", progress)?;
        let store = self.store()?;
        let r = py.allow_threads(|| bfs::bfs(&store, source, target, parents, &|a, b, c| rep.hook(a, b, c))).map_err(err)?;
        let levels = PyArray1::from_vec(py, r.levels).into_any();
        match r.parents {
            Some(p) => Ok(PyTuple::new(py, [levels, PyArray1::from_vec(py, p).into_any()])?.into_any()),
            None => Ok(levels),
        }
    }

    /// Weakly connected components: each vertex's label is the smallest
    /// vertex id of its component (int64).
    #[pyo3(signature = (progress=ProgressArg::default()))]
    #[pyo3(text_signature = "(self, progress=False)")]
    fn wcc<'py>(&self, py: Python<'py>, progress: ProgressArg<'py>) -> PyResult<Bound<'py, PyAny>> {
        let rep = Reporter::new(py, "wcc", progress)?;
        let store = self.store()?;
        let r = py.allow_threads(|| wcc::wcc(&store, &|a, b, c| rep.hook(a, b, c))).map_err(err)?;
        int64_array(py, r)
    }

    /// PageRank (LDBC Graphalytics: dangling rank spread over all vertices)
    /// as float64: `iterations` iterations, or fewer once an iteration's L1
    /// change is below `tol`. 20 by default, as `solidgraph run pagerank`:
    /// the error shrinks by `damping` per iteration, to 0.85^20 = 4% of the
    /// start after 20 (20% after 10).
    #[pyo3(signature = (damping=0.85, iterations=20, tol=None, progress=ProgressArg::default()))]
    #[pyo3(text_signature = "(self, damping=0.85, iterations=20, tol=None, progress=False)")]
    fn pagerank<'py>(
        &self,
        py: Python<'py>,
        damping: f64,
        iterations: u32,
        tol: Option<f64>,
        progress: ProgressArg<'py>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let rep = Reporter::new(py, "pagerank", progress)?;
        let store = self.store()?;
        let r = py.allow_threads(|| pagerank::pagerank(&store, damping, iterations, tol, &|a, b, c| rep.hook(a, b, c))).map_err(err)?;
        Ok(PyArray1::from_vec(py, r.ranks))
    }

    /// Maximal independent set (Luby, seeded): a bool array, True for the
    /// vertices in the set. Uses both directions of a directed graph.
    #[pyo3(signature = (seed=0, progress=ProgressArg::default()))]
    #[pyo3(text_signature = "(self, seed=0, progress=False)")]
    fn mis<'py>(&self, py: Python<'py>, seed: u64, progress: ProgressArg<'py>) -> PyResult<Bound<'py, PyArray1<bool>>> {
        let rep = Reporter::new(py, "mis", progress)?;
        let store = self.store()?;
        let r = py.allow_threads(|| mis::mis(&store, seed, &|a, b, c| rep.hook(a, b, c))).map_err(err)?;
        Ok(PyArray1::from_vec(py, r))
    }

    /// Core numbers (k-core decomposition) of the undirected simple view
    /// (self-loops and repeated edges ignored) as uint32.
    #[pyo3(signature = (progress=ProgressArg::default()))]
    #[pyo3(text_signature = "(self, progress=False)")]
    fn kcore<'py>(&self, py: Python<'py>, progress: ProgressArg<'py>) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let rep = Reporter::new(py, "kcore", progress)?;
        let store = self.store()?;
        let r = py.allow_threads(|| kcore::kcore(&store, &|a, b, c| rep.hook(a, b, c))).map_err(err)?;
        Ok(PyArray1::from_vec(py, r))
    }

    /// Single-source shortest paths over edge weights (non-negative) as
    /// float64; inf where unreachable.
    #[pyo3(signature = (source, progress=ProgressArg::default()))]
    #[pyo3(text_signature = "(self, source, progress=False)")]
    fn sssp<'py>(&self, py: Python<'py>, source: i64, progress: ProgressArg<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let source = vertex_id(source, "source")?;
        let rep = Reporter::new(py, "sssp", progress)?;
        let store = self.store()?;
        let r = py.allow_threads(|| sssp::sssp(&store, source, &|a, b, c| rep.hook(a, b, c))).map_err(err)?;
        Ok(PyArray1::from_vec(py, r))
    }

    /// Community detection by label propagation (Graphalytics CDLP):
    /// int64 labels after `iterations` synchronous rounds.
    #[pyo3(signature = (iterations=10, progress=ProgressArg::default()))]
    #[pyo3(text_signature = "(self, iterations=10, progress=False)")]
    fn cdlp<'py>(&self, py: Python<'py>, iterations: u32, progress: ProgressArg<'py>) -> PyResult<Bound<'py, PyAny>> {
        let rep = Reporter::new(py, "cdlp", progress)?;
        let store = self.store()?;
        let r = py.allow_threads(|| cdlp::cdlp(&store, iterations, &|a, b, c| rep.hook(a, b, c))).map_err(err)?;
        int64_array(py, r)
    }

    /// Local clustering coefficient (Graphalytics LCC) as float64.
    #[pyo3(signature = (progress=ProgressArg::default()))]
    #[pyo3(text_signature = "(self, progress=False)")]
    fn lcc<'py>(&self, py: Python<'py>, progress: ProgressArg<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let rep = Reporter::new(py, "lcc", progress)?;
        let store = self.store()?;
        let r = py.allow_threads(|| lcc::lcc(&store, &|a, b, c| rep.hook(a, b, c))).map_err(err)?;
        Ok(PyArray1::from_vec(py, r))
    }

    /// Update batches held in the write-ahead log and the in-memory delta.
    #[getter]
    fn pending_updates(&self) -> PyResult<u64> {
        Ok(self.store()?.pending_updates())
    }

    /// Adds `count` vertices and returns their ids; `tensors` maps names to
    /// their rows ((count, dim) arrays of the stored dtype, or cast to it by
    /// numpy's `same_kind` rule); other tensors read as zeros for them.
    #[pyo3(signature = (count, tensors=None, durable=true))]
    fn add_vertices<'py>(&self, py: Python<'py>, count: u64, tensors: Option<Bound<'py, PyDict>>, durable: bool) -> PyResult<Bound<'py, PyAny>> {
        let store = self.store()?;
        let mut rows = Vec::new();
        for (k, v) in tensors.iter().flatten() {
            let name: String = k.extract()?;
            let t = store.tensor_meta(&name).map_err(err)?;
            rows.push((name.clone(), row_bytes(&v, t.dtype.name(), t.dim, &format!("tensor {name:?}"))?));
        }
        let ids = py.allow_threads(|| store.add_vertices(count, &rows, durable)).map_err(err)?;
        int64_array(py, ids.collect())
    }

    /// Deletes vertices and every edge touching them.
    #[pyo3(signature = (ids, durable=true))]
    fn delete_vertices(&self, py: Python<'_>, ids: &Bound<'_, PyAny>, durable: bool) -> PyResult<()> {
        let store = self.store()?;
        let ids = internal(&store, u64_vec(ids, "ids")?)?;
        py.allow_threads(|| store.delete_vertices(&ids, durable)).map_err(err)
    }

    /// Adds edges src[i] -> dst[i] (replacing existing ones); the batch is
    /// validated whole and logged as one record.
    #[pyo3(signature = (src, dst, weights=None, labels=None, durable=true))]
    fn add_edges(
        &self,
        py: Python<'_>,
        src: &Bound<'_, PyAny>,
        dst: &Bound<'_, PyAny>,
        weights: Option<&Bound<'_, PyAny>>,
        labels: Option<&Bound<'_, PyAny>>,
        durable: bool,
    ) -> PyResult<()> {
        let store = self.store()?;
        let (s, d) = (internal(&store, u64_vec(src, "src")?)?, internal(&store, u64_vec(dst, "dst")?)?);
        let w = weights.map(|w| typed_vec::<f32>(w, "float32", "weights")).transpose()?;
        let l = labels.map(|l| typed_vec::<u32>(l, "uint32", "labels")).transpose()?;
        py.allow_threads(|| store.add_edges(&s, &d, w.as_deref(), l.as_deref(), durable)).map_err(err)
    }

    /// Deletes edges; each must exist.
    #[pyo3(signature = (src, dst, durable=true))]
    fn delete_edges(&self, py: Python<'_>, src: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>, durable: bool) -> PyResult<()> {
        let store = self.store()?;
        let (s, d) = (internal(&store, u64_vec(src, "src")?)?, internal(&store, u64_vec(dst, "dst")?)?);
        py.allow_threads(|| store.delete_edges(&s, &d, durable)).map_err(err)
    }

    /// Sets the weights of existing edges.
    #[pyo3(signature = (src, dst, weights, durable=true))]
    fn update_edge_weights(&self, py: Python<'_>, src: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>, weights: &Bound<'_, PyAny>, durable: bool) -> PyResult<()> {
        let store = self.store()?;
        let (s, d) = (internal(&store, u64_vec(src, "src")?)?, internal(&store, u64_vec(dst, "dst")?)?);
        let w = typed_vec::<f32>(weights, "float32", "weights")?;
        py.allow_threads(|| store.update_edge_weights(&s, &d, &w, durable)).map_err(err)
    }

    /// Adds node tensor `name` from `array`, one row per node in id order
    /// ((num_nodes,) or (num_nodes, dim); float32, float16, int64, int32,
    /// uint8 or bool): written as the store's own checksummed pages and
    /// committed atomically by a superblock switch (a crash leaves the store
    /// as it was). Pending updates are merged first. Needs a writable open;
    /// a name in use is refused.
    fn add_tensor(&self, py: Python<'_>, name: &str, array: &Bound<'_, PyAny>) -> PyResult<()> {
        crate::addtensor::add_tensor(py, &*self.store()?, name, array)
    }

    /// Overwrites rows of a tensor: a (len(ids), dim) array of the stored
    /// dtype, or of one numpy casts to it by its `same_kind` rule (float64
    /// rows for a float32 tensor); other dtypes are refused.
    #[pyo3(signature = (name, ids, rows, durable=true))]
    fn update_tensor(&self, py: Python<'_>, name: &str, ids: &Bound<'_, PyAny>, rows: &Bound<'_, PyAny>, durable: bool) -> PyResult<()> {
        let store = self.store()?;
        let ids = internal(&store, u64_vec(ids, "ids")?)?;
        let t = store.tensor_meta(name).map_err(err)?;
        let bytes = row_bytes(rows, t.dtype.name(), t.dim, &format!("tensor {name:?}"))?;
        py.allow_threads(|| store.update_tensor(name, &ids, &bytes, durable)).map_err(err)
    }

    /// Makes every update so far durable (after calls with durable=False).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let store = self.store()?;
        py.allow_threads(|| store.flush()).map_err(err)
    }

    /// Folds the pending updates into pages now: copy-on-write of the
    /// changed pages only, then an atomic superblock switch and a log
    /// checkpoint. Readers and snapshots are not disturbed. Returns what
    /// it did (pages written, freed, seconds, ...).
    fn merge<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let store = self.store()?;
        let r = py.allow_threads(|| store.merge()).map_err(err)?;
        let d = PyDict::new(py);
        d.set_item("updates", r.updates)?;
        d.set_item("lists", r.lists)?;
        d.set_item("pages_written", r.pages_written)?;
        d.set_item("bytes_written", r.bytes_written)?;
        d.set_item("pages_retired", r.pages_retired)?;
        d.set_item("total_pages", r.total_pages)?;
        d.set_item("free_pages", r.free_pages)?;
        d.set_item("epoch", r.epoch)?;
        d.set_item("seconds", r.seconds)?;
        Ok(d)
    }

    /// A read-only Graph of the store as it is now: later updates and
    /// merges do not change what it reads. Use it as a context manager
    /// (`with g.snapshot() as s:`) so the pages it pins are released.
    fn snapshot(&self) -> PyResult<Graph> {
        let store = self.store()?;
        let snap = store.snapshot();
        Ok(Graph { slot: Arc::new(StoreSlot::new(self.slot.path.clone(), self.slot.opts.clone(), snap, true)) })
    }

    /// A read-only Graph of the same store with caches of its own that
    /// shares this one's vertex order maps (`Store::open_sibling`): what a
    /// loader with a `memory_budget` samples through, so that the maps
    /// (8 bytes a vertex on a reordered store) are held once.
    fn _sibling(&self, py: Python<'_>, cache_bytes: u64, row_cache_bytes: u64) -> PyResult<Graph> {
        let store = self.store()?;
        let opts = OpenOptions { cache_bytes, row_cache_bytes, row_admission: RowAdmission::Seen, writable: false, ..self.slot.opts.clone() };
        let sib = py.allow_threads(|| store.open_sibling(&opts)).map_err(err)?;
        Ok(Graph { slot: Arc::new(StoreSlot::new(self.slot.path.clone(), opts, sib, false)) })
    }

    /// Releases the store (a snapshot's pinned pages, a writer's lock);
    /// later calls raise InvalidArgumentError. Loaders made from it keep their
    /// own handle.
    fn close(&self) {
        self.slot.close();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(&self, _exc_type: &Bound<'_, PyAny>, _exc: &Bound<'_, PyAny>, _tb: &Bound<'_, PyAny>) -> bool {
        self.slot.close();
        false
    }

    fn __repr__(&self) -> PyResult<String> {
        let s = self.store()?;
        let mut kind = vec![if s.directed() { "directed" } else { "undirected" }];
        if s.has_weights() {
            kind.push("weights");
        }
        if s.has_labels() {
            kind.push("labels");
        }
        let tensors: Vec<String> = s.tensors().iter().map(|t| format!("{} {}[{}]", t.name, t.dtype.name(), t.dim)).collect();
        Ok(format!(
            "<solidgraph.Graph {:?}: {} nodes, {} edges, {}; tensors: {}>",
            s.path().display().to_string(),
            s.num_nodes(),
            s.num_edges(),
            kind.join(", "),
            if tensors.is_empty() { "none".to_string() } else { tensors.join(", ") }
        ))
    }
}

/// Opens a store with a page cache of `cache_bytes` (0: no cache).
/// `writable=True` takes the store's writer lock (one writer process) and
/// enables the update methods; every open replays the write-ahead log.
/// Pending updates over `delta_budget` bytes are merged into pages by the
/// write that crosses it (0: only `merge()` merges). `row_cache_bytes`
/// (read-only opens) caches tensor rows rather than pages, filled at open
/// with the highest-degree vertices' rows; once it is full,
/// `row_admission` "seen" admits a row on its second miss, "all" every row,
/// "hot" only rows of the highest-degree vertices.
///
/// A read-only Graph sees the store as of its open: updates a writer makes
/// later (a writable Graph in this process or another process) live in the
/// writer's memory and the write-ahead log, which a reader replays only at
/// open. Open the store again to see them. (Readers do not follow the log,
/// which would add a log check to every read batch; after a writer's merge
/// an old reader may raise StaleError, and reopening fixes that too.)
#[pyfunction]
#[pyo3(signature = (path, cache_bytes=268435456, writable=false, delta_budget=268435456, row_cache_bytes=0, row_admission="seen"))]
pub fn open(py: Python<'_>, path: PathBuf, cache_bytes: u64, writable: bool, delta_budget: u64, row_cache_bytes: u64, row_admission: &str) -> PyResult<Graph> {
    let row_admission = match row_admission {
        "seen" => RowAdmission::Seen,
        "hot" => RowAdmission::Hot,
        "all" => RowAdmission::All,
        other => return Err(invalid(format!("row_admission must be \"seen\", \"hot\" or \"all\", not {other:?}"))),
    };
    let opts = OpenOptions { cache_bytes, writable, delta_budget, row_cache_bytes, row_admission, ..Default::default() };
    let store = py.allow_threads(|| Store::open(&path, &opts)).map_err(err)?;
    Ok(Graph { slot: Arc::new(StoreSlot::new(path, opts, store, false)) })
}

/// A cache's counters as `{prefix}_hits`, `_misses`, ... (`Stats` in the stub).
fn set_cache_stats(d: &Bound<'_, PyDict>, prefix: &str, c: &solidgraph_store::cache::CacheStats) -> PyResult<()> {
    let items = [("hits", c.hits), ("misses", c.misses), ("evictions", c.evictions), ("hand_steps", c.hand_steps), ("bytes", c.bytes), ("budget", c.budget)];
    for (name, v) in items {
        d.set_item(format!("{prefix}_{name}"), v)?;
    }
    Ok(())
}
