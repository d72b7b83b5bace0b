"""Hostile arguments at the Python boundary: every public function and
Graph method called with wrong dtypes, negative and huge ids,
non-contiguous, 0-d and 2-d arrays, NaN and infinities, and objects of the
wrong type (property-based, hypothesis). Each call either returns or
raises an Exception; a Rust panic (pyo3's PanicException is a
BaseException, so it is not caught) or a crash fails the test. The calls
run in a child process, so a segfault or a hang (a watchdog) fails this
test instead of killing pytest; at the end the store still verifies.
"""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("hypothesis")

CHILD = textwrap.dedent(
    r'''
    import faulthandler, os, sys
    import numpy as np
    from hypothesis import HealthCheck, given, settings, strategies as st
    import solidgraph

    faulthandler.enable()
    watchdog = float(os.environ["HOSTILE_WATCHDOG"])
    work = sys.argv[1]
    rng = np.random.default_rng(0)
    n = 200
    src, dst = rng.integers(0, n, 1500), rng.integers(0, n, 1500)
    w = rng.random(1500, dtype=np.float32)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    solidgraph.import_graph(f"{work}/g.sg", (src, dst, w), {"x": x, "y": rng.integers(0, 3, n)}, in_edges=True, dedup=True)
    g = solidgraph.open(f"{work}/g.sg", cache_bytes=1 << 20)
    wg = solidgraph.open(f"{work}/g.sg", writable=True, cache_bytes=1 << 20)

    big = [2**31, 2**32, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 10**30]
    ints = st.one_of(st.integers(-3, n + 3), st.sampled_from(big + [-b for b in big]))
    floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([float("nan"), float("inf"), -0.0, 1e308]))
    dtypes = ["i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "c8", "?", "U3", "S2", "O", ">i8", ">f4", "M8[s]"]

    @st.composite
    def arrays(draw):
        dt = draw(st.sampled_from(dtypes))
        shape = draw(st.sampled_from([(), (0,), (1,), (5,), (3, 2), (2, 2, 2), (7,)]))
        vals = draw(st.lists(st.one_of(ints, floats), min_size=1, max_size=8))
        flat = np.resize(np.array(vals, dtype=object), int(np.prod(shape)) or 0)
        try:
            a = flat.astype(dt).reshape(shape)
        except (TypeError, ValueError, OverflowError):
            a = np.zeros(shape, dtype=dt)
        if a.ndim == 1 and a.size > 2 and draw(st.booleans()):
            a = a[::2]  # non-contiguous
        if a.ndim == 2 and draw(st.booleans()):
            a = a.T  # Fortran order
        if a.size and draw(st.booleans()):
            a = a.copy()
            a.setflags(write=False)
        return a

    weird = st.one_of(
        st.none(), ints, floats, st.text(max_size=5), st.binary(max_size=5),
        st.lists(st.one_of(ints, floats, st.none(), st.text(max_size=2)), max_size=6),
        st.dictionaries(st.text(max_size=3), ints, max_size=2), st.just(object()), st.just(g),
        st.tuples(ints, ints), st.just([[1, 2], [3]]), st.just(range(-2, 3)),
    )
    hostile = st.one_of(weird, arrays())
    names = st.one_of(st.sampled_from(["x", "y", "nope", "", "x\0", "é" * 70]), hostile)
    dirs = st.one_of(st.sampled_from(["out", "in", "lower", "both", "", "OUT"]), hostile)

    def call(f, *a, **k):
        # A call that hangs shows its stack, then the child exits (watchdog).
        faulthandler.dump_traceback_later(watchdog, exit=True)
        try:
            f(*a, **k)
        except Exception:
            pass  # any Python exception is an answer; BaseException is not
        finally:
            faulthandler.cancel_dump_traceback_later()

    S = settings(max_examples=int(os.environ["HOSTILE_EXAMPLES"]), deadline=None, database=None,
                 suppress_health_check=list(HealthCheck), derandomize=True)

    @S
    @given(hostile, dirs, hostile, hostile)
    def reads(ids, d, a, b):
        call(g.neighbors, ids)
        call(g.neighbors, ids, d, weights=a)
        call(g.degree, ids, d)
        call(g.edge_weights, ids, a)
        call(g.tensor, "x", ids)
        call(g.tensor, a, ids)

    @S
    @given(hostile, hostile, hostile, hostile)
    def sampling(seeds, fanouts, a, b):
        call(g.sample_neighbors, seeds, fanouts)
        call(g.sample_neighbors, seeds, [2, 2], seed=a, tensors=b)
        call(g.sample_neighbors, [0, 1], fanouts, replace=a, weighted=b)
        call(g.random_walks, seeds, a)
        call(g.random_walks, [0, 1], 3, p=a, q=b)
        call(g.saint_subgraph, seeds, a)

    @S
    @given(hostile, hostile, hostile)
    def analytics(a, b, c):
        call(g.bfs, a)
        call(g.bfs, 0, target=a, parents=b)
        call(g.sssp, a)
        call(g.pagerank, damping=a, iterations=b, tol=c)
        call(g.cdlp, iterations=a)
        call(g.mis, seed=a)
        call(g.bfs, 0, progress=c)

    @S
    @given(hostile, hostile, hostile, hostile, hostile)
    def updates(a, b, c, d, e):
        call(wg.add_edges, a, b)
        call(wg.add_edges, [0], [1], weights=c, labels=d)
        call(wg.delete_edges, a, b)
        call(wg.update_edge_weights, a, b, c)
        call(wg.update_tensor, "x", a, c)
        call(wg.update_tensor, d, [0], np.zeros((1, 4), np.float32))
        call(wg.add_vertices, a, {"x": c})
        call(wg.add_vertices, 1, e)
        call(wg.delete_vertices, np.asarray([n + 5]) if e is None else e)

    @S
    @given(hostile, hostile, hostile, hostile)
    def module(a, b, c, d):
        call(solidgraph.import_graph, f"{work}/h.sg", a, b)
        call(solidgraph.import_graph, f"{work}/h2.sg", (np.array([0, 1]), np.array([1, 2])), {"t": c})
        call(solidgraph.import_graph, f"{work}/h3.sg", (np.array([0, 1]), np.array([1, 2])), num_nodes=d)
        call(solidgraph.open, a)
        call(solidgraph.open, f"{work}/g.sg", cache_bytes=b, row_cache_bytes=c)
        for p in ("h.sg", "h2.sg", "h3.sg"):
            import shutil
            shutil.rmtree(f"{work}/{p}", ignore_errors=True)

    for t in (reads, sampling, analytics, updates, module):
        t()
        print(t.__name__, "ok", flush=True)
    wg.merge()
    rep = solidgraph.open(f"{work}/g.sg").verify()
    print("verified", rep, flush=True)
    '''
)


def test_hostile_arguments_raise_python_exceptions_only(tmp_path):
    script = tmp_path / "hostile.py"
    script.write_text(CHILD)
    env = dict(os.environ, HOSTILE_EXAMPLES=os.environ.get("HOSTILE_EXAMPLES", "100"), HOSTILE_WATCHDOG="60")
    r = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=600, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0, f"the child died (return code {r.returncode}; negative is a signal):\n{out[-6000:]}"
    for name in ("reads", "sampling", "analytics", "updates", "module"):
        assert f"{name} ok" in r.stdout, out[-6000:]
    assert "verified" in r.stdout
