//! `solidgraph.open` and the `Graph` it returns: batched reads of a store,
//! numpy out without copies, the GIL released while the store works.

use std::path::PathBuf;
use std::sync::Arc;

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use solidgraph_store::{Direction, OpenOptions, Store};

use crate::convert::{int64_array, u64_vec};
use crate::err;

/// An open SolidGraph store. Every method takes a whole batch of vertices.
/// Safe to share between Python threads: the store is immutable once open
/// and its page cache does its own locking.
#[pyclass(frozen, module = "solidgraph")]
pub struct Graph {
    // Behind an Arc so the engine objects made from a graph (samplers,
    // loaders) can hold the same open store and its cache.
    store: Arc<Store>,
}

fn parse_direction(s: &str) -> PyResult<Direction> {
    s.parse().map_err(err)
}

#[pymethods]
impl Graph {
    #[getter]
    fn num_nodes(&self) -> u64 {
        self.store.num_nodes()
    }

    #[getter]
    fn num_edges(&self) -> u64 {
        self.store.num_edges()
    }

    #[getter]
    fn directed(&self) -> bool {
        self.store.directed()
    }

    #[getter]
    fn has_weights(&self) -> bool {
        self.store.has_weights()
    }

    #[getter]
    fn has_labels(&self) -> bool {
        self.store.has_labels()
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.store.path().to_path_buf()
    }

    /// name -> (dtype, dim) of every node tensor.
    #[getter]
    fn tensors<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for t in self.store.tensors() {
            d.set_item(&t.name, (t.dtype.name(), t.dim))?;
        }
        Ok(d)
    }

    /// Neighbor lists of `ids` as (indptr, indices[, weights][, labels]):
    /// the list of ids[i] is indices[indptr[i]:indptr[i + 1]], sorted.
    #[pyo3(signature = (ids, direction="out", with_weights=false, with_labels=false))]
    fn neighbors<'py>(
        &self,
        py: Python<'py>,
        ids: &Bound<'py, PyAny>,
        direction: &str,
        with_weights: bool,
        with_labels: bool,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let ids = u64_vec(ids, "ids")?;
        let dir = parse_direction(direction)?;
        let csr = py.allow_threads(|| self.store.neighbors(&ids, dir, with_weights, with_labels)).map_err(err)?;
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
        let ids = u64_vec(ids, "ids")?;
        let dir = parse_direction(direction)?;
        let deg = py.allow_threads(|| self.store.degree(&ids, dir)).map_err(err)?;
        int64_array(py, deg)
    }

    /// Weight of each edge src[i] -> dst[i]; NaN where there is none.
    fn edge_weights<'py>(&self, py: Python<'py>, src: &Bound<'py, PyAny>, dst: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let (src, dst) = (u64_vec(src, "src")?, u64_vec(dst, "dst")?);
        let w = py.allow_threads(|| self.store.edge_weights(&src, &dst)).map_err(err)?;
        Ok(PyArray1::from_vec(py, w))
    }

    /// Rows `ids` of node tensor `name` in its dtype: (n, dim), or (n,) for
    /// one element per row.
    fn tensor<'py>(&self, py: Python<'py>, name: &str, ids: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let ids = u64_vec(ids, "ids")?;
        let rows = py.allow_threads(|| self.store.tensor(name, &ids)).map_err(err)?;
        // The row bytes move into numpy and are viewed as the stored dtype:
        // no copy, and one path for every dtype (float16 and bool included).
        let a = PyArray1::from_vec(py, rows.data).call_method1("view", (rows.dtype.name(),))?;
        if rows.dim == 1 { Ok(a) } else { a.call_method1("reshape", ((ids.len(), rows.dim),)) }
    }

    /// Page cache and I/O counters since open or `reset_stats()`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.store.stats();
        let d = PyDict::new(py);
        d.set_item("cache_hits", s.cache.hits)?;
        d.set_item("cache_misses", s.cache.misses)?;
        d.set_item("cache_evictions", s.cache.evictions)?;
        d.set_item("cache_bytes", s.cache.bytes)?;
        d.set_item("cache_budget", s.cache.budget)?;
        d.set_item("pages_read", s.pages_read())?;
        d.set_item("ios", s.ios())?;
        d.set_item("bytes_read", s.bytes_read())?;
        Ok(d)
    }

    fn reset_stats(&self) {
        self.store.reset_stats();
    }

    /// Empties the page cache, for cold-cache measurements.
    fn clear_cache(&self) {
        self.store.clear_cache();
    }

    /// Reads every page and checks checksums and invariants; raises
    /// SolidGraphError naming the first bad page.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = py.allow_threads(|| self.store.verify(&mut |_, _| {})).map_err(err)?;
        let d = PyDict::new(py);
        d.set_item("pages", r.pages)?;
        d.set_item("edges", r.edges)?;
        d.set_item("tensor_pages", r.tensor_pages)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        let s = &self.store;
        let mut kind = vec![if s.directed() { "directed" } else { "undirected" }];
        if s.has_weights() {
            kind.push("weights");
        }
        if s.has_labels() {
            kind.push("labels");
        }
        let tensors: Vec<String> = s.tensors().iter().map(|t| format!("{} {}[{}]", t.name, t.dtype.name(), t.dim)).collect();
        format!(
            "<solidgraph.Graph {:?}: {} nodes, {} edges, {}; tensors: {}>",
            s.path().display().to_string(),
            s.num_nodes(),
            s.num_edges(),
            kind.join(", "),
            if tensors.is_empty() { "none".to_string() } else { tensors.join(", ") }
        )
    }
}

/// Opens a store with a page cache of `cache_bytes` (0: no cache).
#[pyfunction]
#[pyo3(signature = (path, cache_bytes=268435456))]
pub fn open(py: Python<'_>, path: PathBuf, cache_bytes: u64) -> PyResult<Graph> {
    let opts = OpenOptions { cache_bytes, ..Default::default() };
    let store = py.allow_threads(|| Store::open(&path, &opts)).map_err(err)?;
    Ok(Graph { store: Arc::new(store) })
}
