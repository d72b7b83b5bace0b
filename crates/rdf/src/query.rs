//! SPARQL queries: parsed by spargebra, run by spareval over a
//! [`QueryData`], rows mapped to the public [`QueryOutput`] with the
//! timeout and result limit applied.

use std::collections::VecDeque;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::mpsc;
use std::time::Duration;

use spareval::{CancellationToken, QueryEvaluationError, QueryEvaluator, QueryResults};
use spargebra::SparqlParser;

use crate::dataset::Decoder;
use crate::dataset::QueryData;
use crate::error::{RdfError, Result};
use crate::path;
use crate::{QueryOptions, QueryOutput, SolutionRows};

/// Rows decoded per batched dictionary call.
const DECODE_ROWS: usize = 1024;

/// A SELECT's rows with their terms decoded [`DECODE_ROWS`] rows at a time.
struct Batched {
    rows: SolutionRows,
    decoder: Decoder,
    ready: VecDeque<Result<Vec<Option<oxrdf::Term>>>>,
    failed: bool,
}

impl Iterator for Batched {
    type Item = Result<Vec<Option<oxrdf::Term>>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.ready.is_empty() && !self.failed {
            let mut batch = Vec::new();
            let mut error = None;
            for r in self.rows.by_ref() {
                match r {
                    Ok(row) => batch.push(row),
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                }
                if batch.len() == DECODE_ROWS {
                    break;
                }
            }
            // An error ends the rows: what came before it is still returned.
            self.failed = error.is_some();
            match self.decoder.decode_rows(&mut batch) {
                Ok(()) => self.ready.extend(batch.into_iter().map(Ok)),
                Err(e) => {
                    self.failed = true;
                    error = Some(e);
                }
            }
            self.ready.extend(error.map(Err));
        }
        self.ready.pop_front()
    }
}

/// Parses `sparql` as a query, with `base` for relative IRIs.
pub fn parse(sparql: &str, base: Option<&str>) -> Result<spargebra::Query> {
    let mut p = SparqlParser::new();
    if let Some(b) = base {
        p = p.with_base_iri(b).map_err(|e| RdfError::Invalid(format!("bad base IRI {b:?}: {e}")))?;
    }
    p.parse_query(sparql).map_err(|e| RdfError::QuerySyntax(e.to_string()))
}

/// Cancels a token when a deadline passes, unless dropped first.
pub struct Deadline {
    _stop: Option<mpsc::Sender<()>>,
    pub limit: Option<Duration>,
}

impl Deadline {
    pub fn start(timeout: Option<Duration>, token: &CancellationToken) -> Deadline {
        let stop = timeout.map(|t| {
            let (tx, rx) = mpsc::channel::<()>();
            let token = token.clone();
            std::thread::spawn(move || {
                // Disconnected (the query ended) or a timeout: only a timeout cancels.
                if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(t) {
                    token.cancel();
                }
            });
            tx
        });
        Deadline { _stop: stop, limit: timeout }
    }

    pub fn error(&self, e: QueryEvaluationError) -> RdfError {
        eval_error(e, self.limit)
    }
}

pub fn eval_error(e: QueryEvaluationError, limit: Option<Duration>) -> RdfError {
    match e {
        QueryEvaluationError::Cancelled => RdfError::Timeout(limit.unwrap_or_default()),
        QueryEvaluationError::Dataset(d) => match d.downcast::<RdfError>() {
            Ok(r) => *r,
            Err(d) => RdfError::Evaluation(d.to_string()),
        },
        QueryEvaluationError::Service(s) => RdfError::Unsupported(format!("SERVICE: {s}")),
        QueryEvaluationError::UnsupportedService(s) => RdfError::Unsupported(format!("SERVICE {s}: federation is not supported")),
        e => RdfError::Evaluation(e.to_string()),
    }
}

/// Runs `query` on `data`. Over the store's own default graph, property
/// paths run on our batched operator (`path.rs`): they are rewritten into
/// triple patterns the dataset answers. A FROM clause or the union default
/// graph leaves them to spareval (a path there may cross graphs).
pub fn run(query: &spargebra::Query, mut data: QueryData, o: &QueryOptions) -> Result<QueryOutput> {
    let token = CancellationToken::new();
    let deadline = Deadline::start(o.timeout, &token);
    data.set_cancel(token.clone(), o.timeout);
    data.set_union_default_graph(o.default_graph_as_union && query.dataset().is_none());
    let mut query = query.clone();
    if !o.default_graph_as_union && query.dataset().is_none() {
        let prefix = format!("urn:x-solidgraph-path:{:016x}:", RandomState::new().build_hasher().finish());
        let paths = path::rewrite(&mut query, &prefix);
        data.set_paths(&prefix, &paths)?;
    }
    // A SERVICE name is externalized by spareval for its own use: no
    // placeholders then.
    let decoder = (matches!(query, spargebra::Query::Select { .. }) && !query.to_string().contains("SERVICE")).then(|| {
        let prefix = format!("urn:x-solidgraph-id:{:016x}:", RandomState::new().build_hasher().finish());
        data.defer_terms(&prefix)
    });
    let query = &query;
    let evaluator = QueryEvaluator::new().with_cancellation_token(token);
    let mut prepared = evaluator.prepare(query);
    if o.default_graph_as_union && query.dataset().is_none() {
        prepared.dataset_mut().set_default_graph_as_union();
    }
    let results = prepared.execute(data).map_err(|e| deadline.error(e))?;
    let limit = o.result_limit.unwrap_or(u64::MAX);
    Ok(match results {
        QueryResults::Boolean(b) => QueryOutput::Boolean(b),
        QueryResults::Solutions(iter) => {
            let variables = iter.variables().to_vec();
            let mut n = 0u64;
            let rows = iter.map(move |r| {
                let sol = r.map_err(|e| deadline.error(e))?;
                n += 1;
                if n > limit {
                    return Err(RdfError::ResultLimit(limit));
                }
                Ok(sol.values().to_vec())
            });
            let rows: SolutionRows = match decoder {
                Some(decoder) => Box::new(Batched { rows: Box::new(rows), decoder, ready: VecDeque::new(), failed: false }),
                None => Box::new(rows),
            };
            QueryOutput::Solutions { variables, rows }
        }
        QueryResults::Graph(iter) => {
            let mut n = 0u64;
            let rows = iter.map(move |r| {
                let t = r.map_err(|e| deadline.error(e))?;
                n += 1;
                if n > limit {
                    return Err(RdfError::ResultLimit(limit));
                }
                Ok(t)
            });
            QueryOutput::Triples(Box::new(rows))
        }
    })
}
