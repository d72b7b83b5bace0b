//! `Graph.infer` and `solidgraph.infer.load`: GNN inference next to the
//! store (crates/runner). Only the output rows cross into Python; sampling,
//! gathering and the model run with the GIL released.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use numpy::PyArray1;
use pyo3::prelude::*;
use solidgraph_runner::infer::{InferOptions, PathChoice, RequestPath, full_fanouts, infer_nodes_report};
use solidgraph_runner::whole::{WholeOptions, infer_all as run_all};
use solidgraph_runner::{Model, PluginDir, Registry};
use solidgraph_store::Store;

use crate::convert::u64_vec;
use crate::errors::{err, invalid};
use crate::graph::StoreSlot;
use crate::progress::{ProgressArg, Reporter};

/// A loaded model directory (model.json + weights.safetensors), checked and
/// planned once: pass it to `Graph.infer` to skip loading on every call.
/// Immutable and safe to share between threads.
#[pyclass(frozen, module = "solidgraph", name = "InferModel")]
pub struct PyModel {
    inner: Arc<Model>,
    path: PathBuf,
}

#[pymethods]
impl PyModel {
    /// The directory the model was loaded from.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The DFG's name ("gcn", "sage", ...).
    #[getter]
    fn name(&self) -> String {
        self.inner.dfg().name.clone()
    }

    /// The node tensors the model reads, as (name, columns).
    #[getter]
    fn inputs(&self) -> Vec<(String, usize)> {
        self.inner.inputs().iter().map(|i| (i.name.clone(), i.cols)).collect()
    }

    /// Width of the output rows.
    #[getter]
    fn out_dim(&self) -> usize {
        self.inner.output_cols()
    }

    /// Layers of graph (blocks) the model reads.
    #[getter]
    fn num_layers(&self) -> usize {
        self.inner.num_blocks()
    }

    /// The hops `fanouts=None` samples: every neighbour, one hop per layer
    /// and one more when an aggregation normalises by degree.
    #[getter]
    fn full_fanouts(&self) -> Vec<i64> {
        full_fanouts(&self.inner)
    }

    /// (op index, op, kernel) of every step: which kernel runs each op.
    fn kernels(&self) -> Vec<(usize, &'static str, String)> {
        self.inner.kernel_names()
    }

    fn __repr__(&self) -> String {
        format!("InferModel({:?}, name={:?}, out_dim={})", self.path, self.inner.dfg().name, self.inner.output_cols())
    }
}

fn load(py: Python<'_>, path: PathBuf) -> PyResult<PyModel> {
    let inner = py.allow_threads(|| Model::load(&path)).map_err(err)?;
    Ok(PyModel { inner: Arc::new(inner), path })
}

/// The built-in kernels plus the plugins of the configured directory `dir`:
/// every `*.so` in it, or only `names` (each resolved inside `dir`; a path
/// leading out of it is refused).
fn registry(dir: &Path, names: Option<Vec<PathBuf>>) -> solidgraph_runner::Result<Registry> {
    let mut r = Registry::with_builtin();
    match names {
        None => {
            r.load_plugins(dir)?;
        }
        Some(names) => {
            let dir = PluginDir::new(dir)?;
            for n in names {
                r.load_plugin(&dir, &n)?;
            }
        }
    }
    Ok(r)
}

/// Loads and checks a model directory written by `solidgraph.infer.export`;
/// with `plugins`, kernels of the shared libraries in that directory join the
/// built-in ones (all `*.so` there, or those `plugin_names` names).
#[pyfunction]
#[pyo3(signature = (path, plugins=None, plugin_names=None))]
pub fn load_model(py: Python<'_>, path: PathBuf, plugins: Option<PathBuf>, plugin_names: Option<Vec<PathBuf>>) -> PyResult<PyModel> {
    let Some(dir) = plugins else {
        if plugin_names.is_some() {
            return Err(invalid("plugin_names needs plugins=DIR, the directory they load from"));
        }
        return load(py, path);
    };
    let inner = py.allow_threads(|| registry(&dir, plugin_names).and_then(|r| Model::load_with(&path, &r))).map_err(err)?;
    Ok(PyModel { inner: Arc::new(inner), path })
}

/// The seed batch `i` of `Graph.infer(..., seed=seed)` (and of
/// `Graph.sample_loader`) samples with.
#[pyfunction]
pub fn batch_seed(seed: u64, i: u64) -> u64 {
    solidgraph_runner::infer::batch_seed(seed, i)
}

/// A model argument: an InferModel, or a path to load.
fn model_arg(py: Python<'_>, model: &Bound<'_, PyAny>) -> PyResult<Arc<Model>> {
    if let Ok(m) = model.downcast::<PyModel>() {
        return Ok(m.get().inner.clone());
    }
    let path: PathBuf = model.extract().map_err(|_| invalid("model must be a model directory (str or os.PathLike) or a solidgraph.infer.load() result"))?;
    Ok(load(py, path)?.inner)
}

/// `features=`: one store tensor name, or one per model input.
#[derive(FromPyObject)]
pub enum Features {
    One(String),
    Many(Vec<String>),
}

impl Features {
    pub fn x() -> Features {
        Features::One("x".into())
    }

    fn names(self) -> Vec<String> {
        match self {
            Features::One(s) => vec![s],
            Features::Many(v) => v,
        }
    }
}

/// The body of `Graph.infer` (graph.rs keeps only the method).
#[allow(clippy::too_many_arguments)]
pub fn infer<'py>(
    py: Python<'py>,
    store: Arc<Store>,
    slot: Arc<StoreSlot>,
    model: &Bound<'py, PyAny>,
    nodes: &Bound<'py, PyAny>,
    fanouts: Option<Vec<i64>>,
    batch_size: usize,
    features: Features,
    seed: u64,
    (workers, prefetch, stream_bytes, path): (usize, usize, usize, &str),
    progress: ProgressArg<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    let path = match path {
        "auto" => PathChoice::default(),
        "stream" => PathChoice::Stream,
        "batched" => PathChoice::Batched,
        other => return Err(invalid(format!("path must be 'auto', 'stream' or 'batched', not {other:?}"))),
    };
    let model = model_arg(py, model)?;
    let nodes = u64_vec(nodes, "nodes")?;
    let features = features.names();
    let rep = Reporter::new(py, "infer", progress)?;
    let o = InferOptions { fanouts, batch_size, features, seed, workers, prefetch, reopen: Some(Arc::new(move || Ok(slot.get()?))), stream_bytes, path };
    let total = nodes.len() as u64;
    let (out, path) = py
        // The sampler takes the user's ids (it maps them on stores imported with order="degree").
        .allow_threads(|| infer_nodes_report(store, &model, &nodes, &o, &mut |done| rep.report("nodes", done as u64, total)))
        .map_err(err)?;
    LAST_REQUEST.with(|l| l.set(Some(path)));
    let (rows, cols) = (out.rows, out.cols);
    PyArray1::from_vec(py, out.data).call_method1("reshape", ((rows, cols),))
}

thread_local! {
    /// How this thread's last `Graph.infer` ran (`last_request`).
    static LAST_REQUEST: std::cell::Cell<Option<RequestPath>> = const { std::cell::Cell::new(None) };
}

/// `solidgraph.infer.last_request()`: how the calling thread's last
/// `Graph.infer` ran: `{"path": "sampled" | "batched" | "stream"}`, and for
/// a streamed request the nodes within reach (each row read once), the
/// edges into its inner hops, the projected bytes held, the seconds and
/// CPU seconds of its three steps (expand the reach, read and project its
/// rows, run the model), the rows step's thread-seconds (reading, checking
/// and copying, projecting; the degree thread), the bytes and I/Os it read,
/// and whether rows came straight off the volume; None before any.
#[pyfunction]
pub fn last_request(py: Python<'_>) -> PyResult<Option<Bound<'_, pyo3::types::PyDict>>> {
    let Some(path) = LAST_REQUEST.with(std::cell::Cell::get) else { return Ok(None) };
    let d = pyo3::types::PyDict::new(py);
    match path {
        RequestPath::Sampled => d.set_item("path", "sampled")?,
        RequestPath::Batched => d.set_item("path", "batched")?,
        RequestPath::BatchedCheaper(c) => {
            d.set_item("path", "batched")?;
            d.set_item("reason", c.reason())?;
        }
        RequestPath::Stream(r) => {
            d.set_item("path", "stream")?;
            d.set_item("reason", r.choice.map_or_else(|| "stream: forced (path='stream')".to_string(), |c| c.reason()))?;
            d.set_item("nodes", r.nodes)?;
            d.set_item("edges", r.edges)?;
            d.set_item("projected_bytes", r.projected_bytes)?;
            let s = |us: u64| us as f64 / 1e6;
            d.set_item("seconds", (s(r.expand_us), s(r.rows_us), s(r.model_us)))?;
            d.set_item("cpu_seconds", (s(r.expand_cpu_us), s(r.rows_cpu_us), s(r.model_cpu_us)))?;
            let rows = pyo3::types::PyDict::new(py);
            rows.set_item("read", s(r.read_us))?;
            rows.set_item("copy", s(r.copy_us))?;
            rows.set_item("gemm", s(r.gemm_us))?;
            rows.set_item("degrees", s(r.degree_us))?;
            d.set_item("rows_thread_seconds", rows)?;
            d.set_item("bytes_read", r.bytes_read)?;
            d.set_item("ios", r.ios)?;
            d.set_item("direct", r.direct)?;
        }
    }
    Ok(Some(d))
}

/// The body of `Graph.infer_all`: layers run with the GIL released; the
/// output rows come back as a read-only numpy.memmap of the checked file.
#[allow(clippy::too_many_arguments)]
pub fn infer_all<'py>(
    py: Python<'py>,
    store: Arc<Store>,
    model: &Bound<'py, PyAny>,
    out_tensor: String,
    features: Features,
    (chunk_bytes, row_cache_bytes, push): (usize, u64, bool),
    keep_intermediate: bool,
    store_tensor: bool,
    progress: ProgressArg<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    let model = model_arg(py, model)?;
    let rep = Reporter::new(py, "infer_all", progress)?;
    let o = WholeOptions { out: out_tensor, features: features.names(), chunk_bytes, keep_intermediate, store_tensor, row_cache_bytes, push };
    let r =
        py.allow_threads(|| run_all(&store, &model, &o, &mut |p| rep.report(&format!("layer {}/{}", p.level + 1, p.levels), p.done, p.total))).map_err(err)?;
    let np = py.import("numpy")?;
    if r.rows == 0 {
        return np.getattr("zeros")?.call1(((0usize, r.cols), "float32"));
    }
    let kw = pyo3::types::PyDict::new(py);
    kw.set_item("dtype", "float32")?;
    kw.set_item("mode", "r")?;
    kw.set_item("shape", (r.rows, r.cols))?;
    np.getattr("memmap")?.call((r.path,), Some(&kw))
}

/// A 2-D float32 array as a runner tensor (one copy, outside any timing).
fn f32_matrix(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<solidgraph_runner::Tensor> {
    let shape: Vec<usize> = obj.getattr("shape")?.extract()?;
    let [rows, cols] = shape[..] else {
        return Err(invalid(format!("{what} must be 2-D, not shape {shape:?}")));
    };
    let flat = obj.call_method1("reshape", (-1,))?;
    let data = crate::convert::typed_vec::<f32>(&flat, "float32", what)?;
    Ok(solidgraph_runner::Tensor::new(rows, cols, data))
}

/// `solidgraph.infer.time_kernel`: runs one op's kernel `repeat` times on
/// the given operands with the GIL released and returns its output and the
/// seconds of each run (the kernel alone: operands are converted before).
/// For the kernel benchmark (benchmarks/kernels.py) and tests.
#[pyfunction]
#[pyo3(signature = (op, x, w=None, bias=None, indptr=None, indices=None, n_src=None, reduce="sum", kernel="cpu", repeat=1))]
#[allow(clippy::too_many_arguments)]
pub fn time_kernel<'py>(
    py: Python<'py>,
    op: &str,
    x: &Bound<'py, PyAny>,
    w: Option<&Bound<'py, PyAny>>,
    bias: Option<&Bound<'py, PyAny>>,
    indptr: Option<&Bound<'py, PyAny>>,
    indices: Option<&Bound<'py, PyAny>>,
    n_src: Option<usize>,
    reduce: &str,
    kernel: &str,
    repeat: usize,
) -> PyResult<(Bound<'py, PyAny>, Vec<f64>)> {
    use solidgraph_runner::dfg::{Norm, Reduce, SelfLoops};
    use solidgraph_runner::kernels::{cpu::Cpu, reference::Reference};
    use solidgraph_runner::{Args, Block, Kernel, Op};

    if !(1..=1000).contains(&repeat) {
        return Err(invalid(format!("repeat must be 1..=1000, not {repeat}")));
    }
    let k: Box<dyn Kernel> = match kernel {
        "cpu" => Box::new(Cpu),
        "reference" => Box::new(Reference),
        _ => return Err(invalid(format!("kernel {kernel:?} is not \"cpu\" or \"reference\""))),
    };
    let xt = f32_matrix(x, "x")?;
    let (the_op, mut operands, view) = match op {
        "gemm" => {
            let w = f32_matrix(w.ok_or_else(|| invalid("gemm needs w"))?, "w")?;
            if w.cols != xt.cols {
                return Err(invalid(format!("x has {} columns, w (out x in) {}", xt.cols, w.cols)));
            }
            let mut v = vec![w];
            if let Some(b) = bias {
                let b = f32_matrix(b, "bias")?;
                if (b.rows, b.cols) != (1, v[0].rows) {
                    return Err(invalid(format!("bias must be (1, {}), not ({}, {})", v[0].rows, b.rows, b.cols)));
                }
                v.push(b);
            }
            let bias = (v.len() == 2).then(|| "b".to_string());
            (Op::Gemm { x: "x".into(), weight: "w".into(), bias }, v, None)
        }
        "spmm" => {
            let reduce = match reduce {
                "sum" => Reduce::Sum,
                "mean" => Reduce::Mean,
                "max" => Reduce::Max,
                _ => return Err(invalid(format!("reduce {reduce:?} is not sum, mean or max"))),
            };
            let indptr: Vec<usize> = u64_vec(indptr.ok_or_else(|| invalid("spmm needs indptr"))?, "indptr")?.into_iter().map(|v| v as usize).collect();
            let indices = u64_vec(indices.ok_or_else(|| invalid("spmm needs indices"))?, "indices")?;
            let n_src = n_src.unwrap_or(xt.rows);
            if n_src != xt.rows || indices.iter().any(|&u| u >= n_src as u64) || indptr.is_empty() {
                return Err(invalid(format!("spmm: x has {} rows; indices must be below it and indptr non-empty", xt.rows)));
            }
            let indices: Vec<u32> = indices.into_iter().map(|u| u as u32).collect();
            let block = Block::new(indptr.len() - 1, n_src, indptr, indices, None).map_err(err)?;
            let op = Op::Spmm { x: "x".into(), block: 0, reduce, norm: Norm::None, self_loops: SelfLoops::None, edge_weight: false, edge_values: None };
            (op, Vec::new(), Some(block.view(SelfLoops::None, false, Norm::None)))
        }
        _ => return Err(invalid(format!("op {op:?} is not \"gemm\" or \"spmm\""))),
    };
    operands.insert(0, xt);
    let (out, secs) = py
        .allow_threads(|| {
            let refs: Vec<&solidgraph_runner::Tensor> = operands.iter().collect();
            let mut secs = Vec::with_capacity(repeat);
            let mut out = None;
            for _ in 0..repeat {
                let t = std::time::Instant::now();
                let o = k.run(&the_op, &Args { x: &refs, block: None, edges: view.as_ref() })?;
                secs.push(t.elapsed().as_secs_f64());
                out = Some(o);
            }
            Ok::<_, String>((out.expect("repeat >= 1"), secs))
        })
        .map_err(|m| invalid(format!("kernel {kernel} failed: {m}")))?;
    let (rows, cols) = (out.rows, out.cols);
    Ok((PyArray1::from_vec(py, out.data).call_method1("reshape", ((rows, cols),))?, secs))
}
