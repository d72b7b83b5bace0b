//! Vertex state arrays: one value per vertex, read at random by every
//! algorithm (a neighbor's level, root, rank or core value per list entry).
//! A random-access array of tens to hundreds of MiB spans thousands of small
//! pages: past the TLB's reach, so every random read also walks the page
//! table. The arrays
//! ask for transparent huge pages (`solidgraph_store::mem`).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use rayon::prelude::*;

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
/// scatter into a new array, on the pool's threads. Its random writes do
/// not depend on each other, so the CPU overlaps their cache misses;
/// following the permutation's cycles in place would be a chain of
/// dependent misses. Peak memory: both arrays and the map.
pub fn by_external<T: Copy + Sync, U: Slot>(store: &Store, vals: Vec<T>, f: impl Fn(T) -> U + Sync) -> Result<Vec<U>> {
    let Some(ext) = store.external_ids()? else {
        return Ok(vals.into_iter().map(f).collect());
    };
    let mut out = filled(vals.len(), U::default());
    let slots = U::atomic(&mut out);
    vals.par_iter().enumerate().with_min_len(SCATTER_MIN).for_each(|(i, &x)| {
        // Vertices added after the import keep their ids.
        let e = ext.get(i).map_or(i, |&e| e as usize);
        U::store(&slots[e], f(x));
    });
    Ok(out)
}

/// Vertices a thread of `by_external` scatters at least.
const SCATTER_MIN: usize = 1 << 16;

/// A result value `by_external` scatters from several threads: written
/// through an atomic of its size, so a damaged order map that names a
/// slot twice makes a wrong answer at worst, never a data race. Relaxed
/// stores are plain stores on the machines we run on.
pub trait Slot: Copy + Default + Send + Sync {
    type Atomic: Sync;
    /// `x` seen as atomics (same size and alignment).
    fn atomic(x: &mut [Self]) -> &[Self::Atomic];
    fn store(slot: &Self::Atomic, v: Self);
}

macro_rules! slot {
    ($t:ty, $a:ty, $to:expr) => {
        impl Slot for $t {
            type Atomic = $a;
            fn atomic(x: &mut [$t]) -> &[$a] {
                const { assert!(size_of::<$a>() == size_of::<$t>() && align_of::<$a>() == align_of::<$t>()) };
                // SAFETY: same size and (asserted) alignment; only values
                // of the type are stored through the view, and the
                // exclusive borrow means no non-atomic access while it
                // lives.
                unsafe { &*(x as *mut [$t] as *const [$a]) }
            }
            fn store(slot: &$a, v: $t) {
                slot.store($to(v), Relaxed);
            }
        }
    };
}
slot!(i64, std::sync::atomic::AtomicI64, |v| v);
slot!(u64, AtomicU64, |v| v);
slot!(u32, std::sync::atomic::AtomicU32, |v| v);
slot!(bool, std::sync::atomic::AtomicBool, |v| v);

/// f64 slots hold their bits (an AtomicU64 view of an f64 array, read
/// back as f64 once the scatter is over).
impl Slot for f64 {
    type Atomic = AtomicU64;
    fn atomic(x: &mut [f64]) -> &[AtomicU64] {
        const { assert!(size_of::<AtomicU64>() == size_of::<f64>() && align_of::<AtomicU64>() == align_of::<f64>()) };
        // SAFETY: as in the macro; any u64 is the bits of some f64.
        unsafe { &*(x as *mut [f64] as *const [AtomicU64]) }
    }
    fn store(slot: &AtomicU64, v: f64) {
        slot.store(v.to_bits(), Relaxed);
    }
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
