//! A sampled subgraph as Python sees it: numpy arrays over the engine's
//! buffers (no copies), in the shape of PyG's `SamplerOutput`.

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use solidgraph_engine::sampler::Sample as EngineSample;
use solidgraph_store::Rows;

use crate::convert::int64_array;

/// A sampled subgraph. `node`: global ids, seeds first; `row`/`col`: local
/// indices into `node` per sampled edge, messages flowing row -> col (`row`
/// is the sampled neighbor, `col` the node it was drawn for); `edge_index`:
/// the (2, E) array whose rows are `row` and `col` (they are views of it);
/// `edge`: global edge ids; `num_sampled_nodes`/`num_sampled_edges`: per
/// hop; `tensors`: name -> rows for `node`.
#[pyclass(frozen, module = "solidgraph", name = "Sample")]
pub struct PySample {
    #[pyo3(get)]
    node: PyObject,
    #[pyo3(get)]
    row: PyObject,
    #[pyo3(get)]
    col: PyObject,
    #[pyo3(get)]
    edge_index: PyObject,
    #[pyo3(get)]
    edge: PyObject,
    #[pyo3(get)]
    num_sampled_nodes: PyObject,
    #[pyo3(get)]
    num_sampled_edges: PyObject,
    #[pyo3(get)]
    tensors: Py<PyDict>,
}

#[pymethods]
impl PySample {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let n = self.node.bind(py).len()?;
        let e = self.edge.bind(py).len()?;
        let names: Vec<String> = self.tensors.bind(py).keys().iter().map(|k| k.to_string()).collect();
        Ok(format!("<solidgraph.Sample: {n} nodes, {e} edges; tensors: {}>", if names.is_empty() { "none".into() } else { names.join(", ") }))
    }
}

/// Tensor rows as an array of their dtype, (n, dim) or (n,), without a copy.
pub fn rows_array<'py>(py: Python<'py>, rows: Rows, n: usize) -> PyResult<Bound<'py, PyAny>> {
    let a = PyArray1::from_vec(py, rows.data).call_method1("view", (rows.dtype.name(),))?;
    if rows.dim == 1 { Ok(a) } else { a.call_method1("reshape", ((n, rows.dim),)) }
}

pub fn to_py(py: Python<'_>, s: EngineSample, names: &[String]) -> PyResult<PySample> {
    let n = s.node.len();
    let e = s.row.len();
    let mut ei = s.row;
    ei.extend_from_slice(&s.col);
    drop(s.col);
    let edge_index = int64_array(py, ei)?.call_method1("reshape", ((2, e),))?;
    let tensors = PyDict::new(py);
    for (name, rows) in names.iter().zip(s.tensors) {
        tensors.set_item(name, rows_array(py, rows, n)?)?;
    }
    Ok(PySample {
        node: int64_array(py, s.node)?.unbind(),
        row: edge_index.get_item(0)?.unbind(),
        col: edge_index.get_item(1)?.unbind(),
        edge_index: edge_index.unbind(),
        edge: int64_array(py, s.edge)?.unbind(),
        num_sampled_nodes: int64_array(py, s.num_sampled_nodes)?.unbind(),
        num_sampled_edges: int64_array(py, s.num_sampled_edges)?.unbind(),
        tensors: tensors.unbind(),
    })
}
