//! Maximal independent set, Luby's algorithm with seeded random priorities:
//! each round, an undecided vertex whose priority beats every undecided
//! neighbor joins the set and its neighbors leave. Two frontier passes per
//! round; O(log n) rounds with high probability.

use solidgraph_store::Store;

use crate::error::{Progress, Result};
use crate::frontier::Lists;
use crate::state;

const UNDECIDED: u8 = 0;
const IN: u8 = 1;
const OUT: u8 = 2;

/// A seeded 64-bit mix (splitmix64) as the vertex priority; ties broken by id.
fn priority(seed: u64, v: u64) -> (u64, u64) {
    let mut z = seed ^ v.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31), v)
}

/// Returns true for the vertices in the set.
pub fn mis(store: &Store, seed: u64, progress: Progress) -> Result<Vec<bool>> {
    // One version of the graph for every read of this call (`Store::view`).
    let view = store.view();
    let store: &Store = &view;
    state::reserve("MIS", store, 10, 0)?;
    let n = store.num_nodes();
    let lists = Lists::both(store, "MIS")?;
    let mut state = state::filled(n as usize, UNDECIDED);
    let mut undecided: Vec<u64> = (0..n).collect();
    let mut round = 0;
    while !undecided.is_empty() {
        let mut joined = Vec::new();
        let decided = n - undecided.len() as u64;
        lists.visit_checked(
            &undecided,
            |v, nbrs, _| {
                let pv = priority(seed, v);
                if nbrs.iter().all(|&u| u == v || state[u as usize] == OUT || priority(seed, u) > pv) {
                    joined.push(v);
                }
            },
            |_| Ok(progress("mis", decided, n)?),
        )?;
        // Decide after the pass so the round sees one consistent state.
        joined.sort_unstable();
        joined.iter().for_each(|&v| state[v as usize] = IN);
        lists.visit(&joined, |v, nbrs, _| {
            for &u in nbrs {
                if u != v && state[u as usize] == UNDECIDED {
                    state[u as usize] = OUT;
                }
            }
        })?;
        undecided.retain(|&v| state[v as usize] == UNDECIDED);
        round += 1;
        progress("mis", n - undecided.len() as u64, n)?;
        debug_assert!(round <= 64 * 64, "Luby did not converge");
    }
    state::by_external(store, state, |s| s == IN)
}
