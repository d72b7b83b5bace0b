//! The Python exception classes and the mapping from the engine's errors to
//! them. Every Rust variant is matched by name (no catch-all arm), so a new
//! variant does not compile until someone decides which class it raises.
//! The message is the Rust error's `Display`, except that a remedy ("import
//! it with edge weights") names the Python argument that gives it
//! (`StoreError::message(Front::Python)`).
//!
//! The classes are built with `type(name, bases, namespace)` at import
//! because several have two bases (`InvalidArgumentError` is also a
//! `ValueError`, `SolidGraphIOError` an `OSError`), which
//! `create_exception!` cannot express. Attributes the Rust variant carries
//! (`page`, `path`, `line`, ...) are set on the instance; the class holds
//! `None` for each, so every documented attribute reads on every instance.

use std::path::Path;

use pyo3::exceptions::{PyException, PyLookupError, PyMemoryError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyTuple, PyType};
use pyo3::{IntoPyObjectExt, PyTypeInfo};
use solidgraph_engine::EngineError;
use solidgraph_io::IoError;
use solidgraph_runner::RunnerError;
use solidgraph_store::{Front, StoreError};

/// The classes, in the order of `CLASSES`; `Base` must stay first.
#[derive(Clone, Copy)]
enum Kind {
    Base,
    Corruption,
    Stale,
    Format,
    NotFound,
    Locked,
    InvalidArgument,
    Io,
    OverBudget,
}

struct Class {
    name: &'static str,
    /// The built-in exception it also derives from, beside SolidGraphError.
    builtin: Option<fn(Python<'_>) -> Bound<'_, PyType>>,
    /// Attributes read as None unless the error sets them.
    attrs: &'static [&'static str],
    doc: &'static str,
}

const CLASSES: [Class; 9] = [
    Class {
        name: "SolidGraphError",
        builtin: None,
        attrs: &[],
        doc: "Base of every error the SolidGraph engine raises; `except SolidGraphError` catches them all.\n\n\
              The message names the file and line, or the page, and the reason. Raised as itself only for\n\
              an internal fault (an engine invariant broken, not a user error): please report those.",
    },
    Class {
        name: "CorruptionError",
        builtin: None,
        attrs: &["page", "path"],
        doc: "Stored data failed a check: a page's checksum or an invariant, or a member file truncated\n\
              or of the wrong size. `page` is the page number and `path` the file, each None where the\n\
              check does not know it. `Graph.verify()` names the first bad page; restore the store from\n\
              a copy or import it again.",
    },
    Class {
        name: "StaleError",
        builtin: None,
        attrs: &["page", "epoch", "found"],
        doc: "A reader met a page that a merge wrote after the reader opened the store (another process\n\
              merged and reused pages). The store is intact, so this is not a CorruptionError: open\n\
              the store again to read the merged graph. `page` is the page, `epoch` the reader's epoch,\n\
              `found` the page's.",
    },
    Class {
        name: "FormatError",
        builtin: None,
        attrs: &["path", "found", "supported"],
        doc: "`path` is not a store this build reads: not a SolidGraph store at all (no valid\n\
              superblock, or its first file missing), or a format version newer (upgrade solidgraph)\n\
              or older (import the graph again) than this build's. For a version mismatch `found` is\n\
              the store's format version and `supported` this build's; otherwise both are None.\n\n\
              Also raised for a model (model.json) this build does not read: a newer DFG version\n\
              (`found`, `supported`) or an op it does not know.",
    },
    Class {
        name: "NotFoundError",
        builtin: Some(PyLookupError::type_object),
        attrs: &["name"],
        doc: "The store has nothing by that name: `name` is the node tensor asked for.\n\n\
              Also a LookupError, the base of KeyError and IndexError, so code that looks things up\n\
              by name catches it as it catches a missing key. It is not a KeyError because KeyError\n\
              prints its message quoted, as a key.",
    },
    Class {
        name: "LockedError",
        builtin: None,
        attrs: &["path"],
        doc: "Another writer holds the store's lock (another process, or another writable Graph of\n\
              this one): a store has one writer at a time. `path` is the store. Open it read-only,\n\
              or close the writer first.",
    },
    Class {
        name: "InvalidArgumentError",
        builtin: Some(PyValueError::type_object),
        attrs: &["path", "line"],
        doc: "The call's arguments do not fit: a bad value or shape, a vertex id not in the graph, a\n\
              malformed input file, or an operation the store was not imported or opened for (in-edges,\n\
              edge weights, writable=True). For input files `path` names the file and `line` the line\n\
              where known; otherwise both are None. Also a ValueError, as Python raises for a right-typed\n\
              argument with a wrong value.",
    },
    Class {
        name: "SolidGraphIOError",
        builtin: Some(PyOSError::type_object),
        attrs: &["path"],
        doc: "The operating system failed a file or device operation (a missing file, a full device, an\n\
              I/O error), or the path to create already exists. Also an OSError: `errno` is set where\n\
              the system gave one (compare with the `errno` module). `path` names the file where known;\n\
              `filename` stays None so that str() is the engine's message, which names the file too.",
    },
    Class {
        name: "OverBudgetError",
        builtin: Some(PyMemoryError::type_object),
        attrs: &["algorithm", "needed", "budget"],
        doc: "A whole-graph algorithm's state for this store (`needed` bytes) exceeds the state budget\n\
              (`budget` bytes: the machine's memory unless `solidgraph.set_state_budget` lowered it), so\n\
              `algorithm` refused to start; nothing was allocated or written. Also a MemoryError, as\n\
              Python raises for an allocation that cannot be made.",
    },
];

static TYPES: GILOnceCell<Vec<Py<PyType>>> = GILOnceCell::new();

fn types(py: Python<'_>) -> PyResult<&Vec<Py<PyType>>> {
    TYPES.get_or_try_init(py, || {
        let mut out: Vec<Py<PyType>> = Vec::with_capacity(CLASSES.len());
        for c in &CLASSES {
            let bases = match (out.first(), c.builtin) {
                (None, _) => PyTuple::new(py, [PyException::type_object(py)])?,
                (Some(base), None) => PyTuple::new(py, [base.bind(py).clone()])?,
                (Some(base), Some(builtin)) => PyTuple::new(py, [base.bind(py).clone(), builtin(py)])?,
            };
            let ns = PyDict::new(py);
            // `solidgraph` exports every class, so pickling (e.g. from a
            // DataLoader worker) finds them there.
            ns.set_item("__module__", "solidgraph")?;
            ns.set_item("__doc__", c.doc)?;
            for a in c.attrs {
                ns.set_item(*a, py.None())?;
            }
            let t = PyType::type_object(py).call1((c.name, bases, ns))?.downcast_into::<PyType>()?;
            out.push(t.unbind());
        }
        Ok(out)
    })
}

/// Adds every class to the module.
pub fn add_to(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for (c, t) in CLASSES.iter().zip(types(m.py())?) {
        m.add(c.name, t.bind(m.py()))?;
    }
    Ok(())
}

type Attrs<'py> = Vec<(&'static str, Bound<'py, PyAny>)>;

/// One attribute for `Attrs`.
fn at<'py, T: IntoPyObjectExt<'py>>(py: Python<'py>, name: &'static str, v: T) -> PyResult<(&'static str, Bound<'py, PyAny>)> {
    Ok((name, v.into_bound_py_any(py)?))
}

fn path_at<'py>(py: Python<'py>, p: &Path) -> PyResult<(&'static str, Bound<'py, PyAny>)> {
    at(py, "path", p)
}

/// `errno` of an OS error, or None when the error did not come from the
/// system. An error that rewords the system's (a missing store is "no such
/// store") keeps it as its source, where the errno is found.
fn errno_of<'py>(py: Python<'py>, e: &std::io::Error) -> PyResult<(&'static str, Bound<'py, PyAny>)> {
    let mut raw = e.raw_os_error();
    let mut next = e.get_ref().and_then(|inner| inner.source());
    while let (None, Some(s)) = (raw, next) {
        raw = s.downcast_ref::<std::io::Error>().and_then(std::io::Error::raw_os_error);
        next = s.source();
    }
    at(py, "errno", raw)
}

/// `errno` by its name in Python's `errno` module, for errors the engine
/// detects itself (a path that exists, a full device).
fn errno_named<'py>(py: Python<'py>, name: &str) -> PyResult<(&'static str, Bound<'py, PyAny>)> {
    Ok(("errno", py.import("errno")?.getattr(name)?))
}

fn io_kind<'py>(py: Python<'py>, e: &IoError) -> PyResult<(Kind, Attrs<'py>)> {
    Ok(match e {
        IoError::Os { path, source } => (Kind::Io, vec![path_at(py, path)?, errno_of(py, source)?]),
        IoError::Device { path, source, .. } => (Kind::Io, vec![path_at(py, path)?, errno_of(py, source)?]),
        IoError::MissingMember { path } => (Kind::Io, vec![path_at(py, path)?, errno_named(py, "ENOENT")?]),
        IoError::NoSpace { path, .. } => (Kind::Io, vec![path_at(py, path)?, errno_named(py, "ENOSPC")?]),
        // The kernel refuses io_uring (seccomp, old kernel): a system
        // condition, met only when the uring backend is forced.
        IoError::UringUnavailable(_) => (Kind::Io, vec![]),
        // Member files that disagree with each other or with the volume's
        // geometry, and page numbers past the end: the files are damaged.
        IoError::MemberSize { path, .. } | IoError::UnalignedSize { path, .. } | IoError::ShortRead { path, .. } => {
            (Kind::Corruption, vec![path_at(py, path)?])
        }
        IoError::PastEnd { page, .. } => (Kind::Corruption, vec![at(py, "page", *page)?]),
        IoError::Config(_) => (Kind::InvalidArgument, vec![]),
        // A write batch the store built wrongly: the engine's fault, not
        // the caller's.
        IoError::BadWrite(_) => (Kind::Base, vec![]),
    })
}

fn store_kind<'py>(py: Python<'py>, e: &StoreError) -> PyResult<(Kind, Attrs<'py>)> {
    Ok(match e {
        StoreError::Io(e) => return io_kind(py, e),
        StoreError::File { path, source } => (Kind::Io, vec![path_at(py, path)?, errno_of(py, source)?]),
        StoreError::Exists { path } => (Kind::Io, vec![path_at(py, path)?, errno_named(py, "EEXIST")?]),
        StoreError::Parse { path, line, .. } => (Kind::InvalidArgument, vec![path_at(py, path)?, at(py, "line", *line)?]),
        StoreError::BadInput { path, .. } => (Kind::InvalidArgument, vec![path_at(py, path)?]),
        StoreError::Invalid(_) => (Kind::InvalidArgument, vec![]),
        // The engine reports ids past the end of its inputs (seeds,
        // sources) as invalid arguments; the store's own check raises the
        // same class so one `except` covers a bad id wherever it is caught.
        StoreError::VertexOutOfRange { .. } => (Kind::InvalidArgument, vec![]),
        // The operation does not fit how the store was opened or imported.
        StoreError::ReadOnly | StoreError::NoDirection(_) | StoreError::Lacks { .. } => (Kind::InvalidArgument, vec![]),
        StoreError::Corrupt { page, .. } => (Kind::Corruption, vec![at(py, "page", *page)?]),
        StoreError::Stale { page, epoch, found } => (Kind::Stale, vec![at(py, "page", *page)?, at(py, "epoch", *epoch)?, at(py, "found", *found)?]),
        StoreError::NewerFormat { path, found, supported } | StoreError::OlderFormat { path, found, supported } => {
            (Kind::Format, vec![path_at(py, path)?, at(py, "found", *found)?, at(py, "supported", *supported)?])
        }
        StoreError::NotAStore { path, .. } => (Kind::Format, vec![path_at(py, path)?]),
        StoreError::NoSuchTensor { name, .. } => (Kind::NotFound, vec![at(py, "name", name)?]),
        StoreError::Locked { path } => (Kind::Locked, vec![path_at(py, path)?]),
    })
}

fn engine_kind<'py>(py: Python<'py>, e: &EngineError) -> PyResult<(Kind, Attrs<'py>)> {
    Ok(match e {
        EngineError::Store(e) => return store_kind(py, e),
        EngineError::Invalid(_) => (Kind::InvalidArgument, vec![]),
        // What the store lacks for the algorithm (edge weights, in-edges)
        // or a size past its limits: the request does not fit this store.
        EngineError::Unsupported(_) => (Kind::InvalidArgument, vec![]),
        // The algorithm's state for this store exceeds the budget the
        // caller set (or the machine's memory): an allocation refused.
        EngineError::OverBudget { algorithm, needed, budget } => {
            (Kind::OverBudget, vec![at(py, "algorithm", *algorithm)?, at(py, "needed", *needed)?, at(py, "budget", *budget)?])
        }
        // Only a progress hook stops a run; the local ones never do.
        EngineError::Cancelled => (Kind::Base, vec![]),
    })
}

fn runner_kind<'py>(py: Python<'py>, e: &RunnerError) -> PyResult<(Kind, Attrs<'py>)> {
    Ok(match e {
        RunnerError::Engine(e) => return engine_kind(py, e),
        RunnerError::Io { path, source } => (Kind::Io, vec![path_at(py, path)?, errno_of(py, source)?]),
        // A model this build does not read: a newer DFG version or an op it
        // does not know (upgrade solidgraph), or not a DFG at all.
        RunnerError::Version { found, supported } => (Kind::Format, vec![at(py, "found", *found)?, at(py, "supported", *supported)?]),
        RunnerError::UnknownOp { .. } | RunnerError::Format(_) => (Kind::Format, vec![]),
        RunnerError::TooLarge { path, .. } => (Kind::InvalidArgument, vec![path_at(py, path)?]),
        // A malformed model, bad weights (missing, mistyped, misshapen,
        // NaN/inf), inputs that do not fit it, or a plugin that does not
        // load: the caller's model or arguments are at fault.
        RunnerError::Json(_)
        | RunnerError::BadOp { .. }
        | RunnerError::Invalid(_)
        | RunnerError::WeightsFile(_)
        | RunnerError::MissingWeight { .. }
        | RunnerError::WeightDtype { .. }
        | RunnerError::WeightShape { .. }
        | RunnerError::WeightNotFinite { .. }
        | RunnerError::Shape { .. }
        | RunnerError::Input { .. }
        | RunnerError::Block { .. }
        | RunnerError::NoKernel { .. } => (Kind::InvalidArgument, vec![]),
        RunnerError::Plugin { path, .. } => (Kind::InvalidArgument, vec![path_at(py, path)?]),
        // A layer file of infer_all failed its checksum or size check.
        RunnerError::RowFile { path, .. } => (Kind::Corruption, vec![path_at(py, path)?]),
        // A kernel that fails on inputs the plan checked: the engine's fault.
        RunnerError::Kernel { .. } => (Kind::Base, vec![]),
    })
}

/// The exception of `kind` with `message` and `attrs`.
fn build(py: Python<'_>, kind: Kind, message: String, attrs: Attrs<'_>) -> PyResult<PyErr> {
    let e = types(py)?[kind as usize].bind(py).call1((message,))?;
    for (name, value) in attrs {
        e.setattr(name, value)?;
    }
    Ok(PyErr::from_value(e))
}

/// An engine error that becomes a Python exception.
pub trait ToPyErr: std::fmt::Display {
    fn to_py_err(&self, py: Python<'_>) -> PyResult<PyErr>;
}

impl ToPyErr for StoreError {
    fn to_py_err(&self, py: Python<'_>) -> PyResult<PyErr> {
        let (kind, attrs) = store_kind(py, self)?;
        build(py, kind, self.message(Front::Python), attrs)
    }
}

impl ToPyErr for EngineError {
    fn to_py_err(&self, py: Python<'_>) -> PyResult<PyErr> {
        let (kind, attrs) = engine_kind(py, self)?;
        build(py, kind, self.message(Front::Python), attrs)
    }
}

impl ToPyErr for RunnerError {
    fn to_py_err(&self, py: Python<'_>) -> PyResult<PyErr> {
        let (kind, attrs) = runner_kind(py, self)?;
        let message = match self {
            RunnerError::Engine(e) => e.message(Front::Python),
            _ => self.to_string(),
        };
        build(py, kind, message, attrs)
    }
}

impl ToPyErr for IoError {
    fn to_py_err(&self, py: Python<'_>) -> PyResult<PyErr> {
        let (kind, attrs) = io_kind(py, self)?;
        build(py, kind, self.to_string(), attrs)
    }
}

/// The Python exception for an engine error: its class by variant, its
/// message the error's text. (If building it fails, that failure is
/// raised instead: it says more than a half-built exception would.)
pub fn err<E: ToPyErr>(e: E) -> PyErr {
    Python::with_gil(|py| e.to_py_err(py).unwrap_or_else(|failed| failed))
}

/// InvalidArgumentError for an argument the bindings reject themselves.
pub fn invalid(message: impl Into<String>) -> PyErr {
    Python::with_gil(|py| build(py, Kind::InvalidArgument, message.into(), Vec::new()).unwrap_or_else(|failed| failed))
}
