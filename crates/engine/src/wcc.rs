//! Weakly connected components: one sequential pass over the out-lists into
//! a union-find whose roots are always the smallest vertex of their set, so
//! every component is labelled by its smallest vertex id.

use solidgraph_store::{Direction, Store};

use crate::error::{Progress, Result};
use crate::frontier::Lists;

fn find(parent: &mut [u64], mut v: u64) -> u64 {
    while parent[v as usize] != v {
        // Path halving keeps trees flat without recursion.
        let gp = parent[parent[v as usize] as usize];
        parent[v as usize] = gp;
        v = gp;
    }
    v
}

pub fn wcc(store: &Store, progress: Progress) -> Result<Vec<u64>> {
    let n = store.num_nodes();
    let mut parent: Vec<u64> = (0..n).collect();
    let lists = Lists::new(store, Direction::Out, false)?;
    lists.scan(|v, nbrs, _| {
        for &u in nbrs {
            let (a, b) = (find(&mut parent, v), find(&mut parent, u));
            if a < b {
                parent[b as usize] = a;
            } else if b < a {
                parent[a as usize] = b;
            }
        }
        if v % (1 << 20) == 0 {
            progress("wcc", v, n);
        }
    })?;
    for v in 0..n {
        let r = find(&mut parent, v);
        parent[v as usize] = r;
    }
    progress("wcc", n, n);
    Ok(parent)
}
