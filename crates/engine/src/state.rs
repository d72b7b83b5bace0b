//! Vertex state arrays: one value per vertex, read at random by every
//! algorithm (a neighbor's level, root, rank or core value per list entry).
//! A random-access array of tens to hundreds of MiB spans thousands of small
//! pages: past the TLB's reach, so every random read also walks the page
//! table. The arrays
//! ask for transparent huge pages (`solidgraph_store::mem`).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use solidgraph_store::Store;
use solidgraph_store::mem::{advise_huge, machine_memory};

use crate::error::{EngineError, Result};

/// The bytes of state a whole-graph algorithm may allocate (0: the
/// machine's memory). One per process: a store's declared vertex count
/// sizes the state, and a damaged or hostile store must not make an
/// algorithm ask the allocator for more than the caller allows.
static BUDGET: AtomicU64 = AtomicU64::new(0);

/// Sets the state budget of every later whole-graph algorithm in this
/// process (0: the machine's memory, the default).
pub fn set_budget(bytes: u64) {
    BUDGET.store(bytes, Relaxed);
}

/// The state budget in bytes (`u64::MAX` when neither the caller nor the
/// machine says).
pub fn budget() -> u64 {
    match BUDGET.load(Relaxed) {
        0 => Some(machine_memory()).filter(|&m| m != 0).unwrap_or(u64::MAX),
        b => b,
    }
}

/// Refuses `algorithm` before it allocates when its state, `per_vertex`
/// bytes for each vertex and `per_edge` for each edge of `store`, exceeds
/// the budget: the vertex count comes from the store's pages, and an
/// allocation past what the process may have aborts it.
pub fn reserve(algorithm: &'static str, store: &Store, per_vertex: u64, per_edge: u64) -> Result<()> {
    let needed = store.num_nodes().saturating_mul(per_vertex).saturating_add(store.num_edges().saturating_mul(per_edge));
    let budget = budget();
    if needed > budget {
        return Err(EngineError::OverBudget { algorithm, needed, budget });
    }
    Ok(())
}

/// `n` copies of `x`.
pub fn filled<T: Clone>(n: usize, x: T) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    advise_huge(&v);
    v.resize(n, x);
    v
}

/// `f(0), f(1), ..., f(n - 1)`.
pub fn from_fn<T>(n: usize, f: impl FnMut(usize) -> T) -> Vec<T> {
    let mut v = Vec::with_capacity(n);
    advise_huge(&v);
    v.extend((0..n).map(f));
    v
}

/// A per-vertex result indexed by the store's ids, indexed by the user's
/// (`import --order degree` renumbers vertices) and converted by `f`: one
/// scatter into a new array. Its random writes do not depend on each other,
/// so the CPU overlaps their cache misses; following the permutation's
/// cycles in place would be a chain of dependent misses. Peak memory: both
/// arrays and the map.
pub fn by_external<T: Copy, U: Copy + Default>(store: &Store, vals: Vec<T>, f: impl Fn(T) -> U) -> Result<Vec<U>> {
    let Some(ext) = store.external_ids()? else {
        return Ok(vals.into_iter().map(f).collect());
    };
    let mut out = filled(vals.len(), U::default());
    for (i, &x) in vals.iter().enumerate() {
        // Vertices added after the import keep their ids.
        let e = ext.get(i).map_or(i, |&e| e as usize);
        out[e] = f(x);
    }
    Ok(out)
}

/// `by_external` in place, for values below 2^32 (labels that are user
/// ids; a renumbered store's ids fit u32): each value first goes into the
/// high half of its destination's slot, then every slot shifts down. No
/// second array, and the writes overlap as in `by_external`.
pub fn by_external_small(store: &Store, vals: &mut [u64]) -> Result<()> {
    let Some(ext) = store.external_ids()? else { return Ok(()) };
    if let Some(v) = vals.iter().position(|&x| x >> 32 != 0) {
        return Err(EngineError::Unsupported(format!("vertex {v}: label {} needs more than 32 bits on a renumbered store", vals[v])));
    }
    for i in 0..vals.len() {
        let e = ext.get(i).map_or(i, |&e| e as usize);
        vals[e] |= (vals[i] & u64::from(u32::MAX)) << 32;
    }
    vals.iter_mut().for_each(|x| *x >>= 32);
    Ok(())
}
