//! The pipelined loader as a Python iterator: Rust threads sample (and
//! gather features for) the next batches while Python trains on this one.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use solidgraph_engine::loader::{BatchShape, PrefetchOptions, Prefetcher, loader_memory as loader_memory_bound, plan_budget};
use solidgraph_engine::sampler::SampleOptions;

use crate::convert::u64_vec;
use crate::errors::err;
use crate::graph::{Graph, parse_direction};
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

    /// Where the pipeline waited so far: groups sampled ahead (`draws`,
    /// `drawn` batches), waits for the buffer cap (`cap_waits`,
    /// `cap_wait_s`), the consumer's wait for its next batch
    /// (`consumer_wait_s`) and the most bytes held under the cap
    /// (`peak_held`).
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("draws", s.draws)?;
        d.set_item("drawn", s.drawn)?;
        d.set_item("cap_waits", s.cap_waits)?;
        d.set_item("cap_wait_s", s.cap_wait_ns as f64 / 1e9)?;
        d.set_item("consumer_wait_s", s.consumer_wait_ns as f64 / 1e9)?;
        d.set_item("peak_held", s.peak_held)?;
        Ok(d)
    }
}

/// A budget holds only if the batches' freed buffers go back to the
/// system. glibc keeps them otherwise: its mmap threshold rises to the
/// largest block freed (up to 32 MiB), so a batch's multi-MiB rows and edge
/// arrays then come from per-thread arenas, where freed ones stay resident
/// and fragment, uncounted by the budget (docs/PERFORMANCE.md, Loader). A
/// fixed threshold maps every large buffer and unmaps it when freed, and
/// threads that start from now on share at most two arenas, so few arenas
/// hold free blocks the others cannot reuse (one arena fragments no less
/// and makes every thread wait on one lock). Process-wide, set once; a
/// no-op outside glibc.
fn return_freed_buffers() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static SET: std::sync::Once = std::sync::Once::new();
        SET.call_once(|| {
            // SAFETY: mallopt only changes glibc's allocation parameters;
            // blocks already allocated stay valid.
            unsafe {
                libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
                libc::mallopt(libc::M_ARENA_MAX, 2);
            }
        });
    }
}

/// The bound on a loader's memory outside the store's caches, in bytes by
/// part (`ahead`, `gathered`, `handed`; `buffers`, the three within the
/// cap; `working`, `store`, `total`), for batches of `batch_size` seeds
/// sampled with `fanouts` and gathering `tensors`. With `memory_budget`,
/// how the loader splits it: also `cache_bytes`, `row_cache_bytes`,
/// `buffer_bytes` (the cap) and `minimum` (a budget below the minimum is an
/// InvalidArgumentError naming it); a budget also makes the process's
/// allocator return large freed blocks to the system (`return_freed_buffers`).
/// With `seeds` (the ids batches are
/// taken from), a batch's first hop is bounded by its seeds' degrees.
#[pyfunction]
#[pyo3(signature = (graph, batch_size, fanouts, tensors, direction="in", workers=2, prefetch=4, lookahead=32, memory_budget=None, seeds=None, replace=false))]
#[allow(clippy::too_many_arguments)]
pub fn loader_memory<'py>(
    py: Python<'py>,
    graph: PyRef<'py, Graph>,
    batch_size: usize,
    fanouts: Vec<i64>,
    tensors: Vec<String>,
    direction: &str,
    workers: usize,
    prefetch: usize,
    lookahead: usize,
    memory_budget: Option<u64>,
    seeds: Option<&Bound<'py, PyAny>>,
    replace: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let store = graph.store()?;
    let o = SampleOptions { fanouts, direction: parse_direction(direction)?, tensors, replace, ..Default::default() };
    let shape = match seeds {
        None => BatchShape::of(&store, batch_size, &o).map_err(err)?,
        Some(ids) => {
            let ids = u64_vec(ids, "seeds")?;
            py.allow_threads(|| BatchShape::with_seeds(&store, &ids, batch_size, &o)).map_err(err)?
        }
    };
    let cfg = PrefetchOptions { workers, prefetch, lookahead, buffer_bytes: None, reopen: None };
    let d = PyDict::new(py);
    let m = match memory_budget {
        None => loader_memory_bound(&shape, &cfg).map_err(err)?,
        Some(budget) => {
            let plan = plan_budget(budget, &shape, &cfg).map_err(err)?;
            return_freed_buffers();
            d.set_item("cache_bytes", plan.cache_bytes)?;
            d.set_item("row_cache_bytes", plan.row_cache_bytes)?;
            d.set_item("buffer_bytes", plan.buffer_bytes)?;
            d.set_item("minimum", plan.minimum)?;
            plan.memory
        }
    };
    for (k, v) in [
        ("ahead", m.ahead),
        ("gathered", m.gathered),
        ("handed", m.handed),
        ("buffers", m.buffers),
        ("working", m.working),
        ("store", m.store),
        ("total", m.total()),
    ] {
        d.set_item(k, v)?;
    }
    Ok(d)
}
