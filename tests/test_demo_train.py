"""The demo's training baseline (benchmarks/_demo_train.py): its numpy
memmap loader must sample what it claims, since `make demo` compares
SolidGraph against it: without replacement, min(degree, fanout) distinct
neighbors per node, every edge a real one, seeds first, features the rows
of the sampled ids."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "_demo_train.py"


def load_script():
    spec = importlib.util.spec_from_file_location("_demo_train", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write_dir(d: Path, n: int, seed: int):
    """A work directory as `solidgraph-bench sampling --prepare-only` lays
    it out (without the store): CSR files and features.npy."""
    rng = np.random.default_rng(seed)
    # Degrees from 0 to 60 around fanout 5: rows below, at and above it.
    lists = [np.sort(rng.choice(n, size=rng.integers(0, 61), replace=False)) for _ in range(n)]
    rowptr = np.zeros(n + 1, dtype=np.uint64)
    rowptr[1:] = np.cumsum([len(x) for x in lists])
    (d / "csr").mkdir(parents=True)
    rowptr.tofile(d / "csr" / "rowptr.u64")
    np.concatenate(lists).astype(np.uint32).tofile(d / "csr" / "colidx.u32")
    (d / "csr" / "meta.json").write_text(json.dumps({"nodes": n, "edges": int(rowptr[-1]), "id_bytes": 4}))
    np.save(d / "features.npy", rng.random((n, 8), dtype=np.float32))
    return lists


def test_floyd_draws_distinct_positions_below_each_degree():
    m = load_script()
    rng = np.random.default_rng(0)
    deg = np.array([5, 6, 7, 50, 1000, 10**6])
    for _ in range(200):
        out = m.floyd(deg, 5, rng)
        assert out.shape == (len(deg), 5)
        assert (out >= 0).all() and (out < deg[:, None]).all()
        assert all(len(set(row)) == 5 for row in out.tolist())
    # Every position of a degree-6 row gets drawn over many rounds.
    seen = np.concatenate([m.floyd(np.array([6]), 5, rng)[0] for _ in range(100)])
    assert set(seen.tolist()) == set(range(6))


def test_mmap_loader_batches_are_real_samples(tmp_path):
    m = load_script()
    n, k = 300, [5, 3]
    lists = write_dir(tmp_path, n, seed=1)
    data = m.Data(tmp_path)
    train = np.random.default_rng(2).choice(n, size=100, replace=False).astype(np.int64)
    loader = m.MmapLoader(data, train, k, batch_size=32, seed=3)
    feats = np.load(tmp_path / "features.npy")
    seen_seeds = []
    for b in loader:
        n_id = b.n_id.numpy()
        assert len(np.unique(n_id)) == len(n_id)
        seeds = n_id[: b.batch_size]
        seen_seeds.extend(seeds.tolist())
        np.testing.assert_array_equal(b.x.numpy(), feats[n_id])
        src, dst = b.edge_index.numpy()
        # Every sampled edge is in the graph: n_id[src] lists n_id[dst]'s neighbors.
        for s, t in zip(n_id[src], n_id[dst]):
            assert s in set(lists[t].tolist())
        # Seeds get min(degree, 5) distinct neighbors; the nodes new in hop 1
        # (the centers of hop 2's edges) min(degree, 3).
        for local, v in enumerate(seeds):
            got = n_id[src[dst == local]]
            assert len(got) == len(set(got.tolist())) == min(len(lists[v]), k[0])
        centers = np.unique(dst)
        for c in centers[centers >= b.batch_size]:
            got = n_id[src[dst == c]]
            assert len(got) == len(set(got.tolist())) == min(len(lists[n_id[c]]), k[1])
    # One epoch yields every training vertex once, in NeighborLoader's shuffled order.
    assert sorted(seen_seeds) == sorted(train.tolist())
    order = np.concatenate(m.epoch_positions(len(train), 32, 3, 0))
    assert seen_seeds == train[order].tolist()
