//! Near-data operators over a store: every operator takes a whole batch or a
//! whole frontier and hands the store one read for it.
//!
//! Analytics follow the LDBC Graphalytics definitions (BFS, WCC, PageRank,
//! SSSP, CDLP, LCC) plus GraphSSD's and Falcon's (MIS, k-core, walks).
//!
//! Every public operator takes and returns the user's vertex ids: it maps
//! its inputs with `Store::to_internal` on entry, works in the store's ids
//! (which an import may have renumbered by degree, `store::order`), and maps
//! ids in its results and reindexes per-vertex arrays on the way out.

pub mod bfs;
pub mod cdlp;
mod error;
pub mod frontier;
pub mod infer_hood;
pub mod kcore;
pub mod lcc;
pub mod loader;
pub mod mis;
pub mod pagerank;
pub mod sampler;
pub mod sssp;
pub mod state;
pub mod walks;
pub mod wcc;

pub use error::{Cancelled, EngineError, Progress, Result, silent};

/// The most rounds an iterative algorithm (PageRank, CDLP) runs: every pass
/// reads the whole graph, so a count past this is a mistake, not a request
/// (a u32 of rounds on a small graph is hours of work with no way out).
pub const MAX_ITERATIONS: u32 = 10_000;

/// Refuses a round count above [`MAX_ITERATIONS`].
pub(crate) fn check_iterations(iterations: u32) -> Result<()> {
    if iterations > MAX_ITERATIONS {
        return Err(EngineError::Invalid(format!("iterations {iterations} is more than the limit of {MAX_ITERATIONS}")));
    }
    Ok(())
}
