//! Random walks, many at once (GraphSSD's parallel walks): every step reads
//! the lists of all distinct vertices the walks stand on in one batch, so a
//! vertex's pages are read once for every walk on it. Uniform walks, and
//! node2vec's second-order walks (return p, in-out q) by rejection sampling
//! against the previous vertex's list. Deterministic for a seed, whatever
//! the batching: each walk draws from its own generator.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use solidgraph_store::{Csr, Direction, Store};

use crate::error::{EngineError, Result};

/// Longest walk accepted: a limit on memory per call.
pub const MAX_LENGTH: usize = 1 << 16;

pub struct WalkOptions {
    pub length: usize,
    pub p: f64,
    pub q: f64,
    pub seed: u64,
    pub direction: Direction,
}

fn list<'a>(csr: &'a Csr, idx: &[u64], v: u64) -> &'a [u64] {
    let k = idx.binary_search(&v).expect("vertex was fetched");
    &csr.indices[csr.indptr[k] as usize..csr.indptr[k + 1] as usize]
}

/// Returns walks row-major: `starts.len()` rows of `length + 1` vertices. A
/// walk that reaches a vertex without out-edges stays there.
pub fn random_walks(store: &Store, starts: &[u64], o: &WalkOptions) -> Result<Vec<u64>> {
    // One version of the graph for every read of this call (`Store::view`).
    let view = store.view();
    let store: &Store = &view;
    let mut internal = starts.to_vec();
    store.to_internal(&mut internal)?;
    let mut out = walk(store, &internal, o)?;
    store.to_external(&mut out)?;
    Ok(out)
}

/// `random_walks` in the store's ids.
pub(crate) fn walk(store: &Store, starts: &[u64], o: &WalkOptions) -> Result<Vec<u64>> {
    if o.length == 0 || o.length > MAX_LENGTH {
        return Err(EngineError::Invalid(format!("walk length {} must be in 1..={MAX_LENGTH}", o.length)));
    }
    // Rejection sampling takes about max(1/p, 1, 1/q) / min(1/p, 1, 1/q)
    // draws a step: bounded p and q keep a walk from spinning (p = inf and
    // q = 1e-300 never accepted a step).
    if !((1e-4..=1e4).contains(&o.p) && (1e-4..=1e4).contains(&o.q)) {
        return Err(EngineError::Invalid(format!("p ({}) and q ({}) must be positive, in 1e-4..=1e4", o.p, o.q)));
    }
    let n = store.num_nodes();
    if let Some(&bad) = starts.iter().find(|&&v| v >= n) {
        return Err(EngineError::Invalid(format!("start vertex {bad} is not in the graph ({n} vertices)")));
    }
    store.gtt(o.direction)?;
    let second_order = o.p != 1.0 || o.q != 1.0;
    let (inv_p, inv_q) = (1.0 / o.p, 1.0 / o.q);
    let max_w = inv_p.max(1.0).max(inv_q);
    let w = starts.len();
    let row = o.length + 1;
    let mut out = vec![0u64; w * row];
    let mut rngs: Vec<Xoshiro256PlusPlus> =
        (0..w).map(|i| Xoshiro256PlusPlus::seed_from_u64(o.seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))).collect();
    for (i, &s) in starts.iter().enumerate() {
        out[i * row] = s;
    }
    let mut need: Vec<u64> = Vec::with_capacity(2 * w);
    for step in 0..o.length {
        need.clear();
        for i in 0..w {
            need.push(out[i * row + step]);
            if second_order && step > 0 {
                need.push(out[i * row + step - 1]);
            }
        }
        need.sort_unstable();
        need.dedup();
        let csr = store.neighbors(&need, o.direction, false, false)?;
        for (i, rng) in rngs.iter_mut().enumerate() {
            let cur = out[i * row + step];
            let nbrs = list(&csr, &need, cur);
            let next = if nbrs.is_empty() {
                cur
            } else if !second_order || step == 0 {
                nbrs[rng.random_range(0..nbrs.len())]
            } else {
                let prev = out[i * row + step - 1];
                let prev_nbrs = list(&csr, &need, prev);
                loop {
                    let x = nbrs[rng.random_range(0..nbrs.len())];
                    let weight = if x == prev {
                        inv_p
                    } else if prev_nbrs.binary_search(&x).is_ok() {
                        1.0
                    } else {
                        inv_q
                    };
                    if rng.random::<f64>() * max_w < weight {
                        break x;
                    }
                }
            };
            out[i * row + step + 1] = next;
        }
    }
    Ok(out)
}
