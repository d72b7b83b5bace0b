//! What the engine's sample and BFS return on the reference model of
//! `common` (ids kept at import, so the store's ids are the user's): the
//! same draws (`rng_for` and `choose`, public so that peers reproduce a
//! sample) over the model's lists, in neighbor order as the store keeps them.

use std::collections::{BTreeMap, HashMap, VecDeque};

use solidgraph_engine::bfs::UNREACHED;
use solidgraph_engine::sampler::{Sample, choose, rng_for};
use solidgraph_store::Direction;

use crate::common::Model;

/// Each vertex's list in `dir` (Out or In), neighbors ascending.
pub fn lists(m: &Model, dir: Direction) -> BTreeMap<u64, Vec<u64>> {
    let mut out: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for (&a, l) in &m.out {
        for &b in l.keys() {
            match dir {
                Direction::In => out.entry(b).or_default().push(a),
                _ => out.entry(a).or_default().push(b),
            }
        }
    }
    // In-lists come out ascending already (sources in order); out-lists too.
    out
}

/// The sample of `seeds` with `fanouts` (no replacement, unweighted) along
/// `dir`: nodes, row, col and the per-hop counts (edge ids are CSR
/// positions, which depend on merges; the model has none).
pub fn sample(m: &Model, seeds: &[u64], fanouts: &[i64], seed: u64, dir: Direction) -> Sample {
    let lists = lists(m, dir);
    let mut out = Sample::default();
    let mut local: HashMap<u64, u64> = HashMap::new();
    let add = |out: &mut Sample, local: &mut HashMap<u64, u64>, u: u64| -> u64 {
        *local.entry(u).or_insert_with(|| {
            out.node.push(u);
            out.node.len() as u64 - 1
        })
    };
    for &s in seeds {
        add(&mut out, &mut local, s);
    }
    out.num_sampled_nodes.push(out.node.len() as u64);
    let (mut start, mut end) = (0, out.node.len());
    let mut picks = Vec::new();
    for (hop, &k) in fanouts.iter().enumerate() {
        let edges_before = out.row.len();
        for lv in start..end {
            let v = out.node[lv];
            let list = lists.get(&v).map(|l| &l[..]).unwrap_or(&[]);
            choose(&mut rng_for(seed, hop as u64, v), list.len(), k, false, None, &mut picks);
            for &p in &picks {
                let lu = add(&mut out, &mut local, list[p]);
                out.row.push(lu);
                out.col.push(lv as u64);
            }
        }
        out.num_sampled_nodes.push((out.node.len() - end) as u64);
        out.num_sampled_edges.push((out.row.len() - edges_before) as u64);
        (start, end) = (end, out.node.len());
    }
    out
}

/// BFS levels from `source` along out-edges; `UNREACHED` where none.
pub fn bfs(m: &Model, source: u64) -> Vec<i64> {
    let lists = lists(m, Direction::Out);
    let mut levels = vec![UNREACHED; m.n as usize];
    levels[source as usize] = 0;
    let mut q = VecDeque::from([source]);
    while let Some(v) = q.pop_front() {
        for &u in lists.get(&v).map(|l| &l[..]).unwrap_or(&[]) {
            if levels[u as usize] == UNREACHED {
                levels[u as usize] = levels[v as usize] + 1;
                q.push_back(u);
            }
        }
    }
    levels
}

/// The parts of a sample the model predicts (all but edge ids and tensors):
/// node, row, col, nodes and edges per hop.
pub fn shape(s: &Sample) -> [&[u64]; 5] {
    [&s.node, &s.row, &s.col, &s.num_sampled_nodes, &s.num_sampled_edges]
}
