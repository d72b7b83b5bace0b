//! `solidgraph.rdf`: the RDF store's Python API, shaped like pyoxigraph's
//! (`Store`, `NamedNode`, `BlankNode`, `Literal`, `Quad`, query results
//! with `serialize`) so code can switch with few changes.
//!
//! A query runs with the GIL released; SELECT and CONSTRUCT results are
//! pulled from the store in batches of `BATCH` rows, each batch with the
//! GIL released, so a result is never held whole. The core's result
//! iterators are not `Send` (spareval's hold `Rc`s): result objects are
//! `unsendable` (used only on the thread that ran the query), and the
//! values cross `allow_threads` in `SameThread`, which runs its closure on
//! the calling thread.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::exceptions::{PyIndexError, PyKeyError, PyStopIteration, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple, PyType};
use pyo3::{IntoPyObjectExt, PyTypeInfo};
use solidgraph_rdf::{
    BlankNode, GraphName, Literal, LoadOptions, NamedNode, NamedOrBlankNode, OpenOptions, Quad, QueryOptions, QueryOutput, QueryResultsFormat, RdfError,
    RdfFormat, RdfStore, SolutionRows, Term, Triple, TripleRows, Variable,
};

use crate::errors;

/// Rows pulled from the store per GIL release while iterating results.
const BATCH: usize = 1024;

/// A value moved out of (or into) `Python::allow_threads`, which runs its
/// closure on the calling thread: the `Rc`s inside never change threads.
struct SameThread<T>(T);
// SAFETY: `allow_threads` runs the closure on the current thread, and the
// owners of these values are `unsendable` pyclasses, checked by PyO3 to be
// used only on the thread that made them.
unsafe impl<T> Send for SameThread<T> {}

// ----------------------------------------------------------------- errors

/// The exception classes the RDF API adds; built once, on first use.
static CLASSES: GILOnceCell<(Py<PyType>, Py<PyType>)> = GILOnceCell::new();

fn native_class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    Ok(py.import("solidgraph._native")?.getattr(name)?.downcast_into::<PyType>()?)
}

/// `RdfSyntaxError` (a SolidGraphError and a SyntaxError, as pyoxigraph
/// raises for bad syntax: `lineno` and `offset` set where known) and
/// `QueryTimeoutError` (a SolidGraphError and a TimeoutError).
fn classes(py: Python<'_>) -> PyResult<&(Py<PyType>, Py<PyType>)> {
    CLASSES.get_or_try_init(py, || {
        let base = native_class(py, "SolidGraphError")?;
        let make = |name: &str, builtin: Bound<'_, PyType>, doc: &str| -> PyResult<Py<PyType>> {
            let ns = PyDict::new(py);
            ns.set_item("__module__", "solidgraph.rdf")?;
            ns.set_item("__doc__", doc)?;
            let bases = PyTuple::new(py, [base.clone(), builtin])?;
            Ok(PyType::type_object(py).call1((name, bases, ns))?.downcast_into::<PyType>()?.unbind())
        };
        let syntax = make(
            "RdfSyntaxError",
            pyo3::exceptions::PySyntaxError::type_object(py),
            "Bad syntax in RDF data or in a SPARQL query or update: `filename` names the data file\n\
             (None for a query), `lineno` and `offset` the 1-based line and column where known.\n\
             Also a SyntaxError, as pyoxigraph raises. Nothing was changed.",
        )?;
        let timeout = make(
            "QueryTimeoutError",
            pyo3::exceptions::PyTimeoutError::type_object(py),
            "A query ran past its `timeout` and was cancelled; nothing was changed. Also a TimeoutError.",
        )?;
        Ok((syntax, timeout))
    })
}

/// Line and column of a SPARQL parse error's "at L:C" prefix.
fn position(message: &str) -> Option<(u64, u64)> {
    let rest = &message[message.find(" at ")? + 4..];
    let end = rest.find(|c: char| !(c.is_ascii_digit() || c == ':')).unwrap_or(rest.len());
    let (l, c) = rest[..end].trim_end_matches(':').split_once(':')?;
    Some((l.parse().ok()?, c.parse().ok()?))
}

fn syntax_error(py: Python<'_>, message: String, file: Option<String>, at: Option<(u64, u64)>) -> PyResult<PyErr> {
    let (line, col) = (at.map(|a| a.0), at.map(|a| a.1));
    let details = (file, line, col, py.None());
    let e = classes(py)?.0.bind(py).call1((message, details))?;
    Ok(PyErr::from_value(e))
}

fn rdf_error(py: Python<'_>, e: RdfError) -> PyResult<PyErr> {
    let message = e.to_string();
    let with = |class: &str, attrs: &[(&str, Bound<'_, PyAny>)]| -> PyResult<PyErr> {
        let x = native_class(py, class)?.call1((message.clone(),))?;
        for (k, v) in attrs {
            x.setattr(*k, v)?;
        }
        Ok(PyErr::from_value(x))
    };
    match e {
        RdfError::Syntax { file, line, column, .. } => syntax_error(py, message, Some(file), Some((line, column))),
        RdfError::QuerySyntax(m) => syntax_error(py, message, None, position(&m)),
        RdfError::Timeout(_) => Ok(PyErr::from_value(classes(py)?.1.bind(py).call1((message,))?)),
        RdfError::Evaluation(_) | RdfError::Unsupported(_) | RdfError::ResultLimit(_) | RdfError::Invalid(_) | RdfError::ReadOnly => {
            with("InvalidArgumentError", &[])
        }
        RdfError::Corrupt { path, .. } => with("CorruptionError", &[("path", path.into_bound_py_any(py)?)]),
        RdfError::NotRdf(path) | RdfError::OldFormat { path, .. } => with("FormatError", &[("path", path.into_bound_py_any(py)?)]),
        RdfError::Io { path, source } => {
            let errno = source.raw_os_error().into_bound_py_any(py)?;
            with("SolidGraphIOError", &[("path", path.into_bound_py_any(py)?), ("errno", errno)])
        }
        RdfError::Store(e) => Ok(errors::err(e)),
    }
}

/// The Python exception for an RDF error, keeping its kind.
fn err(e: RdfError) -> PyErr {
    Python::with_gil(|py| rdf_error(py, e).unwrap_or_else(|failed| failed))
}

// ------------------------------------------------------------------ terms

/// An IRI, as pyoxigraph's `NamedNode`.
#[pyclass(module = "solidgraph._native", name = "NamedNode", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyNamedNode {
    pub inner: NamedNode,
}

#[pymethods]
impl PyNamedNode {
    #[new]
    fn new(value: String) -> PyResult<Self> {
        NamedNode::new(value).map(|inner| PyNamedNode { inner }).map_err(|e| PyValueError::new_err(e.to_string()))
    }
    /// The IRI.
    #[getter]
    fn value(&self) -> &str {
        self.inner.as_str()
    }
    fn __str__(&self) -> String {
        self.inner.to_string()
    }
    fn __repr__(&self) -> String {
        format!("<NamedNode value={}>", self.inner.as_str())
    }
}

/// A blank node, as pyoxigraph's `BlankNode`; a fresh unique one without a value.
#[pyclass(module = "solidgraph._native", name = "BlankNode", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyBlankNode {
    pub inner: BlankNode,
}

#[pymethods]
impl PyBlankNode {
    #[new]
    #[pyo3(signature = (value=None))]
    fn new(value: Option<String>) -> PyResult<Self> {
        let inner = match value {
            Some(v) => BlankNode::new(v).map_err(|e| PyValueError::new_err(e.to_string()))?,
            None => BlankNode::default(),
        };
        Ok(PyBlankNode { inner })
    }
    /// The blank node's label.
    #[getter]
    fn value(&self) -> &str {
        self.inner.as_str()
    }
    fn __str__(&self) -> String {
        self.inner.to_string()
    }
    fn __repr__(&self) -> String {
        format!("<BlankNode value={}>", self.inner.as_str())
    }
}

/// A literal, as pyoxigraph's `Literal`: a simple, language-tagged or typed value.
#[pyclass(module = "solidgraph._native", name = "RdfLiteral", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyLiteral {
    pub inner: Literal,
}

#[pymethods]
impl PyLiteral {
    #[new]
    #[pyo3(signature = (value, *, datatype=None, language=None))]
    fn new(value: String, datatype: Option<PyRef<'_, PyNamedNode>>, language: Option<String>) -> PyResult<Self> {
        let inner = match (datatype, language) {
            (Some(_), Some(_)) => return Err(PyValueError::new_err("a literal has a datatype or a language, not both")),
            (None, Some(lang)) => Literal::new_language_tagged_literal(value, lang).map_err(|e| PyValueError::new_err(e.to_string()))?,
            (Some(dt), None) => Literal::new_typed_literal(value, dt.inner.clone()),
            (None, None) => Literal::new_simple_literal(value),
        };
        Ok(PyLiteral { inner })
    }
    /// The lexical form.
    #[getter]
    fn value(&self) -> &str {
        self.inner.value()
    }
    /// The language tag, or None.
    #[getter]
    fn language(&self) -> Option<&str> {
        self.inner.language()
    }
    /// The datatype (rdf:langString for a language-tagged literal, xsd:string for a simple one).
    #[getter]
    fn datatype(&self) -> PyNamedNode {
        PyNamedNode { inner: self.inner.datatype().into_owned() }
    }
    fn __str__(&self) -> String {
        self.inner.to_string()
    }
    fn __repr__(&self) -> String {
        format!("<Literal {}>", self.inner)
    }
}

/// The default graph, as pyoxigraph's `DefaultGraph`.
#[pyclass(module = "solidgraph._native", name = "DefaultGraph", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyDefaultGraph {}

#[pymethods]
impl PyDefaultGraph {
    #[new]
    fn new() -> Self {
        PyDefaultGraph {}
    }
    #[getter]
    fn value(&self) -> &str {
        ""
    }
    fn __str__(&self) -> &str {
        "DEFAULT"
    }
    fn __repr__(&self) -> &str {
        "<DefaultGraph>"
    }
}

/// A query variable, as pyoxigraph's `Variable`.
#[pyclass(module = "solidgraph._native", name = "Variable", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyVariable {
    pub inner: Variable,
}

#[pymethods]
impl PyVariable {
    #[new]
    fn new(value: String) -> PyResult<Self> {
        Variable::new(value).map(|inner| PyVariable { inner }).map_err(|e| PyValueError::new_err(e.to_string()))
    }
    /// The name, without `?`.
    #[getter]
    fn value(&self) -> &str {
        self.inner.as_str()
    }
    fn __str__(&self) -> String {
        self.inner.to_string()
    }
    fn __repr__(&self) -> String {
        format!("<Variable value={}>", self.inner.as_str())
    }
}

/// A triple, as pyoxigraph's `Triple`.
#[pyclass(module = "solidgraph._native", name = "Triple", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyTriple {
    pub inner: Triple,
}

#[pymethods]
impl PyTriple {
    #[new]
    fn new(subject: &Bound<'_, PyAny>, predicate: PyRef<'_, PyNamedNode>, object: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyTriple { inner: Triple::new(subject_of(subject)?, predicate.inner.clone(), term_of(object)?) })
    }
    #[getter]
    fn subject<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        subject_to_py(py, &self.inner.subject)
    }
    #[getter]
    fn predicate(&self) -> PyNamedNode {
        PyNamedNode { inner: self.inner.predicate.clone() }
    }
    #[getter]
    fn object<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        term_to_py(py, &self.inner.object)
    }
    fn __str__(&self) -> String {
        self.inner.to_string()
    }
    fn __repr__(&self) -> String {
        format!("<Triple {}>", self.inner)
    }
    fn __len__(&self) -> usize {
        3
    }
    fn __getitem__<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyAny>> {
        match i {
            0 => self.subject(py),
            1 => self.predicate().into_bound_py_any(py),
            2 => self.object(py),
            _ => Err(PyIndexError::new_err("a triple has 3 terms")),
        }
    }
}

/// A quad, as pyoxigraph's `Quad`; `graph_name` defaults to the default graph.
#[pyclass(module = "solidgraph._native", name = "Quad", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyQuad {
    pub inner: Quad,
}

#[pymethods]
impl PyQuad {
    #[new]
    #[pyo3(signature = (subject, predicate, object, graph_name=None))]
    fn new(subject: &Bound<'_, PyAny>, predicate: PyRef<'_, PyNamedNode>, object: &Bound<'_, PyAny>, graph_name: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let g = match graph_name {
            Some(g) => graph_of(g)?,
            None => GraphName::DefaultGraph,
        };
        Ok(PyQuad { inner: Quad::new(subject_of(subject)?, predicate.inner.clone(), term_of(object)?, g) })
    }
    #[getter]
    fn subject<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        subject_to_py(py, &self.inner.subject)
    }
    #[getter]
    fn predicate(&self) -> PyNamedNode {
        PyNamedNode { inner: self.inner.predicate.clone() }
    }
    #[getter]
    fn object<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        term_to_py(py, &self.inner.object)
    }
    #[getter]
    fn graph_name<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        graph_to_py(py, &self.inner.graph_name)
    }
    /// The triple without the graph name.
    #[getter]
    fn triple(&self) -> PyTriple {
        PyTriple { inner: Triple::from(self.inner.clone()) }
    }
    fn __str__(&self) -> String {
        self.inner.to_string()
    }
    fn __repr__(&self) -> String {
        format!("<Quad {}>", self.inner)
    }
    fn __len__(&self) -> usize {
        4
    }
    fn __getitem__<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyAny>> {
        match i {
            0 => self.subject(py),
            1 => self.predicate().into_bound_py_any(py),
            2 => self.object(py),
            3 => self.graph_name(py),
            _ => Err(PyIndexError::new_err("a quad has 4 terms")),
        }
    }
}

fn term_to_py<'py>(py: Python<'py>, t: &Term) -> PyResult<Bound<'py, PyAny>> {
    match t {
        Term::NamedNode(n) => PyNamedNode { inner: n.clone() }.into_bound_py_any(py),
        Term::BlankNode(b) => PyBlankNode { inner: b.clone() }.into_bound_py_any(py),
        Term::Literal(l) => PyLiteral { inner: l.clone() }.into_bound_py_any(py),
        #[allow(unreachable_patterns)]
        _ => Err(PyValueError::new_err("RDF 1.2 triple terms are not supported")),
    }
}

fn subject_to_py<'py>(py: Python<'py>, s: &NamedOrBlankNode) -> PyResult<Bound<'py, PyAny>> {
    match s {
        NamedOrBlankNode::NamedNode(n) => PyNamedNode { inner: n.clone() }.into_bound_py_any(py),
        NamedOrBlankNode::BlankNode(b) => PyBlankNode { inner: b.clone() }.into_bound_py_any(py),
    }
}

fn graph_to_py<'py>(py: Python<'py>, g: &GraphName) -> PyResult<Bound<'py, PyAny>> {
    match g {
        GraphName::NamedNode(n) => PyNamedNode { inner: n.clone() }.into_bound_py_any(py),
        GraphName::BlankNode(b) => PyBlankNode { inner: b.clone() }.into_bound_py_any(py),
        GraphName::DefaultGraph => PyDefaultGraph {}.into_bound_py_any(py),
    }
}

fn term_of(o: &Bound<'_, PyAny>) -> PyResult<Term> {
    if let Ok(n) = o.downcast::<PyNamedNode>() {
        Ok(n.get().inner.clone().into())
    } else if let Ok(b) = o.downcast::<PyBlankNode>() {
        Ok(b.get().inner.clone().into())
    } else if let Ok(l) = o.downcast::<PyLiteral>() {
        Ok(l.get().inner.clone().into())
    } else {
        Err(PyTypeError::new_err(format!("expected a NamedNode, BlankNode or Literal, not {}", o.get_type().name()?)))
    }
}

fn subject_of(o: &Bound<'_, PyAny>) -> PyResult<NamedOrBlankNode> {
    if let Ok(n) = o.downcast::<PyNamedNode>() {
        Ok(n.get().inner.clone().into())
    } else if let Ok(b) = o.downcast::<PyBlankNode>() {
        Ok(b.get().inner.clone().into())
    } else {
        Err(PyTypeError::new_err(format!("expected a NamedNode or BlankNode, not {}", o.get_type().name()?)))
    }
}

fn graph_of(o: &Bound<'_, PyAny>) -> PyResult<GraphName> {
    if o.downcast::<PyDefaultGraph>().is_ok() {
        Ok(GraphName::DefaultGraph)
    } else {
        Ok(match subject_of(o)? {
            NamedOrBlankNode::NamedNode(n) => n.into(),
            NamedOrBlankNode::BlankNode(b) => b.into(),
        })
    }
}

// ---------------------------------------------------------------- formats

/// An RDF syntax, as pyoxigraph's `RdfFormat`.
#[pyclass(module = "solidgraph._native", name = "RdfFormat", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyRdfFormat {
    inner: RdfFormat,
}

#[pymethods]
#[allow(non_snake_case)]
impl PyRdfFormat {
    #[classattr]
    fn N_TRIPLES() -> Self {
        PyRdfFormat { inner: RdfFormat::NTriples }
    }
    #[classattr]
    fn N_QUADS() -> Self {
        PyRdfFormat { inner: RdfFormat::NQuads }
    }
    #[classattr]
    fn TURTLE() -> Self {
        PyRdfFormat { inner: RdfFormat::Turtle }
    }
    #[classattr]
    fn TRIG() -> Self {
        PyRdfFormat { inner: RdfFormat::TriG }
    }
    #[classattr]
    fn N3() -> Self {
        PyRdfFormat { inner: RdfFormat::N3 }
    }
    #[classattr]
    fn RDF_XML() -> Self {
        PyRdfFormat { inner: RdfFormat::RdfXml }
    }
    /// The format of a media type, or None.
    #[staticmethod]
    fn from_media_type(media_type: &str) -> Option<Self> {
        RdfFormat::from_media_type(media_type).map(|inner| PyRdfFormat { inner })
    }
    /// The format of a file extension, or None.
    #[staticmethod]
    fn from_extension(extension: &str) -> Option<Self> {
        RdfFormat::from_extension(extension).map(|inner| PyRdfFormat { inner })
    }
    #[getter]
    fn media_type(&self) -> &'static str {
        self.inner.media_type()
    }
    #[getter]
    fn file_extension(&self) -> &'static str {
        self.inner.file_extension()
    }
    #[getter]
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn __str__(&self) -> &'static str {
        self.inner.name()
    }
    fn __repr__(&self) -> String {
        format!("<RdfFormat {}>", self.inner.name())
    }
}

/// A SPARQL results syntax, as pyoxigraph's `QueryResultsFormat`.
#[pyclass(module = "solidgraph._native", name = "QueryResultsFormat", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyQueryResultsFormat {
    inner: QueryResultsFormat,
}

#[pymethods]
#[allow(non_snake_case)]
impl PyQueryResultsFormat {
    #[classattr]
    fn JSON() -> Self {
        PyQueryResultsFormat { inner: QueryResultsFormat::Json }
    }
    #[classattr]
    fn XML() -> Self {
        PyQueryResultsFormat { inner: QueryResultsFormat::Xml }
    }
    #[classattr]
    fn CSV() -> Self {
        PyQueryResultsFormat { inner: QueryResultsFormat::Csv }
    }
    #[classattr]
    fn TSV() -> Self {
        PyQueryResultsFormat { inner: QueryResultsFormat::Tsv }
    }
    #[staticmethod]
    fn from_media_type(media_type: &str) -> Option<Self> {
        QueryResultsFormat::from_media_type(media_type).map(|inner| PyQueryResultsFormat { inner })
    }
    #[staticmethod]
    fn from_extension(extension: &str) -> Option<Self> {
        QueryResultsFormat::from_extension(extension).map(|inner| PyQueryResultsFormat { inner })
    }
    #[getter]
    fn media_type(&self) -> &'static str {
        self.inner.media_type()
    }
    #[getter]
    fn file_extension(&self) -> &'static str {
        self.inner.file_extension()
    }
    #[getter]
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn __str__(&self) -> &'static str {
        self.inner.name()
    }
    fn __repr__(&self) -> String {
        format!("<QueryResultsFormat {}>", self.inner.name())
    }
}

/// An `RdfFormat`, or a name, extension or media type as a string.
fn rdf_format_of(o: Option<&Bound<'_, PyAny>>) -> PyResult<Option<RdfFormat>> {
    let Some(o) = o else { return Ok(None) };
    if let Ok(f) = o.downcast::<PyRdfFormat>() {
        return Ok(Some(f.get().inner));
    }
    let name: String = o.extract().map_err(|_| PyTypeError::new_err("format is an RdfFormat or a string"))?;
    solidgraph_rdf::rdf_format(&name).map(Some).map_err(err)
}

fn results_format_of(o: Option<&Bound<'_, PyAny>>) -> PyResult<QueryResultsFormat> {
    let Some(o) = o else { return Ok(QueryResultsFormat::Json) };
    if let Ok(f) = o.downcast::<PyQueryResultsFormat>() {
        return Ok(f.get().inner);
    }
    let name: String = o.extract().map_err(|_| PyTypeError::new_err("format is a QueryResultsFormat or a string"))?;
    solidgraph_rdf::results_format(&name).map_err(err)
}

// ------------------------------------------------------------------ store

/// An RDF store on SSD pages, as pyoxigraph's `Store`; `path` is its
/// directory, created on first write (an empty store) or by `bulk_load`.
#[pyclass(module = "solidgraph._native", name = "RdfStore", frozen)]
pub struct PyRdfStore {
    path: PathBuf,
    read_only: bool,
    cache_bytes: u64,
    /// None until the store exists on disk (a new path before its first load).
    inner: Mutex<Option<RdfStore>>,
}

fn exists_as_store(path: &Path) -> bool {
    path.read_dir().map(|mut d| d.next().is_some()).unwrap_or(false)
}

impl PyRdfStore {
    fn open_options(&self, create: bool) -> OpenOptions {
        OpenOptions { writable: !self.read_only, create, cache_bytes: self.cache_bytes, ..OpenOptions::default() }
    }

    /// The open store, made (empty) first if nothing is at the path yet.
    fn store(&self, py: Python<'_>) -> PyResult<RdfStore> {
        let mut g = self.inner.lock().map_err(|_| PyValueError::new_err("store lock poisoned"))?;
        if let Some(s) = g.as_ref() {
            return Ok(s.clone());
        }
        let o = self.open_options(!self.read_only);
        let path = self.path.clone();
        if path.is_dir() && !exists_as_store(&path) {
            // An empty directory (say, from tempfile.mkdtemp) is a new store's place.
            std::fs::remove_dir(&path).map_err(|e| err(RdfError::Io { path: path.clone(), source: e }))?;
        }
        let s = py.allow_threads(|| RdfStore::open(&path, &o)).map_err(err)?;
        *g = Some(s.clone());
        Ok(s)
    }
}

fn load_options(format: Option<RdfFormat>, base_iri: Option<String>, to_graph: Option<&Bound<'_, PyAny>>, lenient: bool) -> PyResult<LoadOptions> {
    let to_graph = match to_graph.map(graph_of).transpose()? {
        None | Some(GraphName::DefaultGraph) => None,
        Some(GraphName::NamedNode(n)) => Some(n.into()),
        Some(GraphName::BlankNode(b)) => Some(b.into()),
    };
    Ok(LoadOptions { format, base_iri, lenient, to_graph, ..LoadOptions::default() })
}

/// A temporary copy of `input` (bytes, str or a binary/text file object)
/// for the loader, which reads files; removed on drop.
struct Spooled(PathBuf);

impl Drop for Spooled {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn spool(input: &Bound<'_, PyAny>, format: Option<RdfFormat>) -> PyResult<Spooled> {
    let data: Vec<u8> = if let Ok(s) = input.downcast::<PyString>() {
        s.to_cow()?.as_bytes().to_vec()
    } else if let Ok(b) = input.downcast::<PyBytes>() {
        b.as_bytes().to_vec()
    } else if input.hasattr("read")? {
        let x = input.call_method0("read")?;
        match x.downcast::<PyString>() {
            Ok(s) => s.to_cow()?.as_bytes().to_vec(),
            Err(_) => x.extract()?,
        }
    } else {
        return Err(PyTypeError::new_err("input is bytes, str or a file object"));
    };
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let ext = format.map(|f| f.file_extension()).unwrap_or("nt");
    let path = std::env::temp_dir().join(format!("solidgraph-rdf-{}-{n}.{ext}", std::process::id()));
    std::fs::write(&path, data).map_err(|e| err(RdfError::Io { path: path.clone(), source: e }))?;
    Ok(Spooled(path))
}

fn query_options(base_iri: Option<String>, union: bool, timeout: Option<f64>, result_limit: Option<u64>) -> PyResult<QueryOptions> {
    let timeout = match timeout {
        Some(t) if !(t > 0.0 && t.is_finite()) => return Err(PyValueError::new_err("timeout is a positive number of seconds")),
        t => t.map(Duration::from_secs_f64),
    };
    Ok(QueryOptions { base_iri, timeout, result_limit, default_graph_as_union: union })
}

#[pymethods]
impl PyRdfStore {
    /// Opens the RDF store at `path` (writable unless `read_only`); a path with
    /// nothing there becomes a new store on its first load or update.
    /// `cache_bytes` bounds the page cache of the quad pages.
    #[new]
    #[pyo3(signature = (path, *, read_only=false, cache_bytes=268435456))]
    fn new(py: Python<'_>, path: PathBuf, read_only: bool, cache_bytes: u64) -> PyResult<Self> {
        let s = PyRdfStore { path, read_only, cache_bytes, inner: Mutex::new(None) };
        if exists_as_store(&s.path) || read_only {
            s.store(py)?;
        }
        Ok(s)
    }

    /// The store's directory.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Loads RDF into the store. Into a new store (nothing at its path yet),
    /// this is the external-memory bulk loader, which leaves nothing behind
    /// on failure; into an existing store, it is `load`: one durable update.
    /// Give `path` (a file) or `input` (bytes, str or a file object).
    /// `memory_budget` (bytes) bounds the bulk loader's term map, sort
    /// buffers and import.
    #[pyo3(signature = (input=None, format=None, *, path=None, base_iri=None, to_graph=None, lenient=false, memory_budget=None))]
    #[allow(clippy::too_many_arguments)]
    fn bulk_load(
        &self,
        py: Python<'_>,
        input: Option<&Bound<'_, PyAny>>,
        format: Option<&Bound<'_, PyAny>>,
        path: Option<PathBuf>,
        base_iri: Option<String>,
        to_graph: Option<&Bound<'_, PyAny>>,
        lenient: bool,
        memory_budget: Option<u64>,
    ) -> PyResult<()> {
        let fmt = rdf_format_of(format)?;
        let mut o = load_options(fmt, base_iri, to_graph, lenient)?;
        if let Some(b) = memory_budget {
            o.memory_budget = b;
        }
        let (file, _spooled) = source(input, path, fmt)?;
        let mut g = self.inner.lock().map_err(|_| PyValueError::new_err("store lock poisoned"))?;
        if g.is_none() && !exists_as_store(&self.path) && !self.read_only {
            let dir = self.path.clone();
            if dir.is_dir() {
                std::fs::remove_dir(&dir).map_err(|e| err(RdfError::Io { path: dir.clone(), source: e }))?;
            }
            py.allow_threads(|| RdfStore::bulk_load(&dir, std::slice::from_ref(&file), &o)).map_err(err)?;
            let oo = self.open_options(false);
            *g = Some(py.allow_threads(|| RdfStore::open(&dir, &oo)).map_err(err)?);
            return Ok(());
        }
        drop(g);
        let s = self.store(py)?;
        py.allow_threads(|| s.load(std::slice::from_ref(&file), &o)).map_err(err)?;
        Ok(())
    }

    /// Adds a file's (or `input`'s) quads as one durable update.
    #[pyo3(signature = (input=None, format=None, *, path=None, base_iri=None, to_graph=None, lenient=false))]
    #[allow(clippy::too_many_arguments)]
    fn load(
        &self,
        py: Python<'_>,
        input: Option<&Bound<'_, PyAny>>,
        format: Option<&Bound<'_, PyAny>>,
        path: Option<PathBuf>,
        base_iri: Option<String>,
        to_graph: Option<&Bound<'_, PyAny>>,
        lenient: bool,
    ) -> PyResult<()> {
        let fmt = rdf_format_of(format)?;
        let o = load_options(fmt, base_iri, to_graph, lenient)?;
        let (file, _spooled) = source(input, path, fmt)?;
        let s = self.store(py)?;
        py.allow_threads(|| s.load(std::slice::from_ref(&file), &o)).map_err(err)?;
        Ok(())
    }

    /// Runs a SPARQL query (GIL released). Returns `QuerySolutions` (SELECT),
    /// `QueryBoolean` (ASK) or `QueryTriples` (CONSTRUCT, DESCRIBE), streamed.
    #[pyo3(signature = (query, *, base_iri=None, use_default_graph_as_union=false, timeout=None, result_limit=None))]
    fn query<'py>(
        &self,
        py: Python<'py>,
        query: &str,
        base_iri: Option<String>,
        use_default_graph_as_union: bool,
        timeout: Option<f64>,
        result_limit: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let o = query_options(base_iri, use_default_graph_as_union, timeout, result_limit)?;
        let s = self.store(py)?;
        let out = py.allow_threads(|| SameThread(s.query(query, &o))).0.map_err(err)?;
        match out {
            QueryOutput::Solutions { variables, rows } => {
                QuerySolutions { variables: variables.into(), rows: Some(rows), buf: VecDeque::new() }.into_bound_py_any(py)
            }
            QueryOutput::Boolean(b) => QueryBoolean { value: b }.into_bound_py_any(py),
            QueryOutput::Triples(rows) => QueryTriples { rows: Some(rows), buf: VecDeque::new() }.into_bound_py_any(py),
        }
    }

    /// Runs a SPARQL update; durable when it returns; a failing update changes nothing.
    #[pyo3(signature = (update, *, base_iri=None))]
    fn update(&self, py: Python<'_>, update: &str, base_iri: Option<String>) -> PyResult<()> {
        let o = query_options(base_iri, false, None, None)?;
        let s = self.store(py)?;
        py.allow_threads(|| s.update(update, &o)).map_err(err)?;
        Ok(())
    }

    /// The quads matching a pattern; None matches anything (for the graph:
    /// every graph, the default graph included).
    #[pyo3(signature = (subject, predicate, object, graph_name=None))]
    fn quads_for_pattern(
        &self,
        py: Python<'_>,
        subject: Option<&Bound<'_, PyAny>>,
        predicate: Option<&Bound<'_, PyAny>>,
        object: Option<&Bound<'_, PyAny>>,
        graph_name: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<QuadIter> {
        let s = subject.map(|x| subject_of(x).map(Term::from)).transpose()?;
        let p = predicate.map(term_of).transpose()?;
        let o = object.map(term_of).transpose()?;
        let g = graph_name.map(graph_of).transpose()?;
        let store = self.store(py)?;
        let quads = py.allow_threads(|| store.quads_for_pattern(s.as_ref(), p.as_ref(), o.as_ref(), g.as_ref())).map_err(err)?;
        Ok(QuadIter { quads: quads.into_iter() })
    }

    /// Adds one quad (durable when it returns).
    fn add(&self, py: Python<'_>, quad: PyRef<'_, PyQuad>) -> PyResult<()> {
        let s = self.store(py)?;
        let q = [quad.inner.clone()];
        py.allow_threads(|| s.insert(&q)).map_err(err)?;
        Ok(())
    }

    /// Adds quads as one durable update.
    fn extend(&self, py: Python<'_>, quads: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut qs = Vec::new();
        for q in quads.try_iter()? {
            qs.push(q?.downcast::<PyQuad>()?.get().inner.clone());
        }
        let s = self.store(py)?;
        py.allow_threads(|| s.insert(&qs)).map_err(err)?;
        Ok(())
    }

    /// Removes one quad (durable when it returns).
    fn remove(&self, py: Python<'_>, quad: PyRef<'_, PyQuad>) -> PyResult<()> {
        let s = self.store(py)?;
        let q = [quad.inner.clone()];
        py.allow_threads(|| s.remove(&q)).map_err(err)?;
        Ok(())
    }

    /// Updates are durable when they return; kept for pyoxigraph's API.
    fn flush(&self) {}

    /// Folds pending updates into pages (`compact`).
    fn optimize(&self, py: Python<'_>) -> PyResult<()> {
        let s = self.store(py)?;
        py.allow_threads(|| s.compact()).map_err(err)
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let s = self.store(py)?;
        Ok(py.allow_threads(|| s.info()).map_err(err)?.quads as usize)
    }

    fn __contains__(&self, py: Python<'_>, quad: PyRef<'_, PyQuad>) -> PyResult<bool> {
        let q = &quad.inner;
        let (s, p, o) = (Term::from(q.subject.clone()), Term::from(q.predicate.clone()), q.object.clone());
        let store = self.store(py)?;
        let found = py.allow_threads(|| store.quads_for_pattern(Some(&s), Some(&p), Some(&o), Some(&q.graph_name))).map_err(err)?;
        Ok(!found.is_empty())
    }

    fn __repr__(&self) -> String {
        format!("<RdfStore {}>", self.path.display())
    }
}

/// The file to load: `path`, or `input` spooled to a temporary file.
fn source(input: Option<&Bound<'_, PyAny>>, path: Option<PathBuf>, fmt: Option<RdfFormat>) -> PyResult<(PathBuf, Option<Spooled>)> {
    match (input, path) {
        (Some(_), Some(_)) => Err(PyValueError::new_err("give input or path, not both")),
        (None, None) => Err(PyValueError::new_err("give input (data) or path (a file)")),
        (None, Some(p)) => Ok((p, None)),
        (Some(i), None) => {
            if fmt.is_none() {
                return Err(PyValueError::new_err("format is needed with input"));
            }
            let s = spool(i, fmt)?;
            Ok((s.0.clone(), Some(s)))
        }
    }
}

// ---------------------------------------------------------------- results

/// One SELECT row, as pyoxigraph's `QuerySolution`: `solution["s"]`,
/// `solution[0]` or `solution[Variable("s")]`; None where unbound.
#[pyclass(module = "solidgraph._native", name = "QuerySolution", frozen)]
pub struct QuerySolution {
    variables: Arc<[Variable]>,
    values: Vec<Option<Term>>,
}

#[pymethods]
impl QuerySolution {
    fn __getitem__<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let i = if let Ok(i) = key.extract::<usize>() {
            if i >= self.values.len() {
                return Err(PyIndexError::new_err(format!("index {i} past the solution's {} values", self.values.len())));
            }
            i
        } else {
            let name = match key.downcast::<PyVariable>() {
                Ok(v) => v.get().inner.as_str().to_owned(),
                Err(_) => key.extract::<String>().map_err(|_| PyTypeError::new_err("a key is an int, a str or a Variable"))?,
            };
            let name = name.strip_prefix('?').unwrap_or(&name).to_owned();
            self.variables.iter().position(|v| v.as_str() == name).ok_or_else(|| PyKeyError::new_err(name))?
        };
        match &self.values[i] {
            Some(t) => term_to_py(py, t),
            None => Ok(py.None().into_bound(py)),
        }
    }
    fn __len__(&self) -> usize {
        self.values.len()
    }
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let vals = self.values.iter().map(|t| match t {
            Some(t) => term_to_py(py, t),
            None => Ok(py.None().into_bound(py)),
        });
        PyTuple::new(py, vals.collect::<PyResult<Vec<_>>>()?)?.try_iter().map(Bound::into_any)
    }
    fn __repr__(&self) -> String {
        let parts: Vec<String> = self.variables.iter().zip(&self.values).filter_map(|(v, t)| Some(format!("{v}={}", t.as_ref()?))).collect();
        format!("<QuerySolution {}>", parts.join(" "))
    }
}

/// A SELECT's rows, streamed; `variables` are the projected variables.
#[pyclass(module = "solidgraph._native", name = "QuerySolutions", unsendable)]
pub struct QuerySolutions {
    variables: Arc<[Variable]>,
    rows: Option<SolutionRows>,
    buf: VecDeque<Vec<Option<Term>>>,
}

/// Pulls up to `BATCH` items from `rows` with the GIL released.
fn pull<T>(py: Python<'_>, rows: &mut Option<Box<dyn Iterator<Item = solidgraph_rdf::Result<T>>>>, buf: &mut VecDeque<T>) -> PyResult<()> {
    let Some(it) = rows.as_mut() else { return Ok(()) };
    let it = SameThread(it);
    let (got, end) = py
        .allow_threads(move || {
            let it = it;
            let mut got = Vec::with_capacity(BATCH);
            let mut end = false;
            while got.len() < BATCH {
                match it.0.next() {
                    Some(Ok(x)) => got.push(x),
                    Some(Err(e)) => return SameThread(Err(e)),
                    None => {
                        end = true;
                        break;
                    }
                }
            }
            SameThread(Ok((got, end)))
        })
        .0
        .map_err(err)?;
    buf.extend(got);
    if end {
        *rows = None;
    }
    Ok(())
}

#[pymethods]
impl QuerySolutions {
    /// The projected variables.
    #[getter]
    fn variables(&self) -> Vec<PyVariable> {
        self.variables.iter().map(|v| PyVariable { inner: v.clone() }).collect()
    }
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }
    fn __next__(&mut self, py: Python<'_>) -> PyResult<QuerySolution> {
        if self.buf.is_empty() {
            pull(py, &mut self.rows, &mut self.buf)?;
        }
        match self.buf.pop_front() {
            Some(values) => Ok(QuerySolution { variables: self.variables.clone(), values }),
            None => Err(PyStopIteration::new_err(())),
        }
    }
    /// Writes the remaining rows in `format` (a QueryResultsFormat or a name;
    /// JSON by default) to `output` (a path or a binary file object), or
    /// returns them as bytes when `output` is None.
    #[pyo3(signature = (output=None, format=None))]
    fn serialize<'py>(
        &mut self,
        py: Python<'py>,
        output: Option<&Bound<'py, PyAny>>,
        format: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let f = results_format_of(format)?;
        let buffered: Vec<_> = self.buf.drain(..).map(Ok).collect();
        let rows: SolutionRows = match self.rows.take() {
            Some(r) => Box::new(buffered.into_iter().chain(r)),
            None => Box::new(buffered.into_iter()),
        };
        let vars = self.variables.clone();
        write_out(py, output, SameThread(rows), move |w, rows| solidgraph_rdf::write_solutions(w, f, &vars, rows.0).map(|_| ()))
    }
}

/// Writes with `write` into `output` (a path or a file object) or returns bytes; the GIL released while writing.
fn write_out<'py, R>(
    py: Python<'py>,
    output: Option<&Bound<'py, PyAny>>,
    rows: SameThread<R>,
    write: impl FnOnce(&mut dyn std::io::Write, SameThread<R>) -> solidgraph_rdf::Result<()> + Send,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    if let Some(out) = output
        && let Ok(p) = out.extract::<PathBuf>()
    {
        let res = py.allow_threads(move || {
            let f = std::fs::File::create(&p).map_err(|e| RdfError::Io { path: p.clone(), source: e })?;
            let mut w = std::io::BufWriter::new(f);
            write(&mut w, rows)?;
            std::io::Write::flush(&mut w).map_err(|e| RdfError::Io { path: p.clone(), source: e })
        });
        res.map_err(err)?;
        return Ok(None);
    }
    let buf = py
        .allow_threads(move || {
            let mut buf = Vec::new();
            write(&mut buf, rows).map(|_| buf)
        })
        .map_err(err)?;
    match output {
        Some(out) => {
            out.call_method1("write", (PyBytes::new(py, &buf),))?;
            Ok(None)
        }
        None => Ok(Some(PyBytes::new(py, &buf))),
    }
}

/// An ASK's answer, as pyoxigraph's `QueryBoolean`: `bool(result)`.
#[pyclass(module = "solidgraph._native", name = "QueryBoolean", frozen)]
pub struct QueryBoolean {
    value: bool,
}

#[pymethods]
impl QueryBoolean {
    fn __bool__(&self) -> bool {
        self.value
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.extract::<bool>().map(|b| b == self.value).unwrap_or(false)
    }
    fn __hash__(&self) -> u64 {
        self.value as u64
    }
    fn __repr__(&self) -> String {
        format!("<QueryBoolean {}>", self.value)
    }
    /// Writes the answer in `format` (JSON by default) to `output`, or returns bytes.
    #[pyo3(signature = (output=None, format=None))]
    fn serialize<'py>(&self, py: Python<'py>, output: Option<&Bound<'py, PyAny>>, format: Option<&Bound<'py, PyAny>>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let f = results_format_of(format)?;
        let v = self.value;
        write_out(py, output, SameThread(()), move |w, _| solidgraph_rdf::write_boolean(w, f, v))
    }
}

/// A CONSTRUCT's or DESCRIBE's triples, streamed.
#[pyclass(module = "solidgraph._native", name = "QueryTriples", unsendable)]
pub struct QueryTriples {
    rows: Option<TripleRows>,
    buf: VecDeque<Triple>,
}

#[pymethods]
impl QueryTriples {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }
    fn __next__(&mut self, py: Python<'_>) -> PyResult<PyTriple> {
        if self.buf.is_empty() {
            pull(py, &mut self.rows, &mut self.buf)?;
        }
        match self.buf.pop_front() {
            Some(inner) => Ok(PyTriple { inner }),
            None => Err(PyStopIteration::new_err(())),
        }
    }
    /// Writes the remaining triples in `format` (an RdfFormat or a name;
    /// N-Triples by default) to `output`, or returns bytes.
    #[pyo3(signature = (output=None, format=None))]
    fn serialize<'py>(
        &mut self,
        py: Python<'py>,
        output: Option<&Bound<'py, PyAny>>,
        format: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let f = rdf_format_of(format)?.unwrap_or(RdfFormat::NTriples);
        let buffered: Vec<_> = self.buf.drain(..).map(Ok).collect();
        let rows: TripleRows = match self.rows.take() {
            Some(r) => Box::new(buffered.into_iter().chain(r)),
            None => Box::new(buffered.into_iter()),
        };
        write_out(py, output, SameThread(rows), move |w, rows| solidgraph_rdf::write_triples(w, f, rows.0).map(|_| ()))
    }
}

/// The quads of `quads_for_pattern`.
#[pyclass(module = "solidgraph._native", name = "QuadIter")]
pub struct QuadIter {
    quads: std::vec::IntoIter<Quad>,
}

#[pymethods]
impl QuadIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }
    fn __next__(&mut self) -> Option<PyQuad> {
        self.quads.next().map(|inner| PyQuad { inner })
    }
}

/// Adds the RDF classes to the module.
pub fn add_to(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyNamedNode>()?;
    m.add_class::<PyBlankNode>()?;
    m.add_class::<PyLiteral>()?;
    m.add_class::<PyDefaultGraph>()?;
    m.add_class::<PyVariable>()?;
    m.add_class::<PyTriple>()?;
    m.add_class::<PyQuad>()?;
    m.add_class::<PyRdfFormat>()?;
    m.add_class::<PyQueryResultsFormat>()?;
    m.add_class::<PyRdfStore>()?;
    m.add_class::<QuerySolution>()?;
    m.add_class::<QuerySolutions>()?;
    m.add_class::<QueryBoolean>()?;
    m.add_class::<QueryTriples>()?;
    m.add_class::<QuadIter>()?;
    Ok(())
}

/// The exception classes, for `solidgraph.rdf` to export.
#[pyfunction]
pub fn rdf_error_classes(py: Python<'_>) -> PyResult<(Py<PyType>, Py<PyType>)> {
    let (a, b) = classes(py)?;
    Ok((a.clone_ref(py), b.clone_ref(py)))
}
