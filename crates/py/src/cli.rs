//! `cli_main`: the `solidgraph` command inside the extension, behind the
//! package's console script (python/solidgraph/cli.py). maturin cannot put
//! a Rust binary in a wheel that also holds a pyo3 module (one `bindings`
//! per wheel; PyO3/maturin#368), so the command ships as this function.

use std::ffi::OsString;

use pyo3::prelude::*;

/// Runs the `solidgraph` command on `argv` (the program name first) and
/// returns its exit code. Output goes straight to the process's stdout and
/// stderr (file descriptors 1 and 2, not sys.stdout); the GIL is released
/// for the whole command.
#[pyfunction]
pub fn cli_main(py: Python<'_>, argv: Vec<OsString>) -> i32 {
    py.allow_threads(|| solidgraph_cli::run(argv))
}
