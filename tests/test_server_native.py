"""The remote client's native channel (solidgraph._native.RemoteChannel):
every array reply equal to the grpcio path's and to the local call, arrays
that are writable aligned views of the received buffers, results split over
many messages, and errors with the same classes, status codes and messages
as through grpcio. Each test starts the server it needs on loopback."""

import signal
import threading

import numpy as np
import pytest

grpc = pytest.importorskip("grpc")

import solidgraph  # noqa: E402
from solidgraph.client import RemoteError  # noqa: E402
from test_server import N, make_store, same, same_sample, serve, twin  # noqa: E402,F401

if not hasattr(solidgraph._native, "RemoteChannel"):
    pytest.skip("the extension has no native channel", allow_module_level=True)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("native") / "g")


def both(srv, **kw):
    """The native client and the grpcio one, on the same server."""
    r, o = srv.connect(**kw), srv.connect(native=False, **kw)
    assert r._native is not None and o._native is None
    return r, o


def a_view(a):
    """A writable, aligned numpy view of a reply buffer (not a copy)."""
    return a.flags.writeable and a.flags.aligned and type(a.base).__name__ == "_ReplyBuffer"


def test_array_replies_equal_grpcio_and_local(serve, store):
    srv = serve(store, "--read-only")
    (r, o), g = both(srv), solidgraph.open(store)
    ids = np.r_[np.arange(0, N, 3), [0, 0, 7]]
    for d in ("out", "in"):
        for kw in ({}, {"with_weights": True}):
            want = g.neighbors(ids, d, **kw)
            same(r.neighbors(ids, d, **kw), want)
            same(o.neighbors(ids, d, **kw), want)
        same(r.degree(ids, d), g.degree(ids, d))
        same(o.degree(ids, d), g.degree(ids, d))
    same(r.neighbors([]), g.neighbors([]))
    src, dst = np.r_[[5] * 3, 1, 2], np.r_[g.neighbors([5])[1][:3], 3, 4]
    same(r.edge_weights(src, dst), g.edge_weights(src, dst))
    for t in ("x", "y"):
        same(r.tensor(t, ids), g.tensor(t, ids))
        same(o.tensor(t, ids), g.tensor(t, ids))
    x = r.tensor("x", ids)
    assert a_view(x)
    x[0, 0] = -1.0  # the caller's own array, as a local result is
    assert r.tensor("x", ids)[0, 0] == g.tensor("x", ids)[0, 0]
    for direction, replace, weighted in (("in", False, False), ("out", True, False), ("in", False, True)):
        kw = dict(fanouts=[5, 3], direction=direction, replace=replace, weighted=weighted, seed=11, tensors=["x", "y"])
        s = r.sample_neighbors(ids, **kw)
        same_sample(s, g.sample_neighbors(ids, **kw))
        same_sample(o.sample_neighbors(ids, **kw), g.sample_neighbors(ids, **kw))
        assert a_view(s.node) and a_view(s.tensors["x"])
    same(r.random_walks(ids, 6, p=0.5, q=2.0, seed=4), g.random_walks(ids, 6, p=0.5, q=2.0, seed=4))
    batches = [np.arange(i, i + 50) for i in range(0, 300, 50)]
    remote = list(r.sample_loader(batches, [4, 2], seed=9, tensors="x", workers=3, prefetch=4))
    local = list(g.sample_loader(batches, [4, 2], seed=9, tensors="x"))
    assert len(remote) == len(local) == len(batches)
    for s, t in zip(remote, local):
        same_sample(s, t)


def test_threads_share_one_native_channel(serve, store):
    srv = serve(store, "--read-only")
    r, g = srv.connect(), solidgraph.open(store)
    want = {i: g.sample_neighbors(np.arange(i, N, 7), [4, 2], seed=i, tensors="x") for i in range(8)}
    bad = []

    def run(i):
        try:
            for _ in range(5):
                same_sample(r.sample_neighbors(np.arange(i, N, 7), [4, 2], seed=i, tensors="x"), want[i])
        except BaseException as e:  # reported below, on the test's thread
            bad.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad, bad


def test_results_over_many_messages(serve, store):
    """Arrays split over chunks of several messages are put together
    (copied once more, into an array of their own)."""
    srv = serve(store, "--read-only", "--max-message", "64KiB")
    (r, o), g = both(srv), solidgraph.open(store)
    ids = np.tile(np.arange(N), 5)
    same(r.tensor("x", ids), g.tensor("x", ids))
    same(r.neighbors(ids), g.neighbors(ids))
    same(o.neighbors(ids), g.neighbors(ids))
    kw = dict(fanouts=[-1, -1], seed=3, tensors=["x"])
    same_sample(r.sample_neighbors(np.arange(N), **kw), g.sample_neighbors(np.arange(N), **kw))
    # A message over the client's own limit is refused, as grpcio refuses it.
    small = srv.connect(max_message=1024)
    with pytest.raises(RemoteError) as e:
        small.tensor("x", ids)
    assert e.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_errors_keep_their_class_code_and_message(serve, store, tmp_path):
    srv = serve(store, "--read-only")
    r, o = both(srv)
    for call, kind, code in (
        (lambda g: g.neighbors([N]), solidgraph.InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT),
        (lambda g: g.neighbors([0], "sideways"), solidgraph.InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT),
        (lambda g: g.tensor("nope", [0]), solidgraph.NotFoundError, grpc.StatusCode.NOT_FOUND),
        (lambda g: g.sample_neighbors([0], [2], tensors=["nope"]), solidgraph.NotFoundError, grpc.StatusCode.NOT_FOUND),
    ):
        with pytest.raises(kind) as native:
            call(r)
        with pytest.raises(kind) as old:
            call(o)
        assert native.value.code == old.value.code == code
        assert str(native.value) == str(old.value)
    # Unknown store.
    with pytest.raises(solidgraph.NotFoundError) as e:
        srv.connect(store="other").neighbors([0])
    assert e.value.code == grpc.StatusCode.NOT_FOUND
    # A deadline: the client's own, or the server's cancel of the same.
    with pytest.raises(RemoteError) as e:
        srv.connect(timeout=1e-6).sample_neighbors(np.arange(N), [-1, -1], tensors=["x"])
    assert e.value.code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED)
    # Auth: no token, a wrong one, a reader's.
    tokens = tmp_path / "tokens"
    tokens.write_text("reader-token read\n")
    served, _ = twin(tmp_path, "a")
    secured = serve(served, "--tokens", tokens)
    for token in (None, "wrong"):
        with pytest.raises(RemoteError) as e:
            secured.connect(store="a", token=token).neighbors([0])
        assert e.value.code == grpc.StatusCode.UNAUTHENTICATED
    same(secured.connect(store="a", token="reader-token").neighbors([0, 1]), solidgraph.open(served).neighbors([0, 1]))
    # A server that is gone: UNAVAILABLE, as grpcio says.
    gone = r
    srv.stop(signal.SIGKILL)
    with pytest.raises(RemoteError) as e:
        gone.neighbors([0])
    assert e.value.code == grpc.StatusCode.UNAVAILABLE
