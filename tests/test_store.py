"""import_graph and Graph reads on small graphs, against tests/reference.py."""

import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import solidgraph
from solidgraph import SolidGraphError
from reference import adjacency, assert_csr_matches


def random_graph(seed, n=300, e=3000, hub=0, hub_degree=2500):
    """Random edges with repeats and self-loops, plus one hub whose lists
    need several extent pages in both directions."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, e)
    dst = rng.integers(0, n, e)
    src = np.concatenate([src, np.full(hub_degree, hub), rng.integers(0, n, hub_degree)])
    dst = np.concatenate([dst, rng.integers(0, n, hub_degree), np.full(hub_degree, hub)])
    # Few distinct weights, so repeated edges also differ in weight order.
    w = rng.integers(1, 8, len(src)).astype(np.float32) / 4
    return src, dst, w


@pytest.mark.parametrize("dedup", [False, True])
def test_directed_with_in_edges_matches_reference(tmp_path, dedup):
    n = 300
    src, dst, w = random_graph(1, n)
    rep = solidgraph.import_graph(tmp_path / "g", (src, dst, w), in_edges=True, dedup=dedup, num_nodes=n)
    out = adjacency(src, dst, n, w, dedup=dedup)
    inn = adjacency(src, dst, n, w, dedup=dedup, reverse=True)
    assert rep["num_nodes"] == n and rep["input_edges"] == len(src)
    assert rep["num_edges"] == sum(map(len, out))
    assert rep["pages"] * 4096 == rep["bytes"]

    g = solidgraph.open(tmp_path / "g")
    assert (g.num_nodes, g.num_edges, g.directed, g.has_weights, g.has_labels) == (n, rep["num_edges"], True, True, False)
    ids = np.random.default_rng(2).permutation(n)
    assert_csr_matches(g.neighbors(ids, with_weights=True), ids, out, weights=True)
    assert_csr_matches(g.neighbors(ids, "in", with_weights=True), ids, inn, weights=True)
    assert g.degree(ids).tolist() == [len(out[v]) for v in ids]
    assert g.degree(ids, direction="in").tolist() == [len(inn[v]) for v in ids]
    assert g.verify()["edges"] == rep["num_edges"]


@pytest.mark.parametrize("self_loops", [False, True])
@pytest.mark.parametrize("dedup", [False, True])
def test_undirected_matches_reference(tmp_path, self_loops, dedup):
    n = 300
    src, dst, w = random_graph(3, n)
    solidgraph.import_graph(tmp_path / "g", np.stack([src, dst]), edge_weights=w, undirected=True, self_loops=self_loops, dedup=dedup)
    ref = adjacency(src, dst, n, w, undirected=True, self_loops=self_loops, dedup=dedup)
    g = solidgraph.open(tmp_path / "g")
    assert not g.directed and g.num_edges == sum(map(len, ref))
    ids = np.arange(n)
    assert_csr_matches(g.neighbors(ids, with_weights=True), ids, ref, weights=True)
    # An undirected store answers "in" with the same lists.
    assert_csr_matches(g.neighbors(ids, "in"), ids, ref)


def test_self_loops_on_vertices_without_edges(tmp_path):
    solidgraph.import_graph(tmp_path / "g", ([0, 5], [5, 0]), self_loops=True, num_nodes=8)
    g = solidgraph.open(tmp_path / "g")
    ids = list(range(8))
    assert_csr_matches(g.neighbors(ids), ids, adjacency([0, 5], [5, 0], 8, self_loops=True))
    assert g.degree(ids).tolist() == [2, 1, 1, 1, 1, 2, 1, 1]


def test_labels_and_weights_together(tmp_path):
    src, dst, w = random_graph(4, n=50, e=400, hub_degree=600)
    lab = np.random.default_rng(5).integers(0, 1 << 20, len(src)).astype(np.uint32)
    rep = solidgraph.import_graph(tmp_path / "g", (src, dst), edge_weights=w, edge_labels=lab, in_edges=True)
    g = solidgraph.open(tmp_path / "g")
    assert g.has_weights and g.has_labels
    ids = np.arange(rep["num_nodes"])
    res = g.neighbors(ids, "in", with_weights=True, with_labels=True)
    assert res[3].dtype == np.uint32
    assert_csr_matches(res, ids, adjacency(src, dst, len(ids), w, lab, reverse=True), weights=True, labels=True)
    assert_csr_matches(g.neighbors(ids, with_labels=True), ids, adjacency(src, dst, len(ids), w, lab), labels=True)


def test_every_edge_form_gives_the_same_store(tmp_path):
    src, dst, w = random_graph(6, n=40, e=300, hub_degree=10)
    n = 40
    ref = adjacency(src, dst, n, w)
    text = tmp_path / "edges.txt"
    text.write_text("# src dst weight\n" + "".join(f"{s}\t{d} {x}\n" for s, d, x in zip(src, dst, w)))
    csv = tmp_path / "edges.csv"
    csv.write_text("weight,src,dst\n" + "".join(f"{x},{s},{d}\n" for s, d, x in zip(src, dst, w)))
    np.save(tmp_path / "e.npy", np.stack([src, dst]).astype(np.int32))
    np.save(tmp_path / "et.npy", np.stack([src, dst], axis=1))
    np.save(tmp_path / "s.npy", src.astype(np.uint32))
    np.save(tmp_path / "d.npy", dst)
    forms = {
        "text": dict(edges=str(text), weights=True),
        "csv": dict(edges=csv, weights=True),
        "npy": dict(edges=tmp_path / "e.npy"),
        "npy-transposed": dict(edges=str(tmp_path / "et.npy")),
        "npy-pair": dict(edges=(tmp_path / "s.npy", str(tmp_path / "d.npy"))),
        "array": dict(edges=np.stack([src, dst]).astype(np.uint16), edge_weights=w.astype(np.float64)),
        "lists": dict(edges=(src.tolist(), dst.tolist(), w.tolist())),
    }
    ids = np.arange(n)
    for name, kw in forms.items():
        out = tmp_path / name
        solidgraph.import_graph(out, num_nodes=n, **kw)
        g = solidgraph.open(out)
        with_w = g.has_weights
        assert with_w == (name not in ("npy", "npy-transposed", "npy-pair")), name
        assert_csr_matches(g.neighbors(ids, with_weights=with_w), ids, ref, weights=with_w)


TENSOR_CASES = {
    "float32": np.random.default_rng(7).standard_normal((300, 17)).astype(np.float32),
    "float16": np.random.default_rng(8).standard_normal((300, 5)).astype(np.float16),
    "int64": np.random.default_rng(9).integers(-(1 << 62), 1 << 62, 300),
    "int32": np.random.default_rng(10).integers(-(1 << 31), 1 << 31, (300, 3)).astype(np.int32),
    "uint8": np.random.default_rng(11).integers(0, 256, (300, 4097)).astype(np.uint8),
    "bool": np.random.default_rng(12).random(300) < 0.5,
    # Rows of 12 KB straddle three pages each.
    "wide": np.random.default_rng(13).standard_normal((300, 3000)).astype(np.float32),
}


@pytest.mark.parametrize("as_file", [False, True])
def test_tensors_round_trip_every_dtype(tmp_path, as_file):
    tensors = dict(TENSOR_CASES)
    # A strided (non-contiguous) view goes in as its logical rows.
    tensors["strided"] = TENSOR_CASES["wide"][:, ::7]
    if as_file:
        for name, a in tensors.items():
            np.save(tmp_path / f"{name}.npy", a)
        tensors = {name: tmp_path / f"{name}.npy" for name in tensors}
    solidgraph.import_graph(tmp_path / "g", ([0, 1], [1, 299]), tensors)
    g = solidgraph.open(tmp_path / "g", cache_bytes=1 << 20)
    want = dict(TENSOR_CASES, strided=TENSOR_CASES["wide"][:, ::7])
    assert g.tensors == {k: (v.dtype.name, 1 if v.ndim == 1 else v.shape[1]) for k, v in want.items()}
    ids = np.random.default_rng(14).integers(0, 300, 500)  # repeats, any order
    for name, a in want.items():
        got = g.tensor(name, ids)
        assert got.dtype == a.dtype and got.shape == (len(ids),) + a.shape[1:], name
        np.testing.assert_array_equal(got, a[ids], err_msg=name)
    assert g.tensor("float32", []).shape == (0, 17)
    assert g.verify()["tensor_pages"] > 0


def test_results_are_numpy_arrays_over_engine_buffers(tmp_path):
    solidgraph.import_graph(tmp_path / "g", ([0, 0, 1], [1, 2, 2]), {"x": np.ones((3, 2), np.float32)})
    g = solidgraph.open(tmp_path / "g")
    indptr, indices = g.neighbors(np.array([0, 1], dtype=np.int32))
    x = g.tensor("x", [2])
    # Each is a view of the buffer Rust filled, not a copy made for numpy.
    for a in (indptr, indices, x):
        assert not a.flags.owndata and a.base is not None
    assert indices.tolist() == [1, 2, 2]


def test_edge_weights_nan_where_no_edge(tmp_path):
    src, dst, w = random_graph(15, n=100, e=800, hub_degree=1500)
    solidgraph.import_graph(tmp_path / "g", (src, dst, w), dedup=True)
    g = solidgraph.open(tmp_path / "g")
    ref = adjacency(src, dst, 100, w, dedup=True)
    weight = {(s, d): x for s in range(100) for d, x, _ in ref[s]}
    qs, qd = np.meshgrid(np.arange(100), np.arange(100), indexing="ij")
    got = g.edge_weights(qs.ravel(), qd.ravel())
    assert got.dtype == np.float32
    want = np.array([weight.get((s, d), np.nan) for s, d in zip(qs.ravel().tolist(), qd.ravel().tolist())], np.float32)
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got).sum() == 100 * 100 - len(weight)


def test_graph_is_shared_between_threads(tmp_path):
    src, dst, w = random_graph(16, n=2000, e=40000)
    solidgraph.import_graph(tmp_path / "g", (src, dst, w), in_edges=True)
    g = solidgraph.open(tmp_path / "g", cache_bytes=64 << 10)  # small: threads evict each other
    ref = adjacency(src, dst, 2000, w)
    # Batches of a few pages each: one batch of more pages than the cache
    # holds pins it whole, and nothing could be evicted.
    batches = [np.random.default_rng(s).integers(0, 2000, 8) for s in range(256)]
    start = threading.Barrier(8)

    def work(ids):
        return ids, g.neighbors(ids, with_weights=True)

    def first(ids):
        start.wait()
        return work(ids)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(first, batches[:8])) + list(pool.map(work, batches[8:]))
    for ids, csr in results:
        assert_csr_matches(csr, ids, ref, weights=True)
    s = g.stats()
    assert s["cache_misses"] > 0 and s["cache_evictions"] > 0 and s["cache_bytes"] <= s["cache_budget"] == 64 << 10


def test_stats_reset_and_cold_cache(tmp_path):
    solidgraph.import_graph(tmp_path / "g", ([0, 1, 2], [1, 2, 0]), {"x": np.zeros((3, 8), np.float32)})
    g = solidgraph.open(tmp_path / "g")
    g.neighbors([0, 1, 2])
    s = g.stats()
    # Opening reads the superblock and tables too: they count as pages read.
    assert s["cache_misses"] == 1 and s["pages_read"] >= 1 and s["ios"] >= 1
    g.reset_stats()
    assert g.stats()["cache_hits"] == g.stats()["ios"] == g.stats()["pages_read"] == 0
    g.neighbors([0, 1, 2])
    s = g.stats()
    assert s["cache_hits"] >= 1 and s["cache_misses"] == s["pages_read"] == s["ios"] == 0
    g.clear_cache()
    g.neighbors([0, 1, 2])
    s = g.stats()
    assert s["cache_misses"] == s["pages_read"] == 1 and s["bytes_read"] == 4096
    g.reset_stats()
    g.clear_cache()
    g.tensor("x", [0, 2])
    assert g.stats()["cache_misses"] == 1 and g.stats()["bytes_read"] == 4096


def test_progress_callback_and_report(tmp_path, capsys):
    calls = []
    solidgraph.import_graph(tmp_path / "g", ([0], [1]), in_edges=True, progress=lambda *a: calls.append(a))
    phases = [p for p, _, _ in calls]
    assert "out-edges" in phases and "in-edges" in phases
    assert all(d <= t for _, d, t in calls)
    solidgraph.import_graph(tmp_path / "h", ([0], [1]), progress=True)
    assert "solidgraph import: out-edges 1/1" in capsys.readouterr().err


def test_failing_progress_callback_does_not_abort_the_import(tmp_path, monkeypatch):
    phases = []
    solidgraph.import_graph(tmp_path / "ok", ([0], [1]), progress=lambda p, d, t: phases.append(p))
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)

    def progress(phase, done, total):
        raise RuntimeError(f"bar broke at {phase}")

    rep = solidgraph.import_graph(tmp_path / "g", ([0], [1]), progress=progress)
    assert rep["num_edges"] == 1 and solidgraph.open(tmp_path / "g").num_edges == 1
    # Reported as unraisable, not raised: the first report names the
    # import's first phase.
    assert reported and str(reported[0].exc_value) == f"bar broke at {phases[0]}"


def test_repr_and_path(tmp_path):
    solidgraph.import_graph(tmp_path / "g", ([0], [1]), {"feat": np.zeros((2, 3), np.float16)}, undirected=True, edge_weights=[2.0])
    g = solidgraph.open(str(tmp_path / "g"))
    assert g.path == tmp_path / "g"
    assert repr(g) == f'<solidgraph.Graph "{tmp_path / "g"}": 2 nodes, 2 edges, undirected, weights; tensors: feat float16[3]>'


# Bad input: a clear SolidGraphError that names what is wrong, and no store left behind.


def test_malformed_text_line_names_file_and_line(tmp_path):
    p = tmp_path / "edges.txt"
    p.write_text("# comment\n0 1\n1 two\n")
    with pytest.raises(SolidGraphError, match=re.escape(f"{p}:3:") + ".*two"):
        solidgraph.import_graph(tmp_path / "g", p)
    assert not (tmp_path / "g").exists()
    assert [x.name for x in tmp_path.iterdir()] == ["edges.txt"], "a failed import leaves nothing behind"


def test_negative_ids(tmp_path):
    p = tmp_path / "edges.txt"
    p.write_text("0 1\n-4 2\n")
    with pytest.raises(SolidGraphError, match=re.escape(f"{p}:2:") + ".*negative"):
        solidgraph.import_graph(tmp_path / "g", p)
    with pytest.raises(SolidGraphError, match="edge sources must be non-negative, not -3"):
        solidgraph.import_graph(tmp_path / "g", np.array([[0, -3], [1, 2]]))
    solidgraph.import_graph(tmp_path / "g", ([0], [1]))
    g = solidgraph.open(tmp_path / "g")
    with pytest.raises(SolidGraphError, match="ids must be non-negative, not -1"):
        g.neighbors([0, -1])
    with pytest.raises(SolidGraphError, match="dst must be non-negative"):
        g.edge_weights([0], np.array([-1], np.int8))


def test_bad_reads(tmp_path):
    solidgraph.import_graph(tmp_path / "g", ([0, 1], [1, 2]), {"x": np.zeros(3, np.int64)})
    g = solidgraph.open(tmp_path / "g")
    with pytest.raises(SolidGraphError, match=r'no tensor named "y" \(the store has: x\)'):
        g.tensor("y", [0])
    with pytest.raises(SolidGraphError, match=r"vertex 3 is out of range \(the graph has 3 vertices\)"):
        g.neighbors([0, 3])
    with pytest.raises(SolidGraphError, match="vertex 7 is out of range"):
        g.tensor("x", [7])
    with pytest.raises(SolidGraphError, match="no in edges"):
        g.neighbors([0], "in")
    with pytest.raises(SolidGraphError, match='direction must be "out" or "in"'):
        g.degree([0], "sideways")
    with pytest.raises(SolidGraphError, match="no edge weights"):
        g.neighbors([0], with_weights=True)
    with pytest.raises(SolidGraphError, match="must be integers, not float64"):
        g.neighbors(np.array([0.5]))
    with pytest.raises(SolidGraphError, match=r"must be 1-D, not shape \[1, 2\]"):
        g.degree([[0, 1]])
    assert g.neighbors([])[0].tolist() == [0]


def test_bad_imports(tmp_path):
    e = ([0, 1], [1, 2])
    with pytest.raises(SolidGraphError, match=r'tensor "y" has 3 rows but the graph has 4 vertices'):
        solidgraph.import_graph(tmp_path / "g", e, {"x": np.zeros((4, 2), np.float32), "y": np.zeros(3, np.float32)})
    with pytest.raises(SolidGraphError, match=r"dtype <f8 is not one of float32"):
        solidgraph.import_graph(tmp_path / "g", e, {"x": np.zeros(3)})
    with pytest.raises(SolidGraphError, match=r"dtype >f4"):
        solidgraph.import_graph(tmp_path / "g", e, {"x": np.zeros(3, ">f4")})
    with pytest.raises(SolidGraphError, match=r"must be 1-D or 2-D, not shape \[3, 1, 1\]"):
        solidgraph.import_graph(tmp_path / "g", e, {"x": np.zeros((3, 1, 1), np.float32)})
    with pytest.raises(SolidGraphError, match="must be a numpy array or a .npy path"):
        solidgraph.import_graph(tmp_path / "g", e, {"x": [1.0, 2.0, 3.0]})
    with pytest.raises(SolidGraphError, match="not below the declared node count 2"):
        solidgraph.import_graph(tmp_path / "g", e, num_nodes=2)
    with pytest.raises(SolidGraphError, match="dst has 1 entries but src has 2"):
        solidgraph.import_graph(tmp_path / "g", ([0, 1], [1]))
    with pytest.raises(SolidGraphError, match="weights given twice"):
        solidgraph.import_graph(tmp_path / "g", ([0], [1], [1.0]), edge_weights=[2.0])
    with pytest.raises(SolidGraphError, match=r"\(src, dst\) or \(src, dst, weights\), not 4 items"):
        solidgraph.import_graph(tmp_path / "g", ([0], [1], [1.0], [2]))
    with pytest.raises(SolidGraphError, match=r"a \(2, E\) or \(E, 2\) integer array.*shape \[3, 3\]"):
        solidgraph.import_graph(tmp_path / "g", np.zeros((3, 3), np.int64))
    with pytest.raises(SolidGraphError, match="edge_weights and edge_labels go with edges given as arrays"):
        solidgraph.import_graph(tmp_path / "g", "edges.txt", edge_weights=[1.0])
    with pytest.raises(SolidGraphError, match="progress must be a bool or a callable"):
        solidgraph.import_graph(tmp_path / "g", e, progress="yes")
    with pytest.raises(SolidGraphError, match="page size 1000"):
        solidgraph.import_graph(tmp_path / "g", e, page_size=1000)
    with pytest.raises(SolidGraphError, match=re.escape(str(tmp_path / "missing.txt"))):
        solidgraph.import_graph(tmp_path / "g", tmp_path / "missing.txt")
    with pytest.raises(SolidGraphError, match="empty input"):
        solidgraph.import_graph(tmp_path / "g", ([], []))
    assert list(tmp_path.iterdir()) == []
    solidgraph.import_graph(tmp_path / "g", e)
    with pytest.raises(SolidGraphError, match="already exists"):
        solidgraph.import_graph(tmp_path / "g", e)
    with pytest.raises(SolidGraphError, match="not a SolidGraph store"):
        solidgraph.open(tmp_path)


def test_corrupt_page_is_named(tmp_path):
    n = 2000
    src, dst, w = random_graph(17, n=n, e=20000)
    solidgraph.import_graph(tmp_path / "g", (src, dst, w), page_size=8192)
    assert solidgraph.open(tmp_path / "g").verify()["pages"] > 5
    # Flip one byte in the middle of page 5 (an adjacency page: no tensors).
    with open(tmp_path / "g" / "sg.0", "r+b") as f:
        f.seek(5 * 8192 + 4000)
        b = f.read(1)
        f.seek(5 * 8192 + 4000)
        f.write(bytes([b[0] ^ 0xFF]))
    g = solidgraph.open(tmp_path / "g", cache_bytes=0)
    with pytest.raises(SolidGraphError, match=r"page 5\b"):
        g.verify()
    with pytest.raises(SolidGraphError, match=r"page 5\b"):
        g.neighbors(np.arange(n))
