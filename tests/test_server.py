"""`solidgraph serve` and `solidgraph.connect` on loopback: every RPC against
the same call on a local store, auth, limits, deadlines, health, reflection
and metrics, concurrent clients, and crashes (SIGKILL during updates,
SIGTERM). Each test starts the server it needs (SOLIDGRAPH_BIN, or
target/release/solidgraph) on a free port and stops it."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

grpc = pytest.importorskip("grpc")

import solidgraph  # noqa: E402
from solidgraph.client import RemoteError  # noqa: E402
from solidgraph._proto import solidgraph_pb2 as pb  # noqa: E402

BIN = os.environ.get("SOLIDGRAPH_BIN", "target/release/solidgraph")
N = 400


class Server:
    """`solidgraph serve ARGS` on 127.0.0.1, port chosen by the kernel."""

    def __init__(self, *args, listen="127.0.0.1:0"):
        self.args = [str(a) for a in args]
        self.proc = subprocess.Popen([BIN, "serve", *self.args, "--listen", listen], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line!r} {self.proc.stderr.read()}")
        self.addr = line.split()[-1]

    def connect(self, **kw):
        return solidgraph.connect(self.addr, **kw)

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        self.stderr = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return code


@pytest.fixture
def serve():
    servers = []

    def start(*args, **kw):
        s = Server(*args, **kw)
        servers.append(s)
        return s

    yield start
    for s in servers:
        if s.proc.poll() is None:
            s.stop(signal.SIGKILL)


def make_store(path, seed=0, order="degree"):
    rng = np.random.default_rng(seed)
    e = 4000
    src = rng.integers(0, N, e)
    dst = np.where(rng.random(e) < 0.2, rng.integers(0, 5, e), rng.integers(0, N, e))
    w = rng.random(e).astype(np.float32)
    x = (np.arange(N)[:, None] * 10 + np.arange(3)).astype(np.float32)
    y = rng.integers(0, 7, N)
    solidgraph.import_graph(path, (src, dst), {"x": x, "y": y}, in_edges=True, dedup=True, num_nodes=N, order=order, edge_weights=w)
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("server") / "g")


def same(a, b):
    assert type(a) is type(b) or isinstance(a, np.ndarray)
    if isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    else:
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
        np.testing.assert_array_equal(a, b)


def same_sample(s, t):
    for k in ("node", "row", "col", "edge", "edge_index", "num_sampled_nodes", "num_sampled_edges"):
        same(getattr(s, k), getattr(t, k))
    assert s.tensors.keys() == t.tensors.keys()
    for k in t.tensors:
        same(s.tensors[k], t.tensors[k])


def test_every_read_equals_the_local_call(serve, store):
    srv = serve(store, "--read-only")
    r, g = srv.connect(), solidgraph.open(store)
    assert (r.num_nodes, r.num_edges, r.directed, r.has_weights, r.has_in_edges, r.has_lower_lists) == (
        g.num_nodes,
        g.num_edges,
        g.directed,
        g.has_weights,
        g.has_in_edges,
        g.has_lower_lists,
    )
    assert r.tensors == dict(g.tensors)
    ids = np.r_[np.arange(0, N, 3), [0, 0, 7]]
    for d in ("out", "in"):
        same(r.neighbors(ids, d), g.neighbors(ids, d))
        same(r.neighbors(ids, d, with_weights=True), g.neighbors(ids, d, with_weights=True))
        same(r.degree(ids, d), g.degree(ids, d))
    same(r.neighbors([]), g.neighbors([]))
    src, dst = g.neighbors([5])[1][:3], g.neighbors([5])[1][:3]
    same(r.edge_weights(np.r_[[5] * len(src), 1, 2], np.r_[dst, 3, 4]), g.edge_weights(np.r_[[5] * len(src), 1, 2], np.r_[dst, 3, 4]))
    for t in ("x", "y"):
        same(r.tensor(t, ids), g.tensor(t, ids))
    for direction, replace, weighted in (("in", False, False), ("out", True, False), ("in", False, True)):
        kw = dict(fanouts=[5, 3], direction=direction, replace=replace, weighted=weighted, seed=11, tensors=["x", "y"])
        same_sample(r.sample_neighbors(ids, **kw), g.sample_neighbors(ids, **kw))
    same_sample(r.sample_neighbors([3], [-1], seed=2), g.sample_neighbors([3], [-1], seed=2))
    same(r.random_walks(ids, 6, seed=4), g.random_walks(ids, 6, seed=4))
    same(r.random_walks(ids, 6, p=0.5, q=2.0, seed=4), g.random_walks(ids, 6, p=0.5, q=2.0, seed=4))
    batches = [np.arange(i, i + 50) for i in range(0, 300, 50)]
    remote = list(r.sample_loader(batches, [4, 2], seed=9, tensors="x", workers=3, prefetch=2))
    local = list(g.sample_loader(batches, [4, 2], seed=9, tensors="x"))
    assert len(remote) == len(local) == len(batches)
    for s, t in zip(remote, local):
        same_sample(s, t)
    with pytest.raises(solidgraph.InvalidArgumentError):
        r.add_edges([1], [2])  # served read-only


def test_large_results_stream_in_chunks(serve, store):
    """A result larger than a message arrives whole, in chunks, equal to the local one."""
    srv = serve(store, "--read-only", "--max-message", "64KiB")
    r, g = srv.connect(), solidgraph.open(store)
    ids = np.tile(np.arange(N), 30)  # 96 KB of ids: a request over the limit
    with pytest.raises(RemoteError) as e:
        r.tensor("x", ids)  # the request itself is over the limit
    # Refused before any handler runs, with gRPC's code for a size limit
    # (tonic's own OUT_OF_RANGE is rewritten) and the limit in the message.
    assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "too large" in str(e.value) and "limit is: 65536 bytes" in str(e.value)
    ids = np.tile(np.arange(N), 5)
    same(r.tensor("x", ids), g.tensor("x", ids))
    same(r.neighbors(ids), g.neighbors(ids))


def test_small_reads_of_a_warm_store_equal_the_local_calls(serve, store):
    """Once the store is warm, reads of a few vertices run on the server's
    reactor instead of its blocking pool: same results, errors included."""
    srv = serve(store, "--read-only")
    r, g = srv.connect(), solidgraph.open(store)
    end = time.monotonic() + 0.5  # the server rates warmth every 100 ms
    while time.monotonic() < end:
        r.neighbors(np.arange(0, N, 7))
    for v in range(0, N, 3):
        for d in ("out", "in"):
            same(r.neighbors([v], d), g.neighbors([v], d))
            same(r.degree([v, (v * 7) % N], d), g.degree([v, (v * 7) % N], d))
    same(r.neighbors(np.arange(16), with_weights=True), g.neighbors(np.arange(16), with_weights=True))
    with pytest.raises(solidgraph.InvalidArgumentError):
        r.neighbors([N])


def test_neighbor_loader_runs_over_the_remote_graph(serve, store):
    torch_mod = pytest.importorskip("solidgraph.torch")
    pytest.importorskip("torch")
    srv = serve(store, "--read-only")
    r, g = srv.connect(), solidgraph.open(store)
    kw = dict(input_nodes=np.arange(200), num_neighbors=[5, 3], batch_size=64, shuffle=True, seed=5, features="x", labels="y")
    remote = list(torch_mod.NeighborLoader(r, **kw))
    local = list(torch_mod.NeighborLoader(g, **kw))
    assert len(remote) == len(local) == 4
    for a, b in zip(remote, local):
        for k in ("x", "y", "edge_index", "n_id", "e_id", "input_id"):
            assert (getattr(a, k) == getattr(b, k)).all(), k


def twin(tmp_path, name):
    """The store and a copy, one for the server and one for the local reference."""
    make_store(tmp_path / name, seed=1, order="degree")
    shutil.copytree(tmp_path / name, tmp_path / f"{name}-local")
    return tmp_path / name, tmp_path / f"{name}-local"


def apply_updates(g):
    g.add_vertices(2, {"x": np.ones((2, 3), np.float32), "y": np.array([5, 6])})
    g.add_edges([1, 2, N, N + 1], [N, N + 1, 3, 3], weights=[0.5, 1.5, 2.5, 3.5])
    g.delete_edges([7], g.neighbors([7])[1][:1])
    g.update_edge_weights([1], [N], [9.0])
    g.update_tensor("x", [0, N], np.full((2, 3), 7.0))  # float64 rows, cast as locally
    g.update_tensor("y", [1], [42], durable=False)
    g.delete_vertices([11])
    g.flush()


def test_updates_equal_the_local_calls(serve, tmp_path):
    served, local = twin(tmp_path, "u")
    srv = serve(served)
    r, g = srv.connect(), solidgraph.open(local, writable=True)
    apply_updates(r)
    apply_updates(g)
    assert r.pending_updates == g.pending_updates > 0
    ids = np.r_[np.arange(N + 2)]
    ids = ids[ids != 11]
    for d in ("out", "in"):
        same(r.neighbors(ids, d, with_weights=True), g.neighbors(ids, d, with_weights=True))
    same(r.tensor("x", ids), g.tensor("x", ids))
    same(r.tensor("y", ids), g.tensor("y", ids))
    assert r.merge()["updates"] == g.merge()["updates"]
    same(r.neighbors(ids, "out", with_weights=True), g.neighbors(ids, "out", with_weights=True))
    assert r.pending_updates == 0
    assert srv.stop() == 0
    after = solidgraph.open(served)
    same(after.neighbors(ids, "in", with_weights=True), g.neighbors(ids, "in", with_weights=True))
    after.verify()


def test_bad_requests_are_refused_and_change_nothing(serve, tmp_path):
    served, _ = twin(tmp_path, "b")
    srv = serve(served, "--max-ids", "100", "--max-fanout", "20")
    r = srv.connect()
    before = r.neighbors(np.arange(100), with_weights=True)
    cases = [
        (lambda: r.neighbors([N + 5]), solidgraph.InvalidArgumentError),
        (lambda: r.neighbors([-1]), solidgraph.InvalidArgumentError),
        (lambda: r.neighbors([1], direction="sideways"), solidgraph.InvalidArgumentError),
        (lambda: r.tensor("nope", [1]), solidgraph.NotFoundError),
        (lambda: r.add_edges([1, 2], [N + 50, 3]), solidgraph.InvalidArgumentError),
        (lambda: r.add_edges([1, 2], [3]), solidgraph.InvalidArgumentError),
        (lambda: r.add_edges([1], [2], weights=[1.0, 2.0]), solidgraph.InvalidArgumentError),
        (lambda: r.update_tensor("x", [1, 2], np.ones((2, 4), np.float32)), solidgraph.InvalidArgumentError),
        (lambda: r.update_tensor("y", [1], np.ones(1, np.float32)), solidgraph.InvalidArgumentError),
        (lambda: r.delete_edges([0], [N + 9]), solidgraph.InvalidArgumentError),
        (lambda: r.delete_vertices([N + 9]), solidgraph.InvalidArgumentError),
        (lambda: r.sample_neighbors([1], [5], direction="up"), solidgraph.InvalidArgumentError),
    ]
    for call, kind in cases:
        with pytest.raises(kind) as e:
            call()
        # Some are refused by the client before sending (no code).
        assert getattr(e.value, "code", grpc.StatusCode.INVALID_ARGUMENT) in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND), e.value
        assert str(e.value)
    for call in (lambda: r.neighbors(np.arange(101)), lambda: r.sample_neighbors([1], [21]), lambda: r.add_edges(np.arange(101), np.arange(101))):
        with pytest.raises(RemoteError) as e:
            call()
        assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "limit" in str(e.value)
    # Bytes that do not match the dtype and shape, sent by hand.
    call = r._calls["Neighbors"]
    bad = pb.NeighborsRequest(ids=pb.Array(dtype="int64", shape=[3], data=b"\0" * 20))
    with pytest.raises(grpc.RpcError) as e:
        list(call(bad))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "20 bytes" in e.value.details()
    bad = pb.UpdateTensorRequest(name="x", ids=pb.Array(dtype="int64", shape=[1], data=np.int64(1).tobytes()), rows=pb.Array(dtype="float32", shape=[1, 3], data=b"\0" * 8))
    with pytest.raises(grpc.RpcError) as e:
        r._calls["UpdateTensor"](bad)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert r.pending_updates == 0
    same(r.neighbors(np.arange(100), with_weights=True), before)


def test_store_names_cannot_escape_the_served_set(serve, tmp_path):
    a, b = make_store(tmp_path / "a"), make_store(tmp_path / "b", seed=3)
    srv = serve(a, b, "--read-only")
    with pytest.raises(solidgraph.InvalidArgumentError):
        srv.connect()  # two stores: one must be named
    ra, rb = srv.connect(store="a"), srv.connect(store="b")
    same(ra.neighbors([1, 2]), solidgraph.open(a).neighbors([1, 2]))
    same(rb.neighbors([1, 2]), solidgraph.open(b).neighbors([1, 2]))
    for name in ("c", "../a", str(a), "a/", "."):
        with pytest.raises(solidgraph.NotFoundError):
            srv.connect(store=name).num_nodes


def test_auth(serve, tmp_path, store):
    tokens = tmp_path / "tokens"
    tokens.write_text("# token role\nreader-token read\nwriter-token write\n")
    served, _ = twin(tmp_path, "a")
    srv = serve(served, "--tokens", tokens)
    with pytest.raises(RemoteError) as e:
        srv.connect(store="a").num_nodes
    assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(RemoteError) as e:
        srv.connect(store="a", token="wrong").num_nodes
    assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
    reader = srv.connect(store="a", token="reader-token")
    assert reader.num_nodes == N
    with pytest.raises(RemoteError) as e:
        reader.add_edges([1], [2], weights=[1.0])
    assert e.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert reader.pending_updates == 0
    writer = srv.connect(store="a", token="writer-token")
    writer.add_edges([1], [2], weights=[1.0])
    assert reader.pending_updates == 1
    # Without --tokens only loopback addresses are served.
    p = subprocess.run([BIN, "serve", str(store), "--read-only", "--listen", "0.0.0.0:0"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and "loopback" in p.stderr
    bad = tmp_path / "bad-tokens"
    bad.write_text("t1 read\nt2 admin\n")
    p = subprocess.run([BIN, "serve", str(store), "--tokens", str(bad)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 1 and f"{bad}:2" in p.stderr


def test_deadlines(serve, store):
    srv = serve(store, "--read-only")
    r = srv.connect(store="g", timeout=1e-6)
    with pytest.raises(RemoteError) as e:
        r.sample_neighbors(np.arange(N), [-1, -1], tensors=["x"])
    # The client's deadline fires, or the server (which honours the
    # grpc-timeout it was sent) cancels first: tonic says CANCELLED.
    assert e.value.code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED)
    assert srv.connect().num_nodes == N  # and it keeps serving
    # The server's own limit cancels a call that outlives it: a long
    # PageRank checks its deadline at every iteration's report. (A sample
    # of this small store can finish inside the timer's 1 ms resolution, so
    # it proves nothing about the limit.)
    srv2 = serve(store, "--read-only", "--deadline", "0.000001")
    with pytest.raises(RemoteError) as e:
        srv2.connect(store="g").pagerank(iterations=10_000)
    assert e.value.code in (grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED)


def test_analytics_equal_the_local_calls(serve, store):
    srv = serve(store, "--read-only")
    r, g = srv.connect(), solidgraph.open(store)
    calls = [
        ("bfs", (0,), {}),
        ("bfs", (3,), {"parents": True}),
        ("bfs", (0,), {"target": 5}),
        ("wcc", (), {}),
        ("pagerank", (), {}),
        ("pagerank", (), {"damping": 0.7, "iterations": 50, "tol": 1e-6}),
        ("kcore", (), {}),
        ("sssp", (2,), {}),
        ("cdlp", (), {"iterations": 4}),
        ("lcc", (), {}),
        ("mis", (), {"seed": 3}),
    ]
    for name, args, kw in calls:
        same(getattr(r, name)(*args, **kw), getattr(g, name)(*args, **kw))
    seen = []
    r.pagerank(iterations=5, progress=lambda *a: seen.append(a))
    assert seen and all(p == "pagerank" and d <= t for p, d, t in seen)
    with pytest.raises(solidgraph.InvalidArgumentError, match="progress must be"):
        r.wcc(progress="loud")
    with pytest.raises(solidgraph.InvalidArgumentError, match="iterations"):
        r.cdlp(iterations=10**6)
    with pytest.raises(solidgraph.InvalidArgumentError, match="source vertex"):
        r.bfs(N + 5)
    with pytest.raises(solidgraph.InvalidArgumentError, match="not a vertex id"):
        r.sssp(-1)


@pytest.fixture(scope="module")
def big_store(tmp_path_factory):
    """A graph on which cdlp(iterations=10000) runs for minutes."""
    n, e = 20000, 300000
    rng = np.random.default_rng(7)
    path = tmp_path_factory.mktemp("server-big") / "big"
    solidgraph.import_graph(path, (rng.integers(0, n, e), rng.integers(0, n, e)), in_edges=True, num_nodes=n)
    return path


def served_promptly(srv, within=20.0):
    """A one-vertex read on a server with one request slot: it runs only
    once the slot is free, so it returning means earlier work has stopped."""
    t0 = time.monotonic()
    assert len(srv.connect(timeout=within).degree([0])) == 1
    return time.monotonic() - t0


def test_cancelling_analytics_stops_the_servers_work(serve, big_store):
    srv = serve(big_store, "--read-only", "--max-concurrent", "1")
    r = srv.connect()

    class Stop(Exception):
        pass

    def stop_at_first_report(phase, done, total):
        raise Stop  # the client cancels the call

    with pytest.raises(Stop):
        r.cdlp(iterations=10000, progress=stop_at_first_report)
    served_promptly(srv)
    # A cancelled call from another thread (as a KeyboardInterrupt does).
    req = pb.AnalyticsRequest(store="big", algorithm="pagerank", iterations=10000)
    call = r._calls["Analytics"](req)
    first = next(call)
    assert first.HasField("progress")
    call.cancel()
    served_promptly(srv)
    # The result of a later call is still right.
    same(r.wcc(), solidgraph.open(big_store).wcc())


def test_analytics_deadline_stops_the_servers_work(serve, big_store):
    srv = serve(big_store, "--read-only", "--max-concurrent", "1")
    with pytest.raises(RemoteError) as e:
        srv.connect(timeout=1.0).cdlp(iterations=10000)
    assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    served_promptly(srv)
    # The server's own limit stops it too, and says so.
    srv2 = serve(big_store, "--read-only", "--max-concurrent", "1", "--deadline", "1")
    with pytest.raises(RemoteError) as e:
        srv2.connect().cdlp(iterations=10000)
    assert e.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    served_promptly(srv2)


def arr(values, dtype):
    a = np.asarray(values, dtype=dtype)
    return pb.Array(dtype=dtype, shape=list(a.shape), data=a.tobytes())


def raw_update_graph(r, msgs):
    """An UpdateGraph stream of hand-made messages, errors as the client raises them."""
    from solidgraph.client import _error

    try:
        return r._calls["UpdateGraph"](iter(msgs))
    except grpc.RpcError as e:
        raise _error(e) from None


def test_update_graph_builds_a_store_equal_to_a_local_import(serve, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(3)
    e = 5000
    src, dst = rng.integers(0, N, e), rng.integers(0, N, e)
    w = rng.random(e).astype(np.float32)
    x = rng.random((N, 5)).astype(np.float32)
    y = rng.integers(0, 9, N)
    kw = dict(in_edges=True, dedup=True, num_nodes=N, order="degree")
    solidgraph.import_graph(tmp_path / "local", (src, dst), {"x": x, "y": y}, edge_weights=w, **kw)
    g = solidgraph.open(tmp_path / "local")
    srv = serve("--data-dir", data, "--max-graph-vertices", str(N))
    r = srv.connect()
    # Small chunks: many edge and tensor messages.
    b = r.update_graph("built", (src, dst, w), {"x": x, "y": y}, chunk_bytes=4096, **kw)
    assert (b.num_nodes, b.num_edges, b.has_weights, b.has_in_edges) == (g.num_nodes, g.num_edges, True, True)
    assert b.tensors == dict(g.tensors)
    ids = np.arange(N)
    for d in ("out", "in"):
        same(b.neighbors(ids, d, with_weights=True), g.neighbors(ids, d, with_weights=True))
    for t in ("x", "y"):
        same(b.tensor(t, ids), g.tensor(t, ids))
    same(b.pagerank(), g.pagerank())
    # A name in use, a name that leaves the data dir, bad chunks: refused, nothing left behind.
    with pytest.raises(RemoteError) as err:
        r.update_graph("built", (src, dst))
    assert err.value.code == grpc.StatusCode.ALREADY_EXISTS
    for bad in ("../x", ".hidden", "a/b", ""):
        with pytest.raises(solidgraph.InvalidArgumentError):
            r.update_graph(bad, (src, dst))
    one = dict(src=arr([1], "int64"), dst=arr([2], "int64"))
    with pytest.raises(solidgraph.InvalidArgumentError, match="every edge chunk or with none"):
        raw_update_graph(r, [pb.UpdateGraphRequest(name="half"), pb.UpdateGraphRequest(**one, weights=arr([1.0], "float32")), pb.UpdateGraphRequest(**one)])
    with pytest.raises(solidgraph.InvalidArgumentError, match="after chunks of"):
        rows = [pb.UpdateGraphRequest(tensor="x", rows=pb.Array(dtype="float32", shape=[1, d], data=np.zeros(d, np.float32).tobytes())) for d in (2, 3)]
        rows[0].name = "mixed"
        raw_update_graph(r, rows)
    with pytest.raises(solidgraph.InvalidArgumentError, match="do not hold"):
        raw_update_graph(r, [pb.UpdateGraphRequest(name="short", src=pb.Array(dtype="int64", shape=[2], data=b"\0" * 12), dst=arr([1, 2], "int64"))])
    # Ids or a vertex count past --max-graph-vertices: refused before the
    # build, which would otherwise lay out (self-loops, lower lists) every
    # vertex up to the id.
    for kw in (dict(), dict(num_nodes=2000)):
        with pytest.raises(RemoteError) as err:
            r.update_graph("huge", (np.array([0, 1]), np.array([1, 1 << 40])), self_loops=True, **kw)
        assert err.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert f"limit of {N} vertices" in str(err.value)
    assert sorted(p.name for p in data.iterdir()) == ["built"]
    # Restarted on the data dir, the server serves what it built.
    srv.stop()
    again = serve("--data-dir", data).connect(store="built")
    same(again.neighbors(ids), g.neighbors(ids))


def peak_rss(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def test_update_graph_spools_to_disk(serve, tmp_path):
    """UpdateGraph's chunks go to files under the data dir as they arrive,
    not into the server's memory: a 128 MiB tensor raises the server's peak
    memory by well under its size (over an upload of the same edges alone,
    which sets the import's own working memory), and builds the store a
    direct import builds; a stream broken midway, or a server killed during
    one, leaves nothing behind."""
    data = tmp_path / "data"
    data.mkdir()
    n, e = 1 << 16, 200_000
    rng = np.random.default_rng(5)
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    x = rng.random((n, 512), dtype=np.float32)
    # The edges alone, on a fresh server: the import's own working memory.
    (tmp_path / "edges").mkdir()
    alone = serve("--data-dir", tmp_path / "edges")
    before = peak_rss(alone.proc.pid)
    alone.connect().update_graph("edges", (src, dst), num_nodes=n, chunk_bytes=4 << 20)
    edges_only = peak_rss(alone.proc.pid) - before
    alone.stop()
    srv = serve("--data-dir", data)
    r = srv.connect()
    before = peak_rss(srv.proc.pid)
    b = r.update_graph("big", (src, dst), {"x": x}, num_nodes=n, chunk_bytes=4 << 20)
    grew = peak_rss(srv.proc.pid) - before - edges_only
    assert grew < x.nbytes // 2, f"the server's peak memory grew by {grew >> 20} MiB more for a {x.nbytes >> 20} MiB tensor"
    solidgraph.import_graph(tmp_path / "local", (src, dst), {"x": x}, num_nodes=n)
    g = solidgraph.open(tmp_path / "local")
    assert (b.num_nodes, b.num_edges) == (g.num_nodes, g.num_edges)
    ids = np.arange(n)
    same(b.neighbors(ids), g.neighbors(ids))
    some = rng.integers(0, n, 5000)
    same(b.tensor("x", some), g.tensor("x", some))

    class Broken(Exception):
        pass

    def broken():
        yield pb.UpdateGraphRequest(name="broken")
        yield pb.UpdateGraphRequest(src=arr(src[:1000], "int64"), dst=arr(dst[:1000], "int64"))
        yield pb.UpdateGraphRequest(tensor="x", rows=pb.Array(dtype="float32", shape=[1000, 512], data=x[:1000].tobytes()))
        raise Broken

    with pytest.raises((Broken, RemoteError, grpc.RpcError)):
        raw_update_graph(r, broken())
    for _ in range(100):  # the server sees the cancel shortly after
        if sorted(p.name for p in data.iterdir()) == ["big"]:
            break
        time.sleep(0.05)
    assert sorted(p.name for p in data.iterdir()) == ["big"]

    # Killed while spooling: the spool is there, and gone at the next start.
    hold = threading.Event()

    def held():
        yield pb.UpdateGraphRequest(name="killed")
        yield pb.UpdateGraphRequest(src=arr(src[:1000], "int64"), dst=arr(dst[:1000], "int64"))
        hold.wait(30)

    t = threading.Thread(target=lambda: pytest.raises(Exception, raw_update_graph, r, held()), daemon=True)
    t.start()
    for _ in range(200):
        if any(".partial-" in p.name for p in data.iterdir()):
            break
        time.sleep(0.05)
    assert any(p.name.startswith("killed.spool.partial-") for p in data.iterdir())
    srv.stop(signal.SIGKILL)
    hold.set()
    t.join(30)
    again = serve("--data-dir", data)
    assert sorted(p.name for p in data.iterdir()) == ["big"]
    same(again.connect(store="big").neighbors(ids[:100]), g.neighbors(ids[:100]))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_health_reflection_and_metrics(serve, store):
    port = free_port()
    srv = serve(store, "--read-only", "--metrics", f"127.0.0.1:{port}")
    ch = grpc.insecure_channel(srv.addr)
    raw = dict(request_serializer=lambda b: b, response_deserializer=lambda b: b)
    # grpc.health.v1.HealthCheckRequest{service: ""} -> HealthCheckResponse{status: SERVING (1)}
    assert ch.unary_unary("/grpc.health.v1.Health/Check", **raw)(b"", timeout=10) == b"\x08\x01"
    svc = "solidgraph.v1.Graph".encode()
    assert ch.unary_unary("/grpc.health.v1.Health/Check", **raw)(b"\x0a" + bytes([len(svc)]) + svc, timeout=10) == b"\x08\x01"
    # grpc.reflection.v1.ServerReflectionRequest{list_services: ""}
    replies = list(ch.stream_stream("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", **raw)(iter([b"\x3a\x00"]), timeout=10))
    assert b"solidgraph.v1.Graph" in replies[0] and b"solidgraph.v1.Updates" in replies[0]
    r = srv.connect()
    r.neighbors([1, 2])
    with pytest.raises(solidgraph.InvalidArgumentError):
        r.neighbors([N])
    time.sleep(1.2)  # store counters are copied every second
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    assert 'solidgraph_requests_total{method="Neighbors",code="Ok"} 1' in text
    assert 'solidgraph_requests_total{method="Neighbors",code="InvalidArgument"} 1' in text
    assert 'solidgraph_request_seconds_bucket{method="Neighbors"' in text
    assert "solidgraph_response_bytes_total" in text and "solidgraph_store_ios" in text and "solidgraph_store_page_cache_hits" in text
    assert 'solidgraph_store_wal_syncs_total{store="g"} 0' in text  # read-only: no log


def test_wal_syncs_counted_on_metrics(serve, tmp_path):
    """A durable update syncs the write-ahead log; /metrics counts it."""
    port = free_port()
    srv = serve(make_store(tmp_path / "w"), "--metrics", f"127.0.0.1:{port}")
    r = srv.connect()

    def syncs():
        time.sleep(1.2)  # store counters are copied every second
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        line = next(x for x in text.splitlines() if x.startswith('solidgraph_store_wal_syncs_total{store="w"}'))
        return int(line.split()[-1])

    before = syncs()
    r.add_edges([1, 2], [3, 4])  # durable when the reply arrives
    after = syncs()
    assert after >= before + 1
    r.add_edges([5], [6])
    assert syncs() >= after + 1
    assert "# TYPE solidgraph_store_wal_syncs_total counter" in urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def test_concurrent_clients_mixing_reads_and_writes(serve, tmp_path):
    """32 clients for 3 s: readers check lists no writer touches against the
    local store, writers add edges from vertices of their own and check
    them; no errors, and every acknowledged edge is there afterwards."""
    served, local = twin(tmp_path, "c")
    g = solidgraph.open(local)
    srv = serve(served)
    readers, writers = 24, 8
    owned = [np.arange(300 + 10 * w, 310 + 10 * w) for w in range(writers)]  # sources only writers touch
    read_ids = np.arange(0, 300)
    want = g.neighbors(read_ids, "out", with_weights=True)
    want_x = g.tensor("x", read_ids)
    stop = time.monotonic() + 3
    errors, acked = [], [[] for _ in range(writers)]
    counts = [0] * (readers + writers)

    def reader(i):
        r = srv.connect()
        rng = np.random.default_rng(i)
        try:
            while time.monotonic() < stop:
                k = rng.integers(1, 300)
                ids = rng.choice(read_ids, k)
                got = r.neighbors(ids, "out", with_weights=True)
                ptr = want[0]
                exp = [np.concatenate([w[ptr[v] : ptr[v + 1]] for v in ids]) for w in want[1:]]
                same(got[1], exp[0])
                same(got[2], exp[1])
                same(r.tensor("x", ids), want_x[ids])
                s = r.sample_neighbors(ids[:20], [3, 2], seed=i, tensors="x")
                same(s.tensors["x"], g.tensor("x", s.node))
                counts[i] += 1
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    def writer(w):
        r = srv.connect()
        rng = np.random.default_rng(100 + w)
        try:
            while time.monotonic() < stop:
                src = rng.choice(owned[w], 4)
                dst = rng.integers(0, N, 4)
                r.add_edges(src, dst, weights=np.ones(4, np.float32), durable=bool(rng.integers(0, 2)))
                acked[w].extend(zip(src.tolist(), dst.tolist()))
                counts[readers + w] += 1
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(readers)] + [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert min(counts) > 0, counts
    r = srv.connect()
    for w in range(writers):
        indptr, indices = r.neighbors(owned[w])
        have = {(int(s), int(d)) for i, s in enumerate(owned[w]) for d in indices[indptr[i] : indptr[i + 1]]}
        assert set(acked[w]) <= have
    assert srv.stop() == 0


def test_sigkill_during_updates_keeps_every_acknowledged_update(serve, tmp_path):
    served, _ = twin(tmp_path, "k")
    srv = serve(served)
    acked, stop = [], threading.Event()

    def writer(seed):
        r = srv.connect()
        rng = np.random.default_rng(seed)
        while not stop.is_set():
            src, dst = rng.integers(0, N, 8), rng.integers(0, N, 8)
            try:
                r.add_edges(src, dst, weights=np.full(8, seed, np.float32))
            except (RemoteError, solidgraph.SolidGraphError):
                return  # the server died mid-call: not acknowledged
            acked.extend(zip(src.tolist(), dst.tolist()))

    threads = [threading.Thread(target=writer, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    srv.stop(signal.SIGKILL)
    stop.set()
    for t in threads:
        t.join()
    assert len(acked) > 0
    srv2 = serve(served)
    r = srv2.connect()
    src = np.array([s for s, _ in acked])
    dst = np.array([d for _, d in acked])
    assert not np.isnan(r.edge_weights(src, dst)).any()
    assert srv2.stop() == 0
    solidgraph.open(served).verify()


def test_sigterm_loses_nothing(serve, tmp_path):
    served, _ = twin(tmp_path, "t")
    srv = serve(served)
    r = srv.connect()
    src, dst = np.arange(20), np.arange(20, 40)
    r.add_edges(src, dst, weights=np.full(20, 3.0, np.float32), durable=False)  # not synced when acknowledged
    r.update_tensor("x", [5], np.full((1, 3), -1.0, np.float32), durable=False)
    assert srv.stop(signal.SIGTERM) == 0
    assert "flushing the WAL" in srv.stderr
    g = solidgraph.open(served)
    np.testing.assert_array_equal(g.edge_weights(src, dst), np.full(20, 3.0, np.float32))
    np.testing.assert_array_equal(g.tensor("x", [5]), np.full((1, 3), -1.0, np.float32))
    g.verify()


def test_checked_in_stubs_match_the_protos(tmp_path):
    pytest.importorskip("grpc_tools")
    root = Path(__file__).resolve().parent.parent
    p = subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", f"-I{root / 'proto'}", f"--python_out={tmp_path}", f"--pyi_out={tmp_path}", str(root / "proto/solidgraph/v1/solidgraph.proto")],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr
    for f in ("solidgraph_pb2.py", "solidgraph_pb2.pyi"):
        assert (tmp_path / "solidgraph/v1" / f).read_text() == (root / "python/solidgraph/_proto" / f).read_text(), f"{f} is stale: run make protos"


def make_certs(d):
    """A CA, a server certificate for 127.0.0.1 and a client certificate, by openssl."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")

    def ssl(*args):
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True, cwd=d)

    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=test-ca")
    ext = d / "san.ext"
    ext.write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    for who in ("server", "client"):
        ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{who}.key", "-out", f"{who}.csr", "-subj", f"/CN={who}")
        ssl("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", f"{who}.pem", "-days", "2", "-extfile", ext)
    return d


def test_tls_and_mutual_tls(serve, store, tmp_path):
    c = make_certs(tmp_path)
    g = solidgraph.open(store)
    srv = serve(store, "--read-only", "--tls-cert", c / "server.pem", "--tls-key", c / "server.key")
    r = srv.connect(store="g", tls={"ca": c / "ca.pem"})
    same(r.neighbors([1, 2, 3]), g.neighbors([1, 2, 3]))
    with pytest.raises(RemoteError) as e:
        srv.connect(store="g", timeout=5).num_nodes  # plaintext to a TLS port
    assert e.value.code == grpc.StatusCode.UNAVAILABLE
    mtls = serve(store, "--read-only", "--tls-cert", c / "server.pem", "--tls-key", c / "server.key", "--tls-client-ca", c / "ca.pem")
    r = mtls.connect(store="g", tls={"ca": c / "ca.pem", "cert": c / "client.pem", "key": c / "client.key"})
    same(r.tensor("x", [4, 5]), g.tensor("x", [4, 5]))
    with pytest.raises(RemoteError) as e:
        mtls.connect(store="g", tls={"ca": c / "ca.pem"}, timeout=5).num_nodes  # no client certificate
    assert e.value.code == grpc.StatusCode.UNAVAILABLE
