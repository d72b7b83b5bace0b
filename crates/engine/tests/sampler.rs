//! Neighbor sampling properties on random graphs.

use std::collections::{BTreeSet, HashSet};

use proptest::prelude::*;
use solidgraph_engine::sampler::*;
use solidgraph_store::*;

struct G {
    _dir: tempfile::TempDir,
    store: Store,
    /// In-lists (sampling direction In): in_[v] = sorted sources of edges into v.
    in_: Vec<Vec<u64>>,
}

fn build(n: u64, edges: &[(u64, u64, f32)]) -> G {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g");
    let o = ImportOptions { in_edges: true, weights: true, dedup: true, num_nodes: Some(n), ..Default::default() };
    let input = EdgeInput::Memory {
        src: edges.iter().map(|e| e.0).collect(),
        dst: edges.iter().map(|e| e.1).collect(),
        weights: Some(edges.iter().map(|e| e.2).collect()),
        labels: None,
    };
    let x: Vec<u8> = (0..n * 3).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let t = TensorInput { name: "x".into(), data: TensorData::Memory { dtype: DType::F32, rows: n, dim: 3, bytes: x } };
    import(&path, &[input], &[t], &o, &|_, _, _| {}).unwrap();
    let store = Store::open(&path, &OpenOptions::default()).unwrap();
    let mut in_ = vec![BTreeSet::new(); n as usize];
    for &(a, b, _) in edges {
        in_[b as usize].insert(a);
    }
    G { _dir: dir, store, in_: in_.into_iter().map(|s| s.into_iter().collect()).collect() }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn samples_are_valid_and_deterministic(
        n in 2u64..300,
        raw in proptest::collection::vec((any::<u64>(), any::<u64>(), 0u8..4), 1..2000),
        seeds_raw in proptest::collection::vec(any::<u64>(), 1..40),
        f1 in 1i64..8, f2 in prop_oneof![Just(-1i64), 1i64..5],
        replace in any::<bool>(), weighted in any::<bool>(), seed in any::<u64>(),
    ) {
        let edges: Vec<(u64, u64, f32)> = raw.iter().map(|&(a, b, w)| (a % n, b % n, w as f32)).collect();
        let g = build(n, &edges);
        let seeds: Vec<u64> = seeds_raw.iter().map(|s| s % n).collect();
        let o = SampleOptions { fanouts: vec![f1, f2], replace, weighted, seed, tensors: vec!["x".into()], ..Default::default() };
        let s = sample_neighbors(&g.store, &seeds, &o).unwrap();

        // Seeds first, each once, in first-occurrence order; nodes unique.
        let mut uniq = Vec::new();
        for &v in &seeds { if !uniq.contains(&v) { uniq.push(v); } }
        prop_assert_eq!(&s.node[..uniq.len()], &uniq[..]);
        prop_assert_eq!(s.node.iter().collect::<HashSet<_>>().len(), s.node.len());
        prop_assert_eq!(s.num_sampled_nodes.iter().sum::<u64>() as usize, s.node.len());
        prop_assert_eq!(s.num_sampled_edges.iter().sum::<u64>() as usize, s.row.len());

        // Every sampled edge exists (u -> v for row u, col v) and its id is
        // its position in the in-CSR.
        let mut offsets = vec![0u64; n as usize + 1];
        for v in 0..n as usize { offsets[v + 1] = offsets[v] + g.in_[v].len() as u64; }
        let mut per_center: std::collections::HashMap<u64, Vec<u64>> = Default::default();
        for k in 0..s.row.len() {
            let (u, v) = (s.node[s.row[k] as usize], s.node[s.col[k] as usize]);
            prop_assert!(g.in_[v as usize].binary_search(&u).is_ok(), "no edge {} -> {}", u, v);
            let e = s.edge[k];
            prop_assert!(e >= offsets[v as usize] && e < offsets[v as usize + 1]);
            prop_assert_eq!(g.in_[v as usize][(e - offsets[v as usize]) as usize], u);
            let hop_k = [f1, f2][if s.col[k] < s.num_sampled_nodes[0] { 0 } else { 1 }];
            if weighted && hop_k != -1 {
                let w = g.store.edge_weights(&[u], &[v]).unwrap()[0];
                prop_assert!(w > 0.0, "weighted sampling drew a zero-weight edge");
            }
            per_center.entry(s.col[k]).or_default().push(e);
        }
        // Per hop: at most `fanout` per center; no repeats without replacement.
        let hop_of = |local: u64| if local < s.num_sampled_nodes[0] { 0 } else { 1 };
        for (&c, es) in &per_center {
            let k = [f1, f2][hop_of(c)];
            let d = g.in_[s.node[c as usize] as usize].len();
            if k != -1 { prop_assert!(es.len() <= k as usize); } else { prop_assert_eq!(es.len(), d); }
            if !replace {
                prop_assert_eq!(es.iter().collect::<HashSet<_>>().len(), es.len());
                if !weighted && k != -1 { prop_assert_eq!(es.len(), d.min(k as usize)); }
            }
        }
        // Features come back for every node, in node order.
        let x = &s.tensors[0];
        for (i, &v) in s.node.iter().enumerate() {
            let got = f32::from_le_bytes(x.data[i * 12..i * 12 + 4].try_into().unwrap());
            prop_assert_eq!(got, (v * 3) as f32);
        }
        prop_assert_eq!(&s, &sample_neighbors(&g.store, &seeds, &o).unwrap());

        // Sampled as a group (one read per hop for all), each batch is what
        // it is alone with its seed, whichever vertices the batches share.
        let cut = seeds.len() / 2;
        let batches = [&seeds[..], &seeds[cut..], &seeds[..cut.max(1)]];
        let group_seeds = [seed, seed ^ 1, seed.wrapping_add(7)];
        let subs = sample_subgraphs(&g.store, &batches, &group_seeds, &o).unwrap();
        for ((sub, b), sd) in subs.into_iter().zip(batches).zip(group_seeds) {
            let alone = sample_neighbors(&g.store, b, &SampleOptions { seed: sd, ..o.clone() }).unwrap();
            prop_assert_eq!(sub.gather(&g.store, &o.tensors).unwrap(), alone);
        }
    }
}

#[test]
fn uniform_sampling_is_uniform() {
    // Vertex 0 has 10 in-neighbors; sample 2 of them 20,000 times.
    let edges: Vec<(u64, u64, f32)> = (1..=10).map(|u| (u, 0, 1.0)).collect();
    let g = build(11, &edges);
    let mut counts = [0u32; 11];
    for seed in 0..20_000 {
        let o = SampleOptions { fanouts: vec![2], seed, ..Default::default() };
        let s = sample_neighbors(&g.store, &[0], &o).unwrap();
        for &r in &s.row {
            counts[s.node[r as usize] as usize] += 1;
        }
    }
    // Each neighbor expects 4,000 draws; allow 5 standard deviations.
    for &c in &counts[1..] {
        assert!((c as f64 - 4000.0).abs() < 5.0 * (4000.0f64 * 0.8).sqrt(), "counts {counts:?}");
    }
}

#[test]
fn bad_arguments() {
    let g = build(5, &[(0, 1, 1.0), (1, 2, 1.0)]);
    let s = &g.store;
    let o = SampleOptions::default();
    assert!(sample_neighbors(s, &[], &o).unwrap_err().to_string().contains("empty"));
    assert!(sample_neighbors(s, &[7], &o).unwrap_err().to_string().contains("seed 7"));
    for bad in [0, -2, 1_000_000] {
        let o = SampleOptions { fanouts: vec![bad], ..Default::default() };
        assert!(sample_neighbors(s, &[0], &o).unwrap_err().to_string().contains("fanout"));
    }
    let o = SampleOptions { tensors: vec!["nope".into()], ..Default::default() };
    assert!(sample_neighbors(s, &[0], &o).unwrap_err().to_string().contains("nope"));
    let sub = saint_subgraph(s, &[0], 3, 1, Direction::Out, &[]).unwrap();
    for k in 0..sub.row.len() {
        let (u, v) = (sub.node[sub.row[k] as usize], sub.node[sub.col[k] as usize]);
        assert!((u, v) == (0, 1) || (u, v) == (1, 2));
    }
}

#[test]
fn weighted_sampling_follows_the_weights() {
    // In-neighbors 1..=5 of vertex 0 with weights 1, 2, 3, 4, 10; one draw
    // per call, 20,000 calls, with and without replacement (one draw is the
    // same distribution either way).
    let weights = [1.0f32, 2.0, 3.0, 4.0, 10.0];
    let edges: Vec<(u64, u64, f32)> = weights.iter().enumerate().map(|(i, &w)| (i as u64 + 1, 0, w)).collect();
    let g = build(6, &edges);
    let total: f32 = weights.iter().sum();
    for replace in [true, false] {
        let mut counts = [0f64; 6];
        let trials = 20_000;
        for seed in 0..trials {
            let o = SampleOptions { fanouts: vec![1], weighted: true, replace, seed, ..Default::default() };
            let s = sample_neighbors(&g.store, &[0], &o).unwrap();
            counts[s.node[s.row[0] as usize] as usize] += 1.0;
        }
        let chi2: f64 = (1..=5)
            .map(|u| {
                let expected = trials as f64 * (weights[u - 1] / total) as f64;
                (counts[u] - expected).powi(2) / expected
            })
            .sum();
        // 4 degrees of freedom: P(chi2 > 18.47) = 0.001.
        assert!(chi2 < 18.47, "replace={replace}: chi-square {chi2:.2} for counts {counts:?}");
    }
}

#[test]
fn hops_wider_than_one_read_part() {
    // 10,000 seeds: the hop is read in several parts; every seed still gets
    // exactly its two in-neighbors, at the right local positions.
    let n = 10_000u64;
    let edges: Vec<(u64, u64, f32)> = (0..n).flat_map(|v| [((v + 1) % n, v, 1.0), ((v + 2) % n, v, 1.0)]).collect();
    let g = build(n, &edges);
    let seeds: Vec<u64> = (0..n).collect();
    let s = sample_neighbors(&g.store, &seeds, &SampleOptions { fanouts: vec![2], ..Default::default() }).unwrap();
    assert_eq!(s.row.len(), 2 * n as usize);
    for k in 0..s.row.len() {
        let (u, v) = (s.node[s.row[k] as usize], s.node[s.col[k] as usize]);
        assert!(u == (v + 1) % n || u == (v + 2) % n, "{u} -> {v}");
    }
}

#[test]
fn hub_extents_read_only_drawn_pages_and_match_full_reads() {
    // Vertices 0..4 have in-degree 3,000: their lists are extents of several
    // pages, sampled by drawing positions first and reading only the pages
    // that hold them. The result must be what drawing from the whole list
    // gives.
    let n = 5_000u64;
    let mut edges: Vec<(u64, u64, f32)> = Vec::new();
    for hub in 0..4u64 {
        edges.extend((0..3_000u64).map(|i| ((hub * 997 + i * 7) % n, hub, 1.0)));
    }
    edges.extend((4..n).map(|v| ((v * 13) % n, v, 1.0)));
    let g = build(n, &edges);
    assert!(g.store.extent_degrees(&[0, 1, 2, 3, 4], Direction::In).unwrap()[..4].iter().all(|d| d.is_some()));
    // Cached hub pages are decoded from their checkpoints (the second pass
    // hits them); without a cache each page is decoded up to its last draw.
    let uncached = Store::open(&g._dir.path().join("g"), &OpenOptions { cache_bytes: 0, ..Default::default() }).unwrap();
    for (store, replace) in [(&g.store, false), (&g.store, true), (&g.store, false), (&uncached, false), (&uncached, true)] {
        let o = SampleOptions { fanouts: vec![10, 3], replace, seed: 42, ..Default::default() };
        let seeds = [0u64, 1, 2, 3, 4000];
        store.reset_stats();
        let s = sample_neighbors(store, &seeds, &o).unwrap();
        assert!(store.stats().pages_read() < 60, "read {} pages: whole hub lists were read", store.stats().pages_read());
        // Reference: hop 0 drawn from the whole in-list of each seed.
        let mut k = 0;
        for (i, &v) in seeds.iter().enumerate() {
            let list = &g.in_[v as usize];
            let mut picks = Vec::new();
            choose(&mut rng_for(42, 0, v), list.len(), 10, replace, None, &mut picks);
            for &p in &picks {
                assert_eq!(s.col[k], i as u64);
                assert_eq!(s.node[s.row[k] as usize], list[p], "seed {v}, position {p}");
                k += 1;
            }
        }
        assert_eq!(k as u64, s.num_sampled_edges[0]);
        // Hubs in several batches of a group, each drawing its own positions.
        let batches: [&[u64]; 3] = [&[0, 1, 2], &[0, 4000], &[3, 2, 1, 0]];
        let subs = sample_subgraphs(store, &batches, &[1, 2, 3], &o).unwrap();
        for ((sub, b), sd) in subs.into_iter().zip(batches).zip([1, 2, 3]) {
            assert_eq!(sub.gather(store, &[]).unwrap(), sample_neighbors(store, b, &SampleOptions { seed: sd, ..o.clone() }).unwrap());
        }
    }
}

#[test]
fn a_group_reads_the_lists_its_batches_share_once() {
    let n = 5_000u64;
    let edges: Vec<(u64, u64, f32)> = (0..n).flat_map(|v| [((v * 13) % n, v, 1.0), ((v * 7 + 1) % n, v, 1.0)]).collect();
    let g = build(n, &edges);
    let store = Store::open(&g._dir.path().join("g"), &OpenOptions { cache_bytes: 0, ..Default::default() }).unwrap();
    let seeds: Vec<u64> = (0..n).step_by(37).collect();
    let o = SampleOptions { fanouts: vec![1], ..Default::default() };
    store.reset_stats();
    sample_subgraph(&store, &seeds, &o).unwrap();
    let alone = store.stats().pages_read();
    store.reset_stats();
    let subs = sample_subgraphs(&store, &[&seeds, &seeds, &seeds], &[1, 2, 3], &o).unwrap();
    assert_eq!(subs.len(), 3);
    assert_eq!(store.stats().pages_read(), alone, "three batches of the same seeds read their lists more than once");
    assert!(sample_subgraphs(&store, &[&seeds, &seeds], &[1], &o).unwrap_err().to_string().contains("as many seeds"));
    assert!(sample_subgraphs(&store, &[], &[], &o).is_err());
}
