"""Graph analytics (Graph.bfs/wcc/pagerank/mis/kcore/sssp/cdlp/lcc) against
networkx on random graphs."""

import re
from collections import Counter

import networkx as nx
import numpy as np
import pytest

import solidgraph
from solidgraph import SolidGraphError

UNREACHED = 2**63 - 1


def random_edges(seed, n, m, self_loops=True, undirected=False):
    rng = np.random.default_rng(seed)
    # Several components: edges mostly inside blocks of 50 vertices.
    src = rng.integers(0, n, m)
    dst = np.where(rng.random(m) < 0.9, (src // 50) * 50 + rng.integers(0, 50, m), rng.integers(0, n, m))
    dst = np.minimum(dst, n - 1)
    if not self_loops:
        keep = src != dst
        src, dst = src[keep], dst[keep]
    if undirected:  # one weight per unordered pair, as nx.Graph keeps
        src, dst = np.minimum(src, dst), np.maximum(src, dst)
    pairs = np.unique(np.stack([src, dst], 1), axis=0)  # distinct pairs: nx keeps one edge per pair
    w = rng.integers(1, 20, len(pairs)).astype(np.float32) / 4
    return pairs[:, 0], pairs[:, 1], w


CASES = [(1, 300, 900), (2, 200, 1500), (3, 5, 0), (4, 400, 300)]


def build(tmp_path, seed, n, m, directed, cache_bytes=1 << 24, self_loops=True, order="input", lower_lists=False):
    src, dst, w = random_edges(seed, n, m, self_loops, not directed) if m else (np.array([0]), np.array([0]), np.array([1.0], np.float32))
    path = tmp_path / f"g{seed}{directed}{self_loops}{order}{lower_lists}"
    if not path.exists():
        solidgraph.import_graph(
            path, (src, dst, w), undirected=not directed, in_edges=directed, lower_lists=lower_lists, dedup=True, num_nodes=n, order=order
        )
    g = solidgraph.open(path, cache_bytes=cache_bytes)
    G = nx.DiGraph() if directed else nx.Graph()
    G.add_nodes_from(range(n))
    G.add_weighted_edges_from(zip(src.tolist(), dst.tolist(), w.tolist()))
    return g, G


# "degree" renumbers vertices inside the store; answers are in the user's
# ids and must not change. Undirected stores with lower lists run WCC and
# PageRank over them.
@pytest.mark.parametrize("order", ["input", "degree"])
@pytest.mark.parametrize("graph", ["directed", "undirected", "undirected+lower"])
@pytest.mark.parametrize("case", CASES)
def test_bfs_wcc_sssp_pagerank(tmp_path, case, graph, order):
    seed, n, m = case
    directed = graph == "directed"
    g, G = build(tmp_path, seed, n, m, directed, order=order, lower_lists=graph.endswith("lower"))
    assert g.has_lower_lists == graph.endswith("lower")
    for source in [0, n // 2, n - 1]:
        want = nx.single_source_shortest_path_length(G, source)
        levels = g.bfs(source)
        assert levels.dtype == np.int64
        assert levels.tolist() == [want.get(v, UNREACHED) for v in range(n)]
        levels2, parents = g.bfs(source, parents=True)
        np.testing.assert_array_equal(levels2, levels)
        for v in range(n):
            if v == source:
                assert parents[v] == source
            elif levels[v] == UNREACHED:
                assert parents[v] == -1
            else:
                assert G.has_edge(parents[v], v) and levels[parents[v]] == levels[v] - 1
        # A target stops the search once its level is known.
        far = max(want, key=want.get)
        assert g.bfs(source, target=far)[far] == want[far]
        dist = g.sssp(source)
        want_d = nx.single_source_dijkstra_path_length(G, source)
        assert dist.dtype == np.float64
        np.testing.assert_allclose(dist, [want_d.get(v, np.inf) for v in range(n)], rtol=1e-6)
    comps = nx.weakly_connected_components(G) if directed else nx.connected_components(G)
    labels = g.wcc()
    assert sorted(map(sorted, comps)) == sorted(sorted(np.flatnonzero(labels == l).tolist()) for l in np.unique(labels))
    assert all(labels[v] == min(np.flatnonzero(labels == labels[v])) for v in range(n))
    pr = g.pagerank(damping=0.85, iterations=1000, tol=1e-14)
    assert pr.dtype == np.float64 and abs(pr.sum() - 1) < 1e-9
    want_pr = nx.pagerank(G, alpha=0.85, tol=1e-15, max_iter=10000, weight=None)
    np.testing.assert_allclose(pr, [want_pr[v] for v in range(n)], atol=1e-6, rtol=0)
    # Fixed iterations, no tolerance: still a distribution.
    assert abs(g.pagerank(iterations=3).sum() - 1) < 1e-9


def undirected_simple(G):
    U = nx.Graph(G.to_undirected() if G.is_directed() else G)
    U.remove_edges_from(nx.selfloop_edges(U))
    return U


@pytest.mark.parametrize("order", ["input", "degree"])
@pytest.mark.parametrize("directed", [True, False])
@pytest.mark.parametrize("case", CASES)
def test_kcore_mis_lcc_cdlp(tmp_path, case, directed, order):
    seed, n, m = case
    g, G = build(tmp_path, seed, n, m, directed, order=order)
    U = undirected_simple(G)
    core = g.kcore()
    assert core.dtype == np.uint32
    want = nx.core_number(U)
    assert core.tolist() == [want[v] for v in range(n)]
    for s in (0, 1, 99):
        mis = g.mis(seed=s)
        assert mis.dtype == np.bool_
        chosen = set(np.flatnonzero(mis).tolist())
        assert not any(u in chosen and v in chosen for u, v in U.edges()), "independent"
        assert all(v in chosen or any(u in chosen for u in U[v]) for v in range(n)), "maximal"
        np.testing.assert_array_equal(mis, g.mis(seed=s))
    cdlp = g.cdlp(iterations=5)
    np.testing.assert_array_equal(cdlp, ref_cdlp(g, n, 5))
    if not directed:
        lcc = g.lcc()
        want = nx.clustering(U)
        np.testing.assert_allclose(lcc, [want[v] for v in range(n)], atol=1e-12)


def ref_cdlp(g, n, iterations):
    """Graphalytics CDLP: most frequent neighbor label (in- and out-lists of a
    directed graph, each counted), smallest on ties; synchronous."""
    ids = np.arange(n)
    lists = []
    out = g.neighbors(ids)
    inn = g.neighbors(ids, "in") if g.directed else None
    for v in range(n):
        nb = out[1][out[0][v] : out[0][v + 1]].tolist()
        if inn is not None:
            nb += inn[1][inn[0][v] : inn[0][v + 1]].tolist()
        lists.append(nb)
    labels = list(range(n))
    for _ in range(iterations):
        nxt = []
        for v in range(n):
            if not lists[v]:
                nxt.append(labels[v])
                continue
            c = Counter(labels[u] for u in lists[v])
            best = max(c.values())
            nxt.append(min(l for l, k in c.items() if k == best))
        labels = nxt
    return np.array(labels)


def test_directed_lcc_against_the_definition(tmp_path):
    g, G = build(tmp_path, 5, 120, 700, True)
    n = 120
    U = undirected_simple(G)
    lcc = g.lcc()
    for v in range(n):
        nb = set(U[v])
        d = len(nb)
        links = sum(1 for a in nb for b in nb if a != b and G.has_edge(a, b))
        assert lcc[v] == pytest.approx(links / (d * (d - 1)) if d > 1 else 0.0)


def test_results_do_not_depend_on_the_cache(tmp_path):
    big, _ = build(tmp_path, 6, 3000, 30000, True, cache_bytes=1 << 28)
    small = solidgraph.open(big.path, cache_bytes=16 << 10)
    big.reset_stats()
    small.reset_stats()
    for name, kw in [("bfs", dict(source=7)), ("wcc", {}), ("pagerank", {}), ("mis", {}), ("kcore", {}), ("sssp", dict(source=7)), ("cdlp", {}), ("lcc", {})]:
        np.testing.assert_array_equal(getattr(big, name)(**kw), getattr(small, name)(**kw), err_msg=name)
    # The whole store fits the big cache: after the first pass it reads
    # nothing. The small one cannot hold it: every pass reads the volume.
    b, s = big.stats(), small.stats()
    assert b["cache_hits"] > 0 and b["pages_read"] < s["pages_read"]
    assert s["cache_bytes"] <= s["cache_budget"]


def test_progress(tmp_path, capsys):
    g, _ = build(tmp_path, 1, 300, 900, True)
    calls = []
    g.pagerank(iterations=5, progress=lambda *a: calls.append(a))
    assert calls[0][0] == "pagerank" and calls[-1] == ("pagerank", 5, 5)
    calls.clear()
    g.bfs(0, progress=lambda *a: calls.append(a))
    assert calls and all(p == "bfs" and d <= t for p, d, t in calls)
    g.wcc(progress=True)
    assert "solidgraph wcc: wcc 300/300" in capsys.readouterr().err
    for name in ("kcore", "mis", "cdlp", "lcc"):
        calls.clear()
        getattr(g, name)(progress=lambda *a: calls.append(a))
        assert calls, name
    with pytest.raises(SolidGraphError, match="progress must be a bool or a callable"):
        g.wcc(progress="loud")


def test_bad_analytics_input(tmp_path):
    g, _ = build(tmp_path, 1, 300, 900, True)
    with pytest.raises(SolidGraphError, match=r"source vertex 300 is not in the graph \(300 vertices\)"):
        g.bfs(300)
    with pytest.raises(SolidGraphError, match="target vertex 1000 is not in the graph"):
        g.bfs(0, target=1000)
    with pytest.raises(SolidGraphError, match="source vertex 300"):
        g.sssp(300)
    with pytest.raises(SolidGraphError, match=re.escape("damping 1.5 must be in (0, 1)")):
        g.pagerank(damping=1.5)
    with pytest.raises(SolidGraphError, match="tolerance must be positive"):
        g.pagerank(tol=-1.0)
    with pytest.raises(SolidGraphError, match="source -1 is not a vertex id"):
        g.bfs(-1)
    with pytest.raises(SolidGraphError, match="target -2 is not a vertex id"):
        g.bfs(0, target=-2)
    solidgraph.import_graph(tmp_path / "d", ([0, 1], [1, 2]))
    d = solidgraph.open(tmp_path / "d")
    for name in ("kcore", "mis", "cdlp", "lcc"):
        with pytest.raises(SolidGraphError, match=r"needs its in-edges; import it again with in_edges=True"):
            getattr(d, name)()
    with pytest.raises(SolidGraphError, match="needs edge weights"):
        d.sssp(0)
    with pytest.raises(SolidGraphError, match="lower lists are for undirected graphs"):
        solidgraph.import_graph(tmp_path / "dl", ([0, 1], [1, 2]), lower_lists=True)
    assert not (tmp_path / "dl").exists()
    solidgraph.import_graph(tmp_path / "neg", ([0, 1], [1, 2], [1.0, -2.0]))
    with pytest.raises(SolidGraphError, match="non-negative weights; edge 1 -> 2 has weight -2"):
        solidgraph.open(tmp_path / "neg").sssp(0)


def test_lower_lists_give_way_to_updates(tmp_path):
    g, G = build(tmp_path, 2, 200, 1500, False, lower_lists=True)
    w = solidgraph.open(g.path, writable=True)
    assert w.has_lower_lists
    w.add_edges([0, 5], [199, 77])
    G.add_edges_from([(0, 199), (5, 77)])
    # Pending updates: the lower lists lack them, so out-lists are read.
    assert not w.has_lower_lists
    want = nx.pagerank(G, alpha=0.85, tol=1e-15, max_iter=10000, weight=None)
    np.testing.assert_allclose(w.pagerank(iterations=1000, tol=1e-14), [want[v] for v in range(200)], atol=1e-6, rtol=0)
    w.merge()
    # A merge drops them.
    assert not w.has_lower_lists
    np.testing.assert_allclose(w.pagerank(iterations=1000, tol=1e-14), [want[v] for v in range(200)], atol=1e-6, rtol=0)
    w.verify()
    del w
    assert not solidgraph.open(g.path).has_lower_lists
