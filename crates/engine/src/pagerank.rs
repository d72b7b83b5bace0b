//! PageRank as LDBC Graphalytics defines it: every iteration one sequential
//! pass pushes each vertex's rank over its out-edges; the rank of dangling
//! vertices (no out-edges) is spread over all vertices.

use solidgraph_store::{Direction, Store};

use crate::error::{EngineError, Progress, Result};
use crate::frontier::Lists;

#[derive(Debug, Clone)]
pub struct PageRank {
    pub ranks: Vec<f64>,
    pub iterations: u32,
}

/// Runs `iterations` iterations, or stops earlier once the L1 change of an
/// iteration falls below `tol`.
pub fn pagerank(store: &Store, damping: f64, iterations: u32, tol: Option<f64>, progress: Progress) -> Result<PageRank> {
    if !(damping > 0.0 && damping < 1.0) {
        return Err(EngineError::Invalid(format!("damping {damping} must be in (0, 1)")));
    }
    if tol.is_some_and(|t| !(t > 0.0)) {
        return Err(EngineError::Invalid("tolerance must be positive".into()));
    }
    let n = store.num_nodes() as usize;
    let nf = n as f64;
    let lists = Lists::new(store, Direction::Out, false)?;
    let mut pr = vec![1.0 / nf; n];
    let mut next = vec![0.0f64; n];
    let mut done = 0;
    for it in 0..iterations {
        next.iter_mut().for_each(|x| *x = 0.0);
        let mut dangling = 0.0f64;
        lists.scan(|v, nbrs, _| {
            let r = pr[v as usize];
            if nbrs.is_empty() {
                dangling += r;
                return;
            }
            let share = r / nbrs.len() as f64;
            for &u in nbrs {
                next[u as usize] += share;
            }
        })?;
        let base = (1.0 - damping) / nf + damping * dangling / nf;
        let mut delta = 0.0;
        for (p, x) in pr.iter_mut().zip(&next) {
            let new = base + damping * x;
            delta += (new - *p).abs();
            *p = new;
        }
        done = it + 1;
        progress("pagerank", done as u64, iterations as u64);
        if tol.is_some_and(|t| delta < t) {
            break;
        }
    }
    Ok(PageRank { ranks: pr, iterations: done })
}
