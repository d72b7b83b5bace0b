"""solidgraph.torch.NeighborLoader and the PyG remote backend
(solidgraph.pyg) against the store; skipped where torch is not installed."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import solidgraph  # noqa: E402
from solidgraph import SolidGraphError  # noqa: E402

N = 500


@pytest.fixture(scope="module")
def g(tmp_path_factory):
    path = tmp_path_factory.mktemp("torch") / "g"
    rng = np.random.default_rng(0)
    src = rng.integers(0, N, 5000)
    dst = rng.integers(0, N, 5000)
    x = rng.standard_normal((N, 8)).astype(np.float32)
    pos = rng.standard_normal((N, 2)).astype(np.float16)
    y = rng.integers(0, 4, N)
    mask = rng.random(N) < 0.3
    solidgraph.import_graph(path, (src, dst), {"x": x, "y": y, "pos": pos, "train_mask": mask}, in_edges=True, dedup=True, num_nodes=N)
    return solidgraph.open(path)


def in_lists(g):
    indptr, indices = g.neighbors(np.arange(N), "in")
    return indptr, indices


def check_batch(g, b, seeds):
    indptr, indices = in_lists(g)
    n_id = b.n_id.numpy()
    assert b.edge_index.dtype == torch.int64 and b.edge_index.shape[0] == 2
    assert b.batch_size == len(seeds) and n_id[: b.batch_size].tolist() == list(seeds)
    assert sum(b.num_sampled_nodes) == len(n_id) and sum(b.num_sampled_edges) == b.edge_index.shape[1]
    assert isinstance(b.num_sampled_nodes, list)
    np.testing.assert_array_equal(b.x.numpy(), g.tensor("x", n_id))
    np.testing.assert_array_equal(b.y.numpy(), g.tensor("y", n_id))
    row, col = b.edge_index.numpy()
    # Messages flow from the sampled neighbor (row) to the node it was drawn for (col).
    e_id = b.e_id.numpy()
    np.testing.assert_array_equal(indices[e_id], n_id[row])
    assert np.all((e_id >= indptr[n_id[col]]) & (e_id < indptr[n_id[col] + 1]))


@pytest.mark.parametrize("pyg", [True, False])
def test_neighbor_loader_epochs(g, pyg, monkeypatch):
    from solidgraph.torch import Batch, NeighborLoader

    if not pyg:
        import solidgraph.torch as st

        monkeypatch.setattr(st, "_data_class", lambda: None)
    else:
        pytest.importorskip("torch_geometric")
    train = np.flatnonzero(g.tensor("train_mask", np.arange(N)))
    loader = NeighborLoader(g, torch.from_numpy(train), [5, 3], batch_size=16, shuffle=True, seed=1, num_workers=2, prefetch=3)
    assert len(loader) == -(-len(train) // 16)
    orders = []
    for epoch in range(3):
        seen = []
        for b in loader:
            if pyg:
                from torch_geometric.data import Data

                assert isinstance(b, Data)
            else:
                assert isinstance(b, Batch) and b.num_nodes == len(b.n_id)
            seeds = train[b.input_id.numpy()]
            check_batch(g, b, seeds)
            seen.append(b.n_id[: b.batch_size].numpy())
        seen = np.concatenate(seen)
        assert sorted(seen.tolist()) == train.tolist(), "every input node once per epoch"
        orders.append(seen.tolist())
    assert orders[0] != orders[1], "reshuffled every epoch"
    # The same seed gives the same epochs.
    first = [b.n_id.tolist() for b in NeighborLoader(g, train, [5, 3], batch_size=16, shuffle=True, seed=1, num_workers=1)]
    second = [b.n_id.tolist() for b in NeighborLoader(g, train, [5, 3], batch_size=16, shuffle=True, seed=1, num_workers=3)]
    assert first == second and sum(first, [])[:16] == orders[0][:16]


def test_neighbor_loader_options(g):
    from solidgraph.torch import NeighborLoader

    mask = g.tensor("train_mask", np.arange(N))
    loader = NeighborLoader(g, mask, [4], batch_size=10, drop_last=True, features=("x", "pos"), labels=None, seed=0)
    assert len(loader) == mask.sum() // 10
    batches = list(loader)
    assert len(batches) == len(loader)
    b = batches[0]
    assert b.x.dtype == torch.float32 and b.pos.dtype == torch.float16 and "y" not in b
    np.testing.assert_array_equal(b.pos.numpy(), g.tensor("pos", b.n_id.numpy()))
    # Unshuffled: input order.
    assert b.n_id[:10].tolist() == np.flatnonzero(mask)[:10].tolist()
    all_nodes = NeighborLoader(g, None, [-1], batch_size=100)
    assert len(all_nodes) == 5
    b = next(iter(all_nodes))
    assert b.n_id[:100].tolist() == list(range(100))
    # Fanout -1 takes every in-neighbor.
    assert b.num_sampled_edges[0] == g.degree(np.arange(100), "in").sum()
    # Zero-copy: torch shares numpy's buffer.
    assert b.x.numpy().base is not None
    assert list(NeighborLoader(g, [], [3])) == []


def test_neighbor_loader_errors_reach_the_caller(g):
    from solidgraph.torch import NeighborLoader

    with pytest.raises(SolidGraphError, match="no tensor named 'feat'"):
        NeighborLoader(g, [0, 1], [3], features=("feat",))
    with pytest.raises(SolidGraphError, match="fanout 0"):
        iter(NeighborLoader(g, [0, 1], [0]))
    with pytest.raises(SolidGraphError, match="batch_size must be at least 1"):
        NeighborLoader(g, [0, 1], [3], batch_size=0)
    with pytest.raises(SolidGraphError, match="mask must have one entry per vertex"):
        NeighborLoader(g, np.ones(3, bool), [3])
    it = iter(NeighborLoader(g, [0, 1, 2, N + 5, 4], [3], batch_size=2))
    next(it)
    with pytest.raises(SolidGraphError, match=f"seed {N + 5} is not in the graph"):
        next(it)
    solidgraph.import_graph(g.path.parent / "noin", ([0, 1], [1, 2]), {"x": np.zeros((3, 2), np.float32)})
    noin = solidgraph.open(g.path.parent / "noin")
    with pytest.raises(SolidGraphError, match="no in edges"):
        iter(NeighborLoader(noin, [0], [2], labels=None))
    assert next(iter(NeighborLoader(noin, [0], [2], labels=None, direction="out"))).n_id.tolist() == [0, 1]


# ---- PyG remote backend ------------------------------------------------------


def test_feature_and_graph_store(g):
    pytest.importorskip("torch_geometric")
    from torch_geometric.data.graph_store import EdgeLayout

    from solidgraph.pyg import FeatureStore, GraphStore

    fs = FeatureStore(g)
    names = sorted(a.attr_name for a in fs.get_all_tensor_attrs())
    assert names == ["pos", "train_mask", "x", "y"]
    idx = torch.tensor([5, 1, 5, 300])
    np.testing.assert_array_equal(fs.get_tensor(group_name=None, attr_name="x", index=idx).numpy(), g.tensor("x", idx.numpy()))
    np.testing.assert_array_equal(fs.get_tensor(None, "y", None).numpy(), g.tensor("y", np.arange(N)))
    xs, ys = fs.multi_get_tensor([(None, "x", idx), (None, "y", idx)])
    np.testing.assert_array_equal(ys.numpy(), g.tensor("y", idx.numpy()))
    assert fs.get_tensor_size(None, "x") == (N, 8) and fs.get_tensor_size(None, "y") == (N,)
    assert fs.get_tensor_size(None, "nope") is None
    with pytest.raises(NotImplementedError, match="read-only"):
        fs.put_tensor(torch.zeros(3), group_name=None, attr_name="z", index=None)
    with pytest.raises(SolidGraphError, match="no tensor named"):
        FeatureStore(g, tensors=["x", "feat"])

    gs = GraphStore(g)
    layouts = [a.layout for a in gs.get_all_edge_attrs()]
    assert layouts == [EdgeLayout.CSC, EdgeLayout.CSR]
    colptr, row = gs.get_edge_index(edge_type=None, layout="csc")
    indptr, indices = in_lists(g)
    np.testing.assert_array_equal(colptr.numpy(), indptr)
    np.testing.assert_array_equal(row.numpy(), indices)
    r, c = gs.get_edge_index(edge_type=None, layout="coo")
    out = g.neighbors(np.arange(N))
    assert len(r) == g.num_edges and np.all(np.isin(c.numpy(), out[1]))
    with pytest.raises(SolidGraphError, match="more than max_edges=10: building its whole edge index in RAM"):
        GraphStore(g, max_edges=10).get_edge_index(edge_type=None, layout="csr")


@pytest.mark.parametrize("num_workers", [0, 1])
def test_pyg_node_loader_over_our_stores(g, num_workers):
    pytest.importorskip("torch_geometric")
    from torch_geometric.loader import NodeLoader

    from solidgraph.pyg import FeatureStore, GraphStore, NeighborSampler

    fs, gs = FeatureStore(g, tensors=["x", "y"]), GraphStore(g)
    train = torch.from_numpy(np.flatnonzero(g.tensor("train_mask", np.arange(N))))
    loader = NodeLoader(
        data=(fs, gs), node_sampler=NeighborSampler(g, [4, 2], seed=0), input_nodes=train, batch_size=32, shuffle=True, num_workers=num_workers
    )
    seen = []
    for b in loader:
        seeds = train[b.input_id].numpy()
        check_batch(g, b, seeds)
        seen += seeds.tolist()
    assert sorted(seen) == train.tolist()
    # A bool mask works as input too, and sampler errors surface.
    mask = torch.zeros(N, dtype=torch.bool)
    mask[[3, 7]] = True
    b = next(iter(NodeLoader(data=(fs, gs), node_sampler=NeighborSampler((fs, gs), [2]), input_nodes=mask, batch_size=4)))
    assert b.n_id[:2].tolist() == [3, 7]
    bad = NodeLoader(data=(fs, gs), node_sampler=NeighborSampler(g, [2]), input_nodes=torch.tensor([N + 1]), batch_size=4)
    with pytest.raises(SolidGraphError, match="not in the graph"):
        next(iter(bad))
