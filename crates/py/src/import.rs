//! `solidgraph.import_graph`: Python edge and tensor inputs become the
//! store's `EdgeInput`/`TensorInput`, then the store's import runs with the
//! GIL released.

use std::path::PathBuf;

use numpy::{AllowTypeChange, PyArray1, PyArrayLike1, PyArrayMethods, PyUntypedArrayMethods, get_array_module};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use solidgraph_store::order::VertexOrder;
use solidgraph_store::{DType, EdgeInput, ImportOptions, TensorData, TensorInput, import};

use crate::convert::{as_array, u64_vec};
use crate::errors::{err, invalid};
use crate::progress::{ProgressArg, Reporter};

fn f32_vec(obj: &Bound<'_, PyAny>) -> PyResult<Vec<f32>> {
    let a: PyArrayLike1<f32, AllowTypeChange> = obj.extract()?;
    Ok(a.as_array().iter().copied().collect())
}

fn u32_vec(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u32>> {
    u64_vec(obj, what)?.into_iter().map(|x| u32::try_from(x).map_err(|_| invalid(format!("{what} must fit in 32 bits, not {x}")))).collect()
}

fn memory_edges(src: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>, weights: Option<&Bound<'_, PyAny>>, labels: Option<&Bound<'_, PyAny>>) -> PyResult<EdgeInput> {
    Ok(EdgeInput::Memory {
        src: u64_vec(src, "edge sources")?,
        dst: u64_vec(dst, "edge destinations")?,
        weights: weights.map(f32_vec).transpose()?,
        labels: labels.map(|l| u32_vec(l, "edge labels")).transpose()?,
    })
}

/// `edges` as files: one path, or a pair of .npy paths.
fn edge_files(edges: &Bound<'_, PyAny>) -> Option<EdgeInput> {
    if let Ok(p) = edges.extract::<PathBuf>() {
        return Some(EdgeInput::File(p));
    }
    let (a, b) = edges.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>().ok()?;
    Some(EdgeInput::NpyPair(a.extract().ok()?, b.extract().ok()?))
}

/// The forms `edges` may take: a path, a pair of .npy paths, a (src, dst[,
/// weights]) tuple of arrays, or a (2, E) or (E, 2) array (as the CLI reads
/// .npy files; (2, 2) is read as (2, E), as there).
fn edge_input(edges: &Bound<'_, PyAny>, weights: Option<&Bound<'_, PyAny>>, labels: Option<&Bound<'_, PyAny>>) -> PyResult<EdgeInput> {
    if let Some(files) = edge_files(edges) {
        if weights.is_some() || labels.is_some() {
            return Err(invalid("edge_weights and edge_labels go with edges given as arrays; files carry their own columns"));
        }
        return Ok(files);
    }
    if let Ok(t) = edges.downcast::<PyTuple>() {
        let items: Vec<Bound<'_, PyAny>> = t.iter().collect();
        return match &items[..] {
            [s, d] => memory_edges(s, d, weights, labels),
            [_, _, _] if weights.is_some() => Err(invalid("weights given twice: in the edges tuple and as edge_weights")),
            [s, d, w] => memory_edges(s, d, Some(w), labels),
            other => Err(invalid(format!("an edges tuple is (src, dst) or (src, dst, weights), not {} items", other.len()))),
        };
    }
    let a = as_array(edges)?;
    if a.ndim() == 2 && a.shape()[0] == 2 {
        return memory_edges(&a.get_item(0)?, &a.get_item(1)?, weights, labels);
    }
    if a.ndim() == 2 && a.shape()[1] == 2 {
        let t = a.getattr("T")?;
        return memory_edges(&t.get_item(0)?, &t.get_item(1)?, weights, labels);
    }
    Err(invalid(format!(
        "edges must be a path, a pair of .npy paths, a (2, E) or (E, 2) integer array or a (src, dst[, weights]) tuple of arrays; got an array of shape {:?}",
        a.shape()
    )))
}

fn tensor_input(name: String, v: &Bound<'_, PyAny>) -> PyResult<TensorInput> {
    let py = v.py();
    let np = get_array_module(py)?;
    if !v.is_instance(&np.getattr("ndarray")?)? {
        let p: PathBuf = v.extract().map_err(|_| invalid(format!("tensor {name:?} must be a numpy array or a .npy path")))?;
        return Ok(TensorInput { name, data: TensorData::Npy(p) });
    }
    let descr: String = v.getattr("dtype")?.getattr("str")?.extract()?;
    let dtype = DType::parse(&descr)
        .ok_or_else(|| invalid(format!("tensor {name:?}: dtype {descr} is not one of float32, float16, int64, int32, uint8, bool (little-endian)")))?;
    let shape: Vec<u64> = v.getattr("shape")?.extract()?;
    let (rows, dim) = match shape[..] {
        [n] => (n, 1),
        [n, d] => (n, d),
        _ => return Err(invalid(format!("tensor {name:?} must be 1-D or 2-D, not shape {shape:?}"))),
    };
    // The store takes the rows as bytes: view the (C-ordered) array as
    // uint8 and copy once.
    let flat = np.call_method1("ascontiguousarray", (v,))?.call_method1("view", ("uint8",))?.call_method1("reshape", (-1,))?;
    let bytes = flat.downcast::<PyArray1<u8>>()?.readonly().as_slice()?.to_vec();
    Ok(TensorInput { name, data: TensorData::Memory { dtype, rows, dim, bytes } })
}

/// Builds a store at `out` (which must not exist) from `edges` and
/// `node_tensors`, sorting on disk beyond `memory_budget`, and returns a
/// report. `edges`: a text/CSV/.npy file, a pair of 1-D .npy files, a (2, E)
/// or (E, 2) integer array, or a (src, dst[, weights]) tuple of arrays. Node tensors:
/// name -> (n,) or (n, d) array or .npy file of float32, float16, int64,
/// int32, uint8 or bool. Weights or labels given as arrays are kept.
/// `order="degree"` renumbers vertices inside the store, hubs first (fewer
/// bytes per edge, hot state in the CPU caches); every id in and out of the
/// API stays the user's. A failed import leaves nothing behind.
#[pyfunction]
#[pyo3(signature = (
    out, edges, node_tensors=None, *, edge_weights=None, edge_labels=None, undirected=false, self_loops=false,
    dedup=false, weights=false, labels=false, in_edges=false, lower_lists=false, num_nodes=None, order="input", page_size=4096,
    fill_factor=1.0, memory_budget=1073741824, members=1, progress=ProgressArg::Flag(false),
))]
// Spelled out because pyo3 shows the non-literal progress default as "...".
#[pyo3(text_signature = "(out, edges, node_tensors=None, *, edge_weights=None, edge_labels=None, undirected=False, \
    self_loops=False, dedup=False, weights=False, labels=False, in_edges=False, lower_lists=False, num_nodes=None, order=\"input\", \
    page_size=4096, fill_factor=1.0, memory_budget=1073741824, members=1, progress=False)")]
#[allow(clippy::too_many_arguments)]
pub fn import_graph<'py>(
    py: Python<'py>,
    out: PathBuf,
    edges: &Bound<'py, PyAny>,
    node_tensors: Option<&Bound<'py, PyDict>>,
    edge_weights: Option<&Bound<'py, PyAny>>,
    edge_labels: Option<&Bound<'py, PyAny>>,
    undirected: bool,
    self_loops: bool,
    dedup: bool,
    weights: bool,
    labels: bool,
    in_edges: bool,
    lower_lists: bool,
    num_nodes: Option<u64>,
    order: &str,
    page_size: usize,
    fill_factor: f64,
    memory_budget: u64,
    members: usize,
    progress: ProgressArg<'py>,
) -> PyResult<Bound<'py, PyDict>> {
    let order = VertexOrder::parse(order).ok_or_else(|| invalid(format!("order {order:?} must be \"input\" or \"degree\"")))?;
    let edges = edge_input(edges, edge_weights, edge_labels)?;
    // Weights or labels handed over as arrays are meant to be kept.
    let (weights, labels) = match &edges {
        EdgeInput::Memory { weights: w, labels: l, .. } => (weights || w.is_some(), labels || l.is_some()),
        _ => (weights, labels),
    };
    let mut tensors = Vec::new();
    for (k, v) in node_tensors.into_iter().flatten() {
        tensors.push(tensor_input(k.extract()?, &v)?);
    }
    let reporter = Reporter::new(py, "import", progress)?;
    let report = |phase: &str, done: u64, total: u64| reporter.report(phase, done, total);
    let o = ImportOptions {
        undirected,
        self_loops,
        dedup,
        weights,
        labels,
        in_edges,
        lower_lists,
        page_size,
        fill_factor,
        memory_budget,
        num_nodes,
        order,
        members,
        ..Default::default()
    };
    let r = py.allow_threads(|| import(&out, &[edges], &tensors, &o, &report)).map_err(err)?;
    let d = PyDict::new(py);
    d.set_item("num_nodes", r.num_nodes)?;
    d.set_item("num_edges", r.num_edges)?;
    d.set_item("input_edges", r.input_edges)?;
    d.set_item("pages", r.pages)?;
    d.set_item("bytes", r.bytes)?;
    d.set_item("runs", r.runs)?;
    d.set_item("seconds", r.seconds)?;
    Ok(d)
}
