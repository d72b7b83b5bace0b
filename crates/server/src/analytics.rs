//! The Analytics call: a whole-graph algorithm run on a gate slot, its
//! progress streamed while it runs, its result streamed as chunked arrays.
//! The engine's progress hook is where the call is stopped: once the client
//! has gone (the reply stream is dropped) or the deadline has passed, the
//! hook refuses and the algorithm returns `Cancelled` within one read batch,
//! freeing its slot; it writes nothing either way.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use solidgraph_engine::{Cancelled, Progress, bfs, cdlp, kcore, lcc, mis, pagerank, sssp, wcc};
use solidgraph_store::Store;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status};

use crate::arrays::Out;
use crate::errors::OrStatus;
use crate::gate::Gate;
use crate::proto::analytics_reply::Reply;
use crate::proto::{AnalyticsProgress, AnalyticsReply, AnalyticsRequest};
use crate::stores::Stores;
use crate::telemetry;

pub type AnalyticsStream = ReceiverStream<Result<AnalyticsReply, Status>>;

/// Progress messages go out at most this often; the hook still checks for
/// cancellation at every report.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// Reply messages queued for a slow client before progress messages are
/// dropped (the result waits for room instead).
const QUEUE: usize = 16;

/// A parsed request: the algorithm and its arguments, with the local API's
/// defaults (`solidgraph.Graph`).
enum Algo {
    Bfs { source: u64, target: Option<u64>, parents: bool },
    Wcc,
    PageRank { damping: f64, iterations: u32, tol: Option<f64> },
    Kcore,
    Sssp { source: u64 },
    Cdlp { iterations: u32 },
    Lcc,
    Mis { seed: u64 },
}

fn vertex(v: i64, what: &str) -> Result<u64, Status> {
    u64::try_from(v).map_err(|_| Status::invalid_argument(format!("{what} {v} is not a vertex id (ids are >= 0)")))
}

impl Algo {
    fn parse(r: &AnalyticsRequest) -> Result<(Algo, &'static str), Status> {
        Ok(match r.algorithm.as_str() {
            "bfs" => (
                Algo::Bfs { source: vertex(r.source, "source")?, target: r.target.map(|t| vertex(t, "target")).transpose()?, parents: r.parents },
                "Analytics/bfs",
            ),
            "wcc" => (Algo::Wcc, "Analytics/wcc"),
            "pagerank" => (Algo::PageRank { damping: r.damping.unwrap_or(0.85), iterations: r.iterations.unwrap_or(20), tol: r.tol }, "Analytics/pagerank"),
            "kcore" => (Algo::Kcore, "Analytics/kcore"),
            "sssp" => (Algo::Sssp { source: vertex(r.source, "source")? }, "Analytics/sssp"),
            "cdlp" => (Algo::Cdlp { iterations: r.iterations.unwrap_or(10) }, "Analytics/cdlp"),
            "lcc" => (Algo::Lcc, "Analytics/lcc"),
            "mis" => (Algo::Mis { seed: r.seed }, "Analytics/mis"),
            a => return Err(Status::invalid_argument(format!("unknown algorithm {a:?}: one of bfs, wcc, pagerank, kcore, sssp, cdlp, lcc, mis"))),
        })
    }

    fn run(&self, s: &Store, progress: Progress) -> Result<Out, Status> {
        let mut out = Out::default();
        match *self {
            Algo::Bfs { source, target, parents } => {
                let r = bfs::bfs(s, source, target, parents, progress).or_status()?;
                out.int64_signed("levels", &r.levels);
                if let Some(p) = &r.parents {
                    out.int64_signed("parents", p);
                }
            }
            Algo::Wcc => out.int64("labels", &wcc::wcc(s, progress).or_status()?),
            Algo::PageRank { damping, iterations, tol } => out.float64("ranks", &pagerank::pagerank(s, damping, iterations, tol, progress).or_status()?.ranks),
            Algo::Kcore => out.uint32("core", &kcore::kcore(s, progress).or_status()?),
            Algo::Sssp { source } => out.float64("dist", &sssp::sssp(s, source, progress).or_status()?),
            Algo::Cdlp { iterations } => out.int64("labels", &cdlp::cdlp(s, iterations, progress).or_status()?),
            Algo::Lcc => out.float64("lcc", &lcc::lcc(s, progress).or_status()?),
            Algo::Mis { seed } => out.bools("in_set", &mis::mis(s, seed, progress).or_status()?),
        }
        Ok(out)
    }
}

/// The client's deadline (`grpc-timeout`: digits and a unit, H M S m u n),
/// capped by the server's own limit.
pub fn deadline<T>(req: &Request<T>, limit: Duration) -> Duration {
    let given = req.metadata().get("grpc-timeout").and_then(|v| v.to_str().ok()).and_then(parse_timeout);
    given.map_or(limit, |d| d.min(limit))
}

fn parse_timeout(s: &str) -> Option<Duration> {
    // The spec allows at most 8 digits.
    if s.len() < 2 || s.len() > 9 {
        return None;
    }
    let (n, unit) = s.split_at(s.len() - 1);
    let n: u64 = n.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

pub async fn analytics(stores: &Stores, gate: Arc<Gate>, req: Request<AnalyticsRequest>) -> Result<Response<AnalyticsStream>, Status> {
    let ends = Instant::now() + deadline(&req, gate.limits.deadline);
    let r = req.into_inner();
    let (algo, method) = Algo::parse(&r)?;
    let store = stores.get(&r.store)?.store.clone();
    let (tx, rx) = mpsc::channel(QUEUE);
    tokio::spawn(async move {
        let chunk = gate.limits.chunk_bytes;
        let hook_tx = tx.clone();
        let res = gate
            .run(method, move || {
                let last: Mutex<Option<Instant>> = Mutex::new(None);
                let hook = |phase: &str, done: u64, total: u64| -> Result<(), Cancelled> {
                    if hook_tx.is_closed() || Instant::now() >= ends {
                        return Err(Cancelled);
                    }
                    let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
                    if last.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY) {
                        *last = Some(Instant::now());
                        let p = AnalyticsProgress { phase: phase.to_string(), done, total };
                        // A full queue (a slow reader) skips this report.
                        let _ = hook_tx.try_send(Ok(AnalyticsReply { reply: Some(Reply::Progress(p)) }));
                    }
                    Ok(())
                };
                algo.run(&store, &hook)
            })
            .await;
        match res {
            Ok(out) => {
                telemetry::response_bytes(method, out.bytes());
                for m in out.into_messages(chunk) {
                    if tx.send(Ok(AnalyticsReply { reply: Some(Reply::Result(m)) })).await.is_err() {
                        break;
                    }
                }
            }
            Err(s) => {
                let s = if s.code() == Code::Cancelled && Instant::now() >= ends {
                    Status::deadline_exceeded("the call's deadline passed; its work was stopped")
                } else {
                    s
                };
                let _ = tx.send(Err(s)).await;
            }
        }
    });
    Ok(Response::new(ReceiverStream::new(rx)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse() {
        assert_eq!(parse_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_timeout("3S"), Some(Duration::from_secs(3)));
        assert_eq!(parse_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_timeout("99999999n"), Some(Duration::from_nanos(99_999_999)));
        assert_eq!(parse_timeout("5"), None);
        assert_eq!(parse_timeout("5x"), None);
        assert_eq!(parse_timeout("123456789S"), None);
    }
}
