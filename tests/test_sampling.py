"""Neighbor sampling, walks, GraphSAINT subgraphs and the pipelined loader
(Graph.sample_loader) on small random graphs."""

import os
import pickle
import re

import numpy as np
import pytest

import solidgraph
from solidgraph import SolidGraphError

N = 400


def make_store(path, seed=0, n=N, e=4000, in_edges=True, weights=True, order="input"):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, e)
    # A few hubs, so some lists are longer than any fanout.
    dst = np.where(rng.random(e) < 0.2, rng.integers(0, 5, e), rng.integers(0, n, e))
    w = rng.integers(0, 5, e).astype(np.float32)  # zero weights too
    x = (np.arange(n)[:, None] * 10 + np.arange(3)).astype(np.float32)
    y = rng.integers(0, 7, n)
    kw = dict(edge_weights=w) if weights else {}
    solidgraph.import_graph(path, (src, dst), {"x": x, "y": y}, in_edges=in_edges, dedup=True, num_nodes=n, order=order, **kw)
    return solidgraph.open(path)


@pytest.fixture(scope="module")
def g(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("sampling") / "g")


def csr(g, direction):
    indptr, indices = g.neighbors(np.arange(g.num_nodes), direction)[:2]
    return indptr, indices


def check_sample(g, s, seeds, fanouts, direction, replace, weighted=False, edge_ids_in_user_order=True):
    indptr, indices = csr(g, direction)
    uniq = list(dict.fromkeys(np.asarray(seeds).tolist()))
    node = s.node
    assert node.dtype == np.int64 and node[: len(uniq)].tolist() == uniq, "seeds first, each once"
    assert len(set(node.tolist())) == len(node)
    assert s.num_sampled_nodes.sum() == len(node) and s.num_sampled_nodes[0] == len(uniq)
    assert s.num_sampled_edges.sum() == len(s.row) == len(s.col) == len(s.edge)
    assert len(s.num_sampled_nodes) == len(fanouts) + 1 and len(s.num_sampled_edges) == len(fanouts)
    np.testing.assert_array_equal(s.edge_index, np.stack([s.row, s.col]))
    # Every sampled edge exists: row (the neighbor) is in col's list in
    # `direction`, at the position its global edge id says.
    center = node[s.col]
    nbr = node[s.row]
    if edge_ids_in_user_order:
        assert np.all(s.edge >= indptr[center]) and np.all(s.edge < indptr[center + 1])
        np.testing.assert_array_equal(indices[s.edge], nbr)
    else:  # edge ids number the store's CSR order: check membership instead
        for c, r in zip(center.tolist(), nbr.tolist()):
            assert r in indices[indptr[c] : indptr[c + 1]]
    # Per hop: centers are that hop's frontier; at most `fanout` per center.
    bounds = np.cumsum(np.concatenate([[0], s.num_sampled_nodes]))
    ebounds = np.cumsum(np.concatenate([[0], s.num_sampled_edges]))
    for hop, k in enumerate(fanouts):
        cols = s.col[ebounds[hop] : ebounds[hop + 1]]
        edges = s.edge[ebounds[hop] : ebounds[hop + 1]]
        rows = s.row[ebounds[hop] : ebounds[hop + 1]]
        assert np.all((cols >= bounds[hop]) & (cols < bounds[hop + 1]))
        # A neighbor is new at this hop or was seen before.
        assert np.all(rows < bounds[hop + 2])
        for c in np.unique(cols):
            mine = edges[cols == c]
            deg = indptr[node[c] + 1] - indptr[node[c]]
            if k == -1:
                assert len(mine) == deg
                continue
            assert len(mine) <= k
            if not replace:
                assert len(set(mine.tolist())) == len(mine), "no repeated neighbor without replacement"
                if not weighted:
                    assert len(mine) == min(k, deg)
        # Centers with edges that drew nothing must have no neighbors (unweighted).
        if not weighted:
            frontier = np.arange(bounds[hop], bounds[hop + 1])
            deg = indptr[node[frontier] + 1] - indptr[node[frontier]]
            drew = np.isin(frontier, cols)
            assert np.all(drew == (deg > 0))


@pytest.mark.parametrize("direction", ["in", "out"])
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_sample_properties(g, direction, replace, weighted):
    rng = np.random.default_rng(1)
    for trial in range(4):
        seeds = rng.integers(0, N, 30)  # with repeats
        fanouts = [[5, 3], [2, -1], [10], [1, 1, 1]][trial]
        s = g.sample_neighbors(seeds, fanouts, replace=replace, weighted=weighted, direction=direction, seed=trial, tensors=["x", "y"])
        check_sample(g, s, seeds, fanouts, direction, replace, weighted)
        if weighted:
            # Zero-weight edges are never drawn.
            w = g.edge_weights(*((s.node[s.row], s.node[s.col]) if direction == "in" else (s.node[s.col], s.node[s.row])))
            hops = np.repeat(np.arange(len(fanouts)), s.num_sampled_edges)
            sampled = np.array([fanouts[h] != -1 for h in hops], bool)
            assert np.all(w[sampled] > 0)
        # Gathered tensors are the rows of `node`.
        np.testing.assert_array_equal(s.tensors["x"], g.tensor("x", s.node))
        np.testing.assert_array_equal(s.tensors["y"], g.tensor("y", s.node))
        # Deterministic with a seed.
        t = g.sample_neighbors(seeds, fanouts, replace=replace, weighted=weighted, direction=direction, seed=trial, tensors=["x", "y"])
        for f in ("node", "row", "col", "edge", "num_sampled_nodes", "num_sampled_edges"):
            np.testing.assert_array_equal(getattr(s, f), getattr(t, f))


def test_seed_none_is_fresh_and_seed_changes_samples(g):
    seeds = np.arange(0, 5)
    a = [g.sample_neighbors(seeds, [3], seed=None).edge.tolist() for _ in range(5)]
    assert len({tuple(x) for x in a}) > 1
    b = [g.sample_neighbors(seeds, [3], seed=s).edge.tolist() for s in range(5)]
    assert len({tuple(x) for x in b}) > 1


def test_results_are_numpy_views_without_copies(g):
    s = g.sample_neighbors([0, 1], [4, 4], seed=0, tensors="x")
    assert s.row.base is not None and s.col.base is not None
    # row and col are views of edge_index: one buffer for torch.stack-free use.
    assert np.shares_memory(s.row, s.edge_index) and np.shares_memory(s.col, s.edge_index)
    assert not s.tensors["x"].flags.owndata
    assert s.tensors["x"].shape == (len(s.node), 3) and s.tensors["x"].dtype == np.float32
    assert "Sample" in repr(s)


def weighted_star(path, centers=3000, weights=(1.0, 2.0, 3.0, 0.5, 0.0, 8.0)):
    """Every center has the same in-neighbors 0..k-1 with the given weights."""
    k = len(weights)
    c = np.arange(k, k + centers)
    src = np.tile(np.arange(k), centers)
    dst = np.repeat(c, k)
    w = np.tile(np.array(weights, np.float32), centers)
    solidgraph.import_graph(path, (src, dst, w), in_edges=True)
    return solidgraph.open(path), c, np.array(weights)


@pytest.mark.parametrize("replace", [True, False])
def test_weighted_sampling_matches_the_weights(tmp_path, replace):
    stats = pytest.importorskip("scipy.stats")

    g, centers, w = weighted_star(tmp_path / "g")
    s = g.sample_neighbors(centers, [1], weighted=True, replace=replace, seed=12345)
    assert len(s.row) == len(centers)
    picked = s.node[s.row]
    counts = np.bincount(picked, minlength=len(w))
    assert counts[w == 0].sum() == 0
    p = w[w > 0] / w.sum()
    chi2, pvalue = stats.chisquare(counts[w > 0], p * len(centers))
    assert pvalue > 1e-3, (counts, p * len(centers), chi2)
    # With replacement and a large fanout, per center.
    if replace:
        s = g.sample_neighbors(centers[:2], [5000], weighted=True, replace=True, seed=7)
        counts = np.bincount(s.node[s.row[s.col == 0]], minlength=len(w))
        assert counts.sum() == 5000 and counts[w == 0].sum() == 0
        assert stats.chisquare(counts[w > 0], p * 5000).pvalue > 1e-3


def test_weighted_without_replacement_takes_all_positive_when_fanout_is_large(tmp_path):
    g, centers, w = weighted_star(tmp_path / "g", centers=10)
    s = g.sample_neighbors(centers, [100], weighted=True, seed=1)
    for c in range(len(centers)):
        assert sorted(s.node[s.row[s.col == c]].tolist()) == np.flatnonzero(w > 0).tolist()


def test_random_walks_follow_edges(g):
    indptr, indices = csr(g, "out")
    out = [set(indices[indptr[v] : indptr[v + 1]].tolist()) for v in range(N)]
    starts = np.arange(0, N, 3)
    for p, q in [(1.0, 1.0), (0.5, 2.0), (4.0, 0.25)]:
        w = g.random_walks(starts, 12, p=p, q=q, seed=3)
        assert w.shape == (len(starts), 13) and w.dtype == np.int64
        assert w[:, 0].tolist() == starts.tolist()
        for row in w.tolist():
            for a, b in zip(row, row[1:]):
                assert b in out[a] or (not out[a] and a == b)
        np.testing.assert_array_equal(w, g.random_walks(starts, 12, p=p, q=q, seed=3))
    # In-direction walks follow in-edges.
    w = g.random_walks([1, 2, 3], 5, seed=1, direction="in")
    for row in w.tolist():
        for a, b in zip(row, row[1:]):
            assert a in out[b] or a == b


def test_node2vec_bias(tmp_path):
    # A path 0-1-2 plus a triangle 1-3-4: q large keeps walks local.
    solidgraph.import_graph(tmp_path / "g", ([0, 1, 1, 3, 1], [1, 2, 3, 4, 4]), undirected=True)
    g = solidgraph.open(tmp_path / "g")
    starts = np.full(2000, 0)
    ret = g.random_walks(starts, 2, p=0.01, q=1.0, seed=1)
    assert (ret[:, 2] == 0).mean() > 0.9  # low p: go back
    far = g.random_walks(starts, 2, p=100.0, q=0.01, seed=1)
    assert (far[:, 2] == 0).mean() < 0.05


def test_saint_subgraph_is_induced(g):
    roots = [3, 50, 99]
    s = g.saint_subgraph(roots, 4, seed=2, tensors=("x",))
    node = s.node.tolist()
    assert node == sorted(set(node)) and set(roots) <= set(node)
    indptr, indices = csr(g, "out")
    want = {(a, b) for a in node for b in indices[indptr[a] : indptr[a + 1]].tolist() if b in set(node)}
    got = set(zip(s.node[s.row].tolist(), s.node[s.col].tolist()))
    assert got == want and len(s.row) == len(want)
    np.testing.assert_array_equal(indices[s.edge], s.node[s.col])
    np.testing.assert_array_equal(s.tensors["x"], g.tensor("x", s.node))


def test_degree_ordered_store_answers_in_user_ids(tmp_path, g):
    """A store renumbered at import (order="degree") samples, walks and loads
    in the user's ids: same lists, same rows, valid samples."""
    h = make_store(tmp_path / "deg", order="degree")
    ids = np.arange(N)
    for d in ("out", "in"):
        a, b = g.neighbors(ids, d, with_weights=True), h.neighbors(ids, d, with_weights=True)
        np.testing.assert_array_equal(a[0], b[0])
        for v in range(N):
            lo, hi = a[0][v], a[0][v + 1]
            assert sorted(zip(a[1][lo:hi].tolist(), a[2][lo:hi].tolist())) == sorted(zip(b[1][lo:hi].tolist(), b[2][lo:hi].tolist()))
        np.testing.assert_array_equal(g.degree(ids, d), h.degree(ids, d))
    np.testing.assert_array_equal(g.tensor("x", ids), h.tensor("x", ids))
    np.testing.assert_array_equal(g.edge_weights([0, 1, 2], [3, 4, 0]), h.edge_weights([0, 1, 2], [3, 4, 0]))
    rng = np.random.default_rng(2)
    for trial, fanouts in enumerate([[5, 3], [2, -1]]):
        seeds = rng.integers(0, N, 30)
        s = h.sample_neighbors(seeds, fanouts, seed=trial, tensors=["x"])
        check_sample(h, s, seeds, fanouts, "in", False, edge_ids_in_user_order=False)
        np.testing.assert_array_equal(s.tensors["x"], g.tensor("x", s.node))
    indptr, indices = csr(h, "out")
    w = h.random_walks(np.arange(0, N, 7), 6, seed=1)
    assert w[:, 0].tolist() == list(range(0, N, 7))
    for row in w.tolist():
        for a, b in zip(row, row[1:]):
            assert b in indices[indptr[a] : indptr[a + 1]] or (indptr[a] == indptr[a + 1] and a == b)
    sg = h.saint_subgraph([3, 50], 3, seed=2, tensors=("x",))
    assert {3, 50} <= set(sg.node.tolist())
    np.testing.assert_array_equal(sg.tensors["x"], g.tensor("x", sg.node))
    bs = batches_of(np.random.default_rng(5).permutation(N), 64)
    seen = np.concatenate([s.node[: s.num_sampled_nodes[0]] for s in h.sample_loader(bs, [3], seed=1, tensors=["x"], workers=2)])
    np.testing.assert_array_equal(seen, np.concatenate(bs))


# ---- the pipelined loader ---------------------------------------------------


def batches_of(ids, size):
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def test_loader_in_order_each_input_once_and_worker_independent(g):
    ids = np.random.default_rng(5).permutation(N)
    bs = batches_of(ids, 37)
    runs = []
    for workers, prefetch, lookahead in [(1, 1, 0), (2, 4, 16), (3, 2, 3)]:
        it = g.sample_loader(bs, [4, 3], seed=9, tensors=["x"], workers=workers, prefetch=prefetch, lookahead=lookahead)
        assert len(it) == len(bs)
        got = list(it)
        assert it.position == len(bs)
        seen = np.concatenate([s.node[: s.num_sampled_nodes[0]] for s in got])
        np.testing.assert_array_equal(seen, ids)
        for s, b in zip(got, bs):
            check_sample(g, s, b, [4, 3], "in", False)
            np.testing.assert_array_equal(s.tensors["x"], g.tensor("x", s.node))
        runs.append([(s.node.tolist(), s.edge.tolist()) for s in got])
    assert runs[0] == runs[1] == runs[2]


def test_loader_early_stop_and_empty(g):
    it = g.sample_loader(batches_of(np.arange(N), 1), [5, 5], seed=0, prefetch=8)
    next(it)
    del it  # stops and joins its threads
    assert list(g.sample_loader([], [3])) == []


def test_loader_worker_errors_are_raised_in_order(g):
    bs = [np.arange(10), np.arange(10, 20), np.array([5, N + 3]), np.arange(20, 30)]
    it = g.sample_loader(bs, [3], seed=0)
    next(it)
    next(it)
    with pytest.raises(SolidGraphError, match=f"seed {N + 3} is not in the graph"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)
    it = g.sample_loader([np.arange(3), []], [3], seed=0)
    next(it)
    with pytest.raises(SolidGraphError, match="empty seed list"):
        next(it)


def test_loader_after_fork_restarts_in_the_child(g):
    bs = batches_of(np.arange(N), 25)
    want = [s.node.tolist() for s in g.sample_loader(bs, [3, 2], seed=4, tensors="x")]
    it = g.sample_loader(bs, [3, 2], seed=4, tensors="x", workers=2, prefetch=4)
    first = [next(it).node.tolist() for _ in range(3)]
    assert first == want[:3]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: threads of the parent are gone
        code = 1
        try:
            os.close(r)
            rest = []
            for s in it:
                assert np.array_equal(s.tensors["x"], g.tensor("x", s.node))
                rest.append(s.node.tolist())
            # The graph itself works in the child too (reopened).
            deg = g.degree([0, 1, 2]).tolist()
            fresh = [s.node.tolist() for s in g.sample_loader(bs[:2], [3, 2], seed=4)]
            with os.fdopen(w, "wb") as f:
                pickle.dump((rest, deg, fresh), f)
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    rest, deg, fresh = pickle.loads(data)
    assert rest == want[3:]
    assert deg == g.degree([0, 1, 2]).tolist() and fresh == want[:2]
    # The parent's iterator goes on where it was.
    assert [s.node.tolist() for s in it] == want[3:]


# ---- bad input ----------------------------------------------------------------


def test_bad_sampling_input(tmp_path, g):
    with pytest.raises(SolidGraphError, match=f"seed {N} is not in the graph"):
        g.sample_neighbors([0, N], [3])
    with pytest.raises(SolidGraphError, match="empty seed list"):
        g.sample_neighbors([], [3])
    with pytest.raises(SolidGraphError, match="seeds must be non-negative"):
        g.sample_neighbors([-1], [3])
    with pytest.raises(SolidGraphError, match=r"fanout 0 must be -1 \(all\) or in 1..=10000"):
        g.sample_neighbors([0], [3, 0])
    with pytest.raises(SolidGraphError, match="fanout 1000000 must be"):
        g.sample_neighbors([0], [1000000])
    with pytest.raises(SolidGraphError, match="fanout 50 must be -1 \\(all\\) or in 1..=20"):
        g.sample_neighbors([0], [50], max_fanout=20)
    with pytest.raises(SolidGraphError, match="fanouts must name at least one hop"):
        g.sample_neighbors([0], [])
    with pytest.raises(SolidGraphError, match="fanouts must be a sequence of ints"):
        g.sample_neighbors([0], "ab")
    with pytest.raises(SolidGraphError, match=re.escape('no tensor named "z" (the store has: x, y)')):
        g.sample_neighbors([0], [3], tensors=["x", "z"])
    with pytest.raises(SolidGraphError, match='direction must be "out" or "in"'):
        g.sample_neighbors([0], [3], direction="up")
    with pytest.raises(SolidGraphError, match="walk length 0"):
        g.random_walks([0], 0)
    with pytest.raises(SolidGraphError, match="start vertex 400 is not in the graph"):
        g.random_walks([400], 3)
    with pytest.raises(SolidGraphError, match="p .* and q .* must be positive"):
        g.random_walks([0], 3, p=0.0)
    h = make_store(tmp_path / "h", in_edges=False, weights=False)
    with pytest.raises(SolidGraphError, match="no in edges.*in_edges=True"):
        h.sample_neighbors([0], [3])
    with pytest.raises(SolidGraphError, match="weighted sampling needs edge weights"):
        h.sample_neighbors([0], [3], direction="out", weighted=True)
    # The loader checks its options when it is made...
    with pytest.raises(SolidGraphError, match="no in edges"):
        h.sample_loader([[0]], [3])
    with pytest.raises(SolidGraphError, match="fanout 0"):
        g.sample_loader([[0]], [0])
    with pytest.raises(SolidGraphError, match="no tensor named"):
        g.sample_loader([[0]], [3], tensors=["nope"])
    with pytest.raises(SolidGraphError, match="workers .* must be at least 1"):
        g.sample_loader([[0]], [3], workers=0)
    with pytest.raises(SolidGraphError, match="lookahead 257 is over the limit of 256"):
        g.sample_loader([[0]], [3], lookahead=257)
    with pytest.raises(SolidGraphError, match="seeds must be non-negative"):
        g.sample_loader([[0], [-2]], [3])


def test_graph_pickles_as_its_path(g):
    h = pickle.loads(pickle.dumps(g))
    assert h.path == g.path and h.stats()["cache_budget"] == g.stats()["cache_budget"]
    assert h.has_in_edges and h.degree([0, 1]).tolist() == g.degree([0, 1]).tolist()



@pytest.mark.parametrize("admission", ["seen", "hot", "all"])
@pytest.mark.parametrize("row_cache_bytes", [4 << 20, 4 << 10])
def test_row_cache_gives_the_same_samples(g, admission, row_cache_bytes):
    # The same store opened with a row cache (holding every row, or a few
    # dozen: then "hot" admits only the highest-degree vertices' rows):
    # identical samples and features.
    r = solidgraph.open(g.path, cache_bytes=1 << 20, row_cache_bytes=row_cache_bytes, row_admission=admission)
    seeds = np.arange(0, 200, 3)
    for _ in range(2):
        a = g.sample_neighbors(seeds, [5, 3], seed=7, tensors=["x"])
        b = r.sample_neighbors(seeds, [5, 3], seed=7, tensors=["x"])
        np.testing.assert_array_equal(a.node, b.node)
        np.testing.assert_array_equal(a.tensors["x"], b.tensors["x"])
    np.testing.assert_array_equal(r.tensor("x", [5, 5, 9]), g.tensor("x", [5, 5, 9]))
    # The loader sampling ahead of the gather (rows announced to the row
    # cache) changes what the cache keeps, never what a batch gets.
    bs = batches_of(np.random.default_rng(2).permutation(N), 40)
    want = list(g.sample_loader(bs, [5, 3], seed=3, tensors=["x"], lookahead=0))
    for lookahead in [1, 4, 16]:
        got = list(r.sample_loader(bs, [5, 3], seed=3, tensors=["x"], lookahead=lookahead))
        for a, b in zip(want, got, strict=True):
            np.testing.assert_array_equal(a.node, b.node)
            np.testing.assert_array_equal(a.edge, b.edge)
            np.testing.assert_array_equal(a.tensors["x"], b.tensors["x"])


def test_row_admission_must_be_known(g):
    with pytest.raises(SolidGraphError, match='row_admission must be "seen", "hot" or "all"'):
        solidgraph.open(g.path, row_cache_bytes=1 << 20, row_admission="lru")


def test_row_cache_sweep_keeps_batches_and_eviction_work_linear(tmp_path):
    # A row cache much smaller than the rows a loader samples ahead is where
    # an eviction could scan the upcoming rows. From no row cache to
    # more than every row, a loader gets the same batches, and the eviction
    # hand's visits stay within the evictions plus the visited bits set
    # (each hit sets one; each announced row sets one, and every announced
    # row is gathered once: announced <= hits + misses).
    n = 3000
    rng = np.random.default_rng(5)
    src = rng.integers(0, n, 30000)
    dst = np.where(rng.random(30000) < 0.3, rng.integers(0, 30, 30000), rng.integers(0, n, 30000))
    x = rng.standard_normal((n, 16)).astype(np.float32)
    path = tmp_path / "g"
    solidgraph.import_graph(path, (src, dst), {"x": x}, undirected=True, dedup=True, num_nodes=n, order="degree")
    bs = batches_of(rng.permutation(n), 64)
    want = None
    for row_cache_bytes in [0, 8 << 10, 32 << 10, 128 << 10, 512 << 10, 8 << 20]:
        r = solidgraph.open(path, cache_bytes=64 << 10, row_cache_bytes=row_cache_bytes)
        r.reset_stats()
        got = [(b.node.copy(), b.tensors["x"].copy()) for b in r.sample_loader(bs, [10, 5], seed=9, tensors=["x"], lookahead=32)]
        if want is None:
            want = got
        for (an, ax), (bn, bx) in zip(want, got, strict=True):
            np.testing.assert_array_equal(an, bn)
            np.testing.assert_array_equal(ax, bx)
        np.testing.assert_array_equal(np.concatenate([b[1] for b in got]), x[np.concatenate([b[0] for b in got])])
        st = r.stats()
        if row_cache_bytes == 0:
            assert st["row_cache_budget"] == 0 and st["row_cache_hits"] == 0
            continue
        assert st["row_cache_misses"] > 0, st
        bound = st["row_cache_evictions"] + 2 * st["row_cache_hits"] + st["row_cache_misses"]
        assert st["row_cache_hand_steps"] <= bound, (row_cache_bytes, st)
        if row_cache_bytes == 8 << 20:
            assert st["row_cache_evictions"] == 0, st
            assert st["row_cache_misses"] <= n, st
