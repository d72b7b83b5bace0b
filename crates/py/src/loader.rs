//! The pipelined loader as a Python iterator: Rust threads sample (and
//! gather features for) the next batches while Python trains on this one.

use pyo3::prelude::*;
use solidgraph_engine::loader::Prefetcher;

use crate::errors::err;
use crate::sample::{PySample, to_py};

/// Iterator over the sampled mini-batches of one epoch, in order (made by
/// `Graph.sample_loader`). The GIL is released while it waits for a batch.
/// An error in a worker is raised here, at its batch, and ends the epoch.
/// Safe after fork: iterated in a child process, it reopens the store and
/// restarts its threads there at the first batch not yet handed out.
#[pyclass(module = "solidgraph", name = "SampleLoader")]
pub struct SampleLoader {
    inner: Prefetcher,
    tensors: Vec<String>,
}

impl SampleLoader {
    pub fn new(inner: Prefetcher, tensors: Vec<String>) -> SampleLoader {
        SampleLoader { inner, tensors }
    }
}

#[pymethods]
impl SampleLoader {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<PySample>> {
        let inner = &mut self.inner;
        match py.allow_threads(|| inner.next()) {
            None => Ok(None),
            Some(Ok(s)) => to_py(py, s, &self.tensors).map(Some),
            Some(Err(e)) => Err(err(e)),
        }
    }

    /// Batches in the epoch.
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    /// Batches handed out so far.
    #[getter]
    fn position(&self) -> usize {
        self.inner.position()
    }
}
