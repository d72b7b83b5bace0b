//! `progress=` arguments: False, True (lines on sys.stderr), or a callable
//! taking (phase, done, total). The engine reports from threads without the
//! GIL; the reporter takes the GIL only for the call, at most ~10 times a
//! second per phase (a phase's first and last step always get through).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use solidgraph_io::sync::MutexExt;

use crate::errors::invalid;

/// `progress=`: a flag, or a callable taking (phase, done, total).
#[derive(FromPyObject)]
pub enum ProgressArg<'py> {
    Flag(bool),
    Call(Bound<'py, PyAny>),
}

impl Default for ProgressArg<'_> {
    fn default() -> Self {
        ProgressArg::Flag(false)
    }
}

enum Sink {
    Stderr(PyObject),
    Call(PyObject),
}

/// Where progress goes: `progress=True` writes "solidgraph {what}: {phase}
/// {done}/{total}" lines to sys.stderr (so notebooks show them too), a
/// callable gets (phase, done, total). A failing callback must not abort the
/// work, so its error is reported as unraisable, not raised.
pub struct Reporter {
    sink: Option<Sink>,
    what: &'static str,
    /// Phase, count and time of the last report.
    last: Mutex<Option<(String, u64, Instant)>>,
}

const EVERY: Duration = Duration::from_millis(100);

impl Reporter {
    pub fn new(py: Python<'_>, what: &'static str, progress: ProgressArg<'_>) -> PyResult<Reporter> {
        let sink = match progress {
            ProgressArg::Flag(false) => None,
            ProgressArg::Flag(true) => Some(Sink::Stderr(py.import("sys")?.getattr("stderr")?.getattr("write")?.unbind())),
            ProgressArg::Call(f) if f.is_callable() => Some(Sink::Call(f.unbind())),
            ProgressArg::Call(_) => return Err(invalid("progress must be a bool or a callable taking (phase, done, total)")),
        };
        Ok(Reporter { sink, what, last: Mutex::new(None) })
    }

    /// `report` as an engine progress hook: the local engine runs to the
    /// end (Python has no cancel for it), so it never stops the work.
    pub fn hook(&self, phase: &str, done: u64, total: u64) -> Result<(), solidgraph_engine::Cancelled> {
        self.report(phase, done, total);
        Ok(())
    }

    pub fn report(&self, phase: &str, done: u64, total: u64) {
        let Some(sink) = &self.sink else { return };
        {
            let mut last = self.last.locked();
            let now = Instant::now();
            let due = match &*last {
                None => true,
                Some((p, d, t)) => p != phase || (*d != done && (done >= total || now.duration_since(*t) >= EVERY)),
            };
            if !due {
                return;
            }
            *last = Some((phase.to_string(), done, now));
        }
        Python::with_gil(|py| {
            let r = match sink {
                Sink::Stderr(write) => write.call1(py, (format!("solidgraph {}: {phase} {done}/{total}\n", self.what),)),
                Sink::Call(f) => f.call1(py, (phase, done, total)),
            };
            if let Err(e) = r {
                e.write_unraisable(py, None);
            }
        });
    }
}
