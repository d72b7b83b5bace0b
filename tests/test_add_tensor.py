"""Graph.add_tensor: a node tensor added to an existing store is written as
the store's own checksummed pages and committed by the superblock switch:
it reads back exactly (every dtype, renumbered stores, after reopening and
after a merge), the sampler gathers it, a crash mid-write leaves the store
as it was, and bad input is refused without changing anything."""

import subprocess
import sys

import numpy as np
import pytest

import solidgraph
from solidgraph import InvalidArgumentError, SolidGraphError

N, E = 3000, 20000


def graph_edges(seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, N, E), rng.integers(0, N, E)


@pytest.fixture
def store(tmp_path):
    src, dst = graph_edges()
    x = np.random.default_rng(1).standard_normal((N, 8)).astype(np.float32)
    path = tmp_path / "g"
    solidgraph.import_graph(path, (src, dst), {"x": x}, in_edges=True, dedup=True, num_nodes=N)
    return path, x


DTYPES = [np.float32, np.float16, np.int64, np.int32, np.uint8, np.bool_]


def random_rows(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(shape).astype(dtype)


def test_round_trip_every_dtype_and_after_reopen(store):
    path, x = store
    added = {}
    with solidgraph.open(path, writable=True) as g:
        # Widths whose rows straddle page boundaries, and 1-D arrays.
        for i, (dtype, dim) in enumerate(zip(DTYPES, [5, 33, 3, 1, 1001, 7])):
            a = random_rows(dtype, (N, dim) if dim > 1 or i % 2 else (N,), seed=i)
            g.add_tensor(f"t{i}", a)
            added[f"t{i}"] = a
            ids = np.random.default_rng(i).permutation(N)[:500]
            got = g.tensor(f"t{i}", ids)  # one element per row reads as 1-D
            assert got.dtype == a.dtype
            np.testing.assert_array_equal(got, a[ids].reshape(got.shape))
        np.testing.assert_array_equal(g.tensor("x", np.arange(N)), x)
    g = solidgraph.open(path)
    for name, a in added.items():
        got = g.tensor(name, np.arange(N))
        np.testing.assert_array_equal(got, a.reshape(got.shape))
    rep = g.verify()
    assert rep["tensor_pages"] > 0


def test_sampler_gathers_the_added_tensor(store):
    path, _ = store
    emb = np.arange(N * 4, dtype=np.float32).reshape(N, 4)
    with solidgraph.open(path, writable=True) as g:
        g.add_tensor("emb", emb)
    g = solidgraph.open(path)
    s = g.sample_neighbors(np.array([1, 2, 3]), [5, 5], seed=3, tensors=["emb", "x"])
    np.testing.assert_array_equal(s.tensors["emb"], emb[s.node])


def test_pending_updates_are_merged_first_and_rows_update(store):
    path, _ = store
    with solidgraph.open(path, writable=True) as g:
        g.add_edges(np.array([0]), np.array([N - 1]))
        new = g.add_vertices(2)
        emb = random_rows(np.float32, (N + 2, 3), seed=9)
        g.add_tensor("emb", emb)
        assert g.num_nodes == N + 2
        np.testing.assert_array_equal(g.tensor("emb", new), emb[new])
        g.update_tensor("emb", np.array([5]), np.ones((1, 3), np.float32))
        g.merge()
        emb[5] = 1
        np.testing.assert_array_equal(g.tensor("emb", np.arange(N + 2)), emb)
    g = solidgraph.open(path)
    np.testing.assert_array_equal(g.tensor("emb", np.arange(N + 2)), emb)
    g.verify()


def test_renumbered_store_takes_rows_in_user_order(tmp_path):
    src, dst = graph_edges(2)
    path = tmp_path / "deg"
    solidgraph.import_graph(path, (src, dst), {"x": np.zeros((N, 2), np.float32)}, order="degree", num_nodes=N)
    emb = random_rows(np.int64, (N, 2), seed=4)
    with solidgraph.open(path, writable=True) as g:
        g.add_tensor("emb", emb)
        ids = np.array([0, 17, N - 1, 5])
        np.testing.assert_array_equal(g.tensor("emb", ids), emb[ids])


def test_bad_input_changes_nothing(store):
    path, _ = store
    with solidgraph.open(path, writable=True) as g:
        with pytest.raises(InvalidArgumentError, match="2999 rows; the graph has 3000 nodes"):
            g.add_tensor("a", np.zeros((N - 1, 2), np.float32))
        with pytest.raises(InvalidArgumentError, match="float64 is not one of|<f8 is not one of"):
            g.add_tensor("a", np.zeros((N, 2), np.float64))
        with pytest.raises(InvalidArgumentError, match="1-D or 2-D"):
            g.add_tensor("a", np.zeros((N, 2, 2), np.float32))
        with pytest.raises(InvalidArgumentError, match="already has a tensor named \"x\""):
            g.add_tensor("x", np.zeros((N, 8), np.float32))
        with pytest.raises(InvalidArgumentError, match="1..=63 bytes"):
            g.add_tensor("n" * 64, np.zeros(N, np.float32))
        with pytest.raises(InvalidArgumentError, match="width 0"):
            g.add_tensor("a", np.zeros((N, 0), np.float32))
        with pytest.raises(InvalidArgumentError, match="the most its superblock has room for"):
            for i in range(40):
                g.add_tensor(f"u{i}", np.zeros(N, np.uint8))
    g = solidgraph.open(path)
    assert "a" not in g.tensors and "u0" in g.tensors and g.tensors["u0"] == ("uint8", 1)
    with pytest.raises(SolidGraphError):
        g.add_tensor("b", np.zeros(N, np.float32))  # read-only open
    g.verify()


CRASH_SCRIPT = """
import os, sys, threading, time
import numpy as np
import solidgraph
g = solidgraph.open(sys.argv[1], writable=True)
a = np.ones((int(sys.argv[2]), 256), np.float32)
print("start", flush=True)
g.add_tensor("big", a)
print("committed", flush=True)
time.sleep(60)
"""


def test_kill_9_mid_add_leaves_the_store_as_it_was(store, tmp_path):
    """A child adding a tensor (3000 x 256 f32, about 3 MiB, many volume
    writes) is killed at a random moment; after reopen the store is either
    as before or has the whole tensor, and verify passes."""
    path, x = store
    script = tmp_path / "crash.py"
    script.write_text(CRASH_SCRIPT)
    outcomes = set()
    import time

    for delay in [0.0, 0.005, 0.02, 0.05, 0.1]:
        p = subprocess.Popen([sys.executable, str(script), str(path), str(N)], stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "start"
        time.sleep(delay)
        p.kill()  # SIGKILL
        p.wait()
        g = solidgraph.open(path)
        g.verify()
        np.testing.assert_array_equal(g.tensor("x", np.arange(N)), x)
        try:
            big = g.tensor("big", np.arange(N))
        except SolidGraphError:
            outcomes.add("before")
            continue
        np.testing.assert_array_equal(big, np.ones((N, 256), np.float32))
        outcomes.add("after")
        del g
        break
    # The store works for writers again either way.
    with solidgraph.open(path, writable=True) as g:
        if "after" not in outcomes:
            g.add_tensor("big", np.ones((N, 256), np.float32))
        g.add_tensor("other", np.full(N, 7, np.int32))
    g = solidgraph.open(path)
    g.verify()
    np.testing.assert_array_equal(g.tensor("other", np.arange(N)), np.full(N, 7, np.int32))
    assert "before" in outcomes or "after" in outcomes


def test_memmapped_npy_streams_in(store, tmp_path):
    """A read-only np.load(..., mmap_mode="r") array is read in place, a
    bounded part at a time (arrays larger than memory)."""
    path, _ = store
    a = random_rows(np.float16, (N, 300), seed=11)
    np.save(tmp_path / "big.npy", a)
    m = np.load(tmp_path / "big.npy", mmap_mode="r")
    with solidgraph.open(path, writable=True) as g:
        g.add_tensor("big", m)
        np.testing.assert_array_equal(g.tensor("big", np.arange(N)), a)
