//! PyO3 glue only: numpy in and out, the GIL released around engine work.

mod addtensor;
mod cli;
mod client;
mod convert;
mod errors;
mod graph;
mod import;
mod infer;
mod loader;
mod progress;
mod rdf;
mod sample;
mod state;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use errors::err;

/// Runs the I/O benchmark (same as `solidgraph-bench io`) and returns a dict
/// with iops, mib_s, p50_us, p99_us and backend.
#[pyfunction]
#[pyo3(signature = (paths, size, block=4096, depth=64, seconds=5.0, pattern="randread", backend=None, stripe=262144))]
#[allow(clippy::too_many_arguments)]
fn bench_io<'py>(
    py: Python<'py>,
    paths: Vec<std::path::PathBuf>,
    size: u64,
    block: usize,
    depth: usize,
    seconds: f64,
    pattern: &str,
    backend: Option<&str>,
    stripe: usize,
) -> PyResult<Bound<'py, PyDict>> {
    use solidgraph_io::bench::{IoBenchConfig, prepare, run};
    let cfg = IoBenchConfig {
        paths,
        size,
        block,
        depth,
        seconds,
        pattern: pattern.parse().map_err(err)?,
        backend: backend.map(str::parse).transpose().map_err(err)?,
        stripe_bytes: stripe,
        seed: 1,
    };
    let r = py.allow_threads(|| {
        let v = prepare(&cfg, &mut |_, _| {})?;
        run(&v, &cfg)
    });
    let r = r.map_err(err)?;
    let d = PyDict::new(py);
    d.set_item("iops", r.iops)?;
    d.set_item("mib_s", r.mib_s)?;
    d.set_item("p50_us", r.p50_us)?;
    d.set_item("p99_us", r.p99_us)?;
    d.set_item("backend", r.backend)?;
    d.set_item("ios", r.ios)?;
    Ok(d)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::add_to(m)?;
    m.add_function(wrap_pyfunction!(bench_io, m)?)?;
    m.add_function(wrap_pyfunction!(import::import_graph, m)?)?;
    m.add_function(wrap_pyfunction!(graph::open, m)?)?;
    m.add_class::<graph::Graph>()?;
    m.add_class::<sample::PySample>()?;
    m.add_class::<loader::SampleLoader>()?;
    m.add_function(wrap_pyfunction!(loader::loader_memory, m)?)?;
    m.add_class::<infer::PyModel>()?;
    m.add_function(wrap_pyfunction!(infer::load_model, m)?)?;
    m.add_function(wrap_pyfunction!(infer::batch_seed, m)?)?;
    m.add_function(wrap_pyfunction!(infer::time_kernel, m)?)?;
    m.add_function(wrap_pyfunction!(infer::last_request, m)?)?;
    m.add_function(wrap_pyfunction!(cli::cli_main, m)?)?;
    m.add_class::<client::RemoteChannel>()?;
    m.add_function(wrap_pyfunction!(state::set_state_budget, m)?)?;
    m.add_function(wrap_pyfunction!(state::state_budget, m)?)?;
    rdf::add_to(m)?;
    m.add_function(wrap_pyfunction!(rdf::rdf_error_classes, m)?)?;
    Ok(())
}
