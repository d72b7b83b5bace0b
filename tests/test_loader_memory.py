"""The loader's memory outside the caches: the bound (`memory_bytes`,
`loader_memory`) against the measured growth of anonymous RSS, the split of
a `memory_budget`, and its errors."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import solidgraph  # noqa: E402
from solidgraph import InvalidArgumentError  # noqa: E402
from solidgraph._native import loader_memory  # noqa: E402

N = 60_000
DIM = 64


@pytest.fixture(scope="module")
def g(tmp_path_factory):
    rng = np.random.default_rng(3)
    src = rng.integers(0, N, 16 * N)
    dst = (src + rng.zipf(1.5, 16 * N)) % N
    x = rng.standard_normal((N, DIM)).astype(np.float32)
    path = tmp_path_factory.mktemp("lm") / "g.sg"
    solidgraph.import_graph(path, (src, dst), {"x": x}, in_edges=True, dedup=True, num_nodes=N)
    return solidgraph.open(path, cache_bytes=0)


def anon_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no RssAnon")


def test_bound_covers_measured_growth(g):
    from solidgraph.torch import NeighborLoader

    train = np.random.default_rng(0).choice(N, 40 * 512, replace=False)
    loader = NeighborLoader(g, train, [15, 10], batch_size=512, shuffle=True, labels=None, prefetch=4, lookahead=16)
    m = loader.memory
    assert loader.memory_bytes == m["total"] == m["buffers"] + m["working"] + m["store"]
    assert m["buffers"] == m["ahead"] + m["gathered"] + m["handed"]
    before, peak, seen = anon_bytes(), 0, 0
    for b in loader:
        peak = max(peak, anon_bytes())
        seen += b.batch_size
        assert b.x.shape == (b.num_nodes, DIM)
    assert seen == len(train)
    # Generous: the bound counts every draw as a new node.
    assert peak - before <= loader.memory_bytes, (peak - before, m)


def test_seed_degrees_tighten_the_bound_and_it_still_covers_measured_growth(tmp_path):
    """Every vertex has in-degree v % 4 (at most 3): a batch's first hop
    draws at most 3 per seed, not the fanout's 15, and the bound from the
    seeds' degrees is still above what the loader really holds."""
    from solidgraph.torch import NeighborLoader

    n = 200_000
    dst = np.repeat(np.arange(n), np.arange(n) % 4)
    src = np.random.default_rng(5).integers(0, n, len(dst))
    x = np.random.default_rng(6).standard_normal((n, DIM)).astype(np.float32)
    solidgraph.import_graph(tmp_path / "low.sg", (src, dst), {"x": x}, in_edges=True, dedup=True, num_nodes=n)
    low = solidgraph.open(tmp_path / "low.sg", cache_bytes=0)
    train = np.random.default_rng(7).choice(n, 40 * 512, replace=False)
    kw = dict(batch_size=512, fanouts=[15, 10], tensors=["x"], prefetch=4, lookahead=16)
    plain, seeded = loader_memory(low, **kw), loader_memory(low, **kw, seeds=train)
    # Per batch: 512 + 1536 + 15360 nodes at most instead of 512 + 7680 + 76800.
    assert seeded["buffers"] * 4 < plain["buffers"], (seeded, plain)
    loader = NeighborLoader(low, train, [15, 10], batch_size=512, shuffle=True, labels=None, prefetch=4, lookahead=16)
    assert loader.memory == seeded
    before, peak = anon_bytes(), 0
    for b in loader:
        peak = max(peak, anon_bytes())
        assert b.num_nodes <= 512 + 1536 + 15360
    # 1 MiB for what the bound leaves out: the Python objects and tensor
    # headers of the batches, thread-local allocator state.
    assert peak - before <= seeded["total"] + (1 << 20), (peak - before, seeded)


def test_bound_grows_with_each_knob(g):
    at = lambda **k: loader_memory(g, **{"batch_size": 256, "fanouts": [10, 5], "tensors": ["x"], **k})["total"]  # noqa: E731
    base = at()
    assert at(batch_size=512) > base and at(fanouts=[10, 10]) > base
    assert at(prefetch=8) > base and at(lookahead=64) > base and at(tensors=[]) < base
    with pytest.raises(InvalidArgumentError, match="fanout -1"):
        at(fanouts=[10, -1])


def test_budget_split_and_minimum(g):
    from solidgraph.torch import NeighborLoader

    kw = dict(batch_size=256, fanouts=[10, 5], tensors=["x"])
    with pytest.raises(InvalidArgumentError, match="minimum of") as e:
        loader_memory(g, **kw, memory_budget=1 << 20)
    minimum = int(str(e.value).split("minimum of ")[1].split(" ")[0])
    with pytest.raises(InvalidArgumentError, match=str(minimum)):
        NeighborLoader(g, np.arange(1000), [10, 5], batch_size=256, labels=None, memory_budget=minimum - 1)
    last = None
    for budget in [minimum, minimum + (16 << 20), 4 << 30]:
        p = loader_memory(g, **kw, memory_budget=budget)
        assert p["minimum"] == minimum
        assert p["cache_bytes"] + p["row_cache_bytes"] + p["total"] == budget
        assert p["cache_bytes"] >= 8 << 20
        # The cap is the least; every byte above the minimum goes to the caches.
        if last:
            assert p["buffer_bytes"] == last["buffer_bytes"] and p["row_cache_bytes"] >= last["row_cache_bytes"]
            assert p["cache_bytes"] + p["row_cache_bytes"] - last["cache_bytes"] - last["row_cache_bytes"] == budget - last_budget
        last, last_budget = p, budget


def test_budgeted_loader_gives_the_same_batches(g):
    from solidgraph.torch import NeighborLoader

    seeds = np.random.default_rng(1).choice(N, 8 * 256, replace=False)
    kw = dict(batch_size=256, labels=None, seed=11)
    free = [b.n_id.numpy() for b in NeighborLoader(g, seeds, [10, 5], **kw)]
    minimum = loader_memory(g, 256, [10, 5], ["x"], memory_budget=1 << 40)["minimum"]
    tight = NeighborLoader(g, seeds, [10, 5], memory_budget=minimum, **kw)
    got = list(tight)
    assert len(got) == len(free)
    for a, b in zip(free, got):
        np.testing.assert_array_equal(a, b.n_id.numpy())
    assert tight.memory["total"] <= minimum
    # Where the pipeline waited: every batch drawn ahead in some group, and
    # the bytes held under the cap within the bound on the buffers.
    st = tight.stats
    p = st["pipeline"]
    assert p["drawn"] == len(got) and 1 <= p["draws"] <= len(got), p
    assert 0 < p["peak_held"] <= tight.memory["buffers"], (p, tight.memory)
    assert p["cap_waits"] >= 0 and p["cap_wait_s"] >= 0 and p["consumer_wait_s"] >= 0
    # The loader's own handle, opened with the split: it read the batches.
    assert st["store"]["bytes_read"] > 0 and st["store"]["cache_budget"] > 0



def test_budgeted_loader_on_a_reordered_store_uses_the_users_ids(tmp_path):
    # The loader's own handle shares g's vertex order maps (Graph._sibling):
    # its batches must still be in the user's ids, as g's are.
    from solidgraph.torch import NeighborLoader

    rng = np.random.default_rng(4)
    n = 5_000
    src = rng.integers(0, n, 8 * n)
    dst = (src * 7 + rng.zipf(1.7, 8 * n)) % n
    x = np.arange(n, dtype=np.float32)[:, None].repeat(4, axis=1)
    path = tmp_path / "deg.sg"
    solidgraph.import_graph(path, (src, dst), {"x": x}, undirected=True, dedup=True, num_nodes=n, order="degree")
    h = solidgraph.open(path, cache_bytes=0)
    seeds = rng.choice(n, 4 * 128, replace=False)
    kw = dict(batch_size=128, labels=None, seed=5)
    free = list(NeighborLoader(h, seeds, [5, 3], **kw))
    minimum = loader_memory(h, 128, [5, 3], ["x"], memory_budget=1 << 40)["minimum"]
    got = list(NeighborLoader(h, seeds, [5, 3], memory_budget=minimum, **kw))
    assert len(got) == len(free) == 4
    for a, b in zip(free, got):
        np.testing.assert_array_equal(a.n_id.numpy(), b.n_id.numpy())
        # Row k of x holds k: features follow the user's ids.
        np.testing.assert_array_equal(b.x.numpy()[:, 0], b.n_id.numpy().astype(np.float32))
        np.testing.assert_array_equal(b.edge_index.numpy(), a.edge_index.numpy())
    sib = h._sibling(1 << 20, 0)
    for a, b in zip(sib.neighbors(seeds[:16]), h.neighbors(seeds[:16])):
        np.testing.assert_array_equal(a, b)


ALLOCATOR = """
import ctypes, sys
import solidgraph
from solidgraph._native import loader_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(f, ctypes.c_size_t) for f in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
g = solidgraph.open(sys.argv[1], cache_bytes=0)
big = bytes(30 << 20)  # freed, it lifts an unfixed threshold to 30 MiB
del big
if sys.argv[2] == "budget":
    loader_memory(g, 256, [10, 5], ["x"], memory_budget=1 << 40)
mapped = libc.mallinfo2().hblkhd
block = b"\\1" * (20 << 20)
grew = libc.mallinfo2().hblkhd - mapped
del block
print(grew, libc.mallinfo2().hblkhd - mapped)
"""


def test_budget_returns_large_freed_buffers_to_the_system(g):
    """glibc raises its mmap threshold to the largest block freed (up to 32
    MiB); past that, a batch's multi-MiB buffers come from its arenas and
    stay resident when freed, outside the budget (OOM-killed at scale 24).
    A budget fixes the threshold: a large block is mapped, and unmapped when
    freed. In a fresh process, whose heap has no free 20 MiB to serve it."""
    import ctypes
    import platform
    import subprocess
    import sys

    if platform.libc_ver()[0] != "glibc" or not hasattr(ctypes.CDLL("libc.so.6"), "mallinfo2"):
        pytest.skip("glibc 2.33 or later")
    run = lambda mode: [int(v) for v in subprocess.run([sys.executable, "-c", ALLOCATOR, str(g.path), mode], capture_output=True, text=True, check=True).stdout.split()]  # noqa: E731
    grew, after = run("budget")
    assert grew >= 20 << 20 and after == 0, (grew, after)
    # Without a budget glibc keeps its own rule: the block comes from the heap.
    grew, after = run("none")
    assert grew == 0 and after == 0, (grew, after)
