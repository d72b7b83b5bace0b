"""Real datasets from ../shared/datasets (beside the repository checkout):
Planetoid Cora and the LDBC Graphalytics example graphs."""

from pathlib import Path

import numpy as np
import pytest

import solidgraph
from solidgraph.datasets import load_planetoid, rmat_edges
from reference import adjacency, assert_csr_matches

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
CORA = DATASETS / "planetoid" / "Cora" / "raw"
LDBC = DATASETS / "ldbc-validation" / "example"


def need(path):
    if not path.is_dir():
        pytest.skip(f"{path} is missing: check out the shared datasets as ../shared beside the repository")


def load_cora():
    """Features, labels and edges as torch_geometric's read_planetoid_data
    builds them (solidgraph.datasets reads the raw pickles with numpy only)."""
    ds = load_planetoid(CORA, "Cora")
    return ds.x, ds.y, ds.src, ds.dst


@pytest.fixture(scope="module")
def cora():
    need(CORA)
    return load_cora()


@pytest.mark.parametrize("from_files", [False, True])
def test_cora_round_trip(tmp_path, cora, from_files):
    x, y, src, dst = cora
    n = 2708
    assert x.shape == (n, 1433) and y.shape == (n,)
    ref = adjacency(src, dst, n, undirected=True, dedup=True)
    num_edges = sum(map(len, ref))
    # torch_geometric's Cora has 10556 edges: ours minus the self-loops.
    assert num_edges - sum(v in [d for d, _, _ in ref[v]] for v in range(n)) == 10556
    if from_files:
        np.save(tmp_path / "src.npy", src)
        np.save(tmp_path / "dst.npy", dst)
        np.save(tmp_path / "x.npy", x)
        np.save(tmp_path / "y.npy", y)
        edges = (tmp_path / "src.npy", tmp_path / "dst.npy")
        tensors = {"x": tmp_path / "x.npy", "y": tmp_path / "y.npy"}
    else:
        edges, tensors = (src, dst), {"x": x, "y": y}
    rep = solidgraph.import_graph(tmp_path / "cora", edges, tensors, undirected=True, dedup=True)
    assert rep["num_nodes"] == n and rep["num_edges"] == num_edges and rep["input_edges"] == len(src)

    g = solidgraph.open(tmp_path / "cora")
    assert (g.num_nodes, g.num_edges, g.directed) == (n, num_edges, False)
    assert g.tensors == {"x": ("float32", 1433), "y": ("int64", 1)}
    ids = np.random.default_rng(0).permutation(n)
    assert_csr_matches(g.neighbors(ids), ids, ref)
    np.testing.assert_array_equal(g.tensor("x", ids), x[ids])
    np.testing.assert_array_equal(g.tensor("y", ids), y[ids])
    assert np.bincount(g.tensor("y", np.arange(n))).tolist() == [351, 217, 418, 818, 426, 298, 180]
    assert g.verify()["edges"] == num_edges


def load_ldbc(name):
    """Edges of an LDBC example graph with its vertex ids mapped to 0..n-1
    in sorted order."""
    vertices = np.loadtxt(LDBC / f"{name}.v", dtype=np.int64)
    e = np.loadtxt(LDBC / f"{name}.e", dtype=np.float64, ndmin=2)
    dense = {v: i for i, v in enumerate(sorted(vertices.tolist()))}
    src = np.array([dense[int(v)] for v in e[:, 0]])
    dst = np.array([dense[int(v)] for v in e[:, 1]])
    return len(vertices), src, dst, e[:, 2].astype(np.float32)


@pytest.mark.parametrize("name", ["example-directed", "example-undirected"])
def test_ldbc_example(tmp_path, name):
    need(LDBC)
    n, src, dst, w = load_ldbc(name)
    undirected = name.endswith("undirected")
    # Import from a text file in the dense ids, as a user would.
    text = tmp_path / f"{name}.txt"
    text.write_text("".join(f"{s} {d} {x}\n" for s, d, x in zip(src, dst, w.tolist())))
    solidgraph.import_graph(tmp_path / "g", text, weights=True, in_edges=True, undirected=undirected, num_nodes=n)
    g = solidgraph.open(tmp_path / "g")
    out = adjacency(src, dst, n, w, undirected=undirected)
    inn = adjacency(src, dst, n, w, undirected=undirected, reverse=True)
    assert (g.num_nodes, g.num_edges, g.directed, g.has_weights) == (n, sum(map(len, out)), not undirected, True)
    ids = np.arange(n)
    assert_csr_matches(g.neighbors(ids, with_weights=True), ids, out, weights=True)
    assert_csr_matches(g.neighbors(ids, "in", with_weights=True), ids, inn, weights=True)
    weight = {(s, d): x for s in range(n) for d, x, _ in out[s]}
    qs, qd = (a.ravel() for a in np.meshgrid(ids, ids, indexing="ij"))
    want = np.array([weight.get(p, np.nan) for p in zip(qs.tolist(), qd.tolist())], np.float32)
    np.testing.assert_array_equal(g.edge_weights(qs, qd), want)
    if not undirected:
        # From the file itself: vertex 1 (dense 0) has "1 3 0.5" and "1 5 0.3".
        indptr, indices, weights = g.neighbors([0], with_weights=True)
        assert indices.tolist() == [2, 4] and weights.tolist() == pytest.approx([0.5, 0.3])


def test_cora_split(cora):
    ds = load_planetoid(CORA, "Cora")
    assert (ds.train_mask.sum(), ds.val_mask.sum(), ds.test_mask.sum()) == (140, 500, 1000)
    assert np.flatnonzero(ds.train_mask).tolist() == list(range(140))
    assert np.flatnonzero(ds.val_mask).tolist() == list(range(140, 640))
    assert not (ds.train_mask & ds.test_mask).any() and ds.num_classes == 7


def test_rmat_edges():
    src, dst = rmat_edges(10, edge_factor=8, seed=3)
    assert len(src) == len(dst) == 8 << 10 and src.dtype == np.int64
    assert src.min() >= 0 and max(src.max(), dst.max()) < 1 << 10
    again = rmat_edges(10, edge_factor=8, seed=3)
    np.testing.assert_array_equal(src, again[0])
    # Skewed: the top 1% of vertices hold far more than 1% of the edges.
    deg = np.sort(np.bincount(np.concatenate([src, dst]), minlength=1 << 10))[::-1]
    assert deg[:10].sum() > 0.08 * deg.sum()
