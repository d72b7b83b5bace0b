"""Array replies through shared memory (`solidgraph serve --shm`,
`connect(shm=...)`): answers equal to the inline path and to the local
calls, arrays of earlier batches intact while later calls run, slots reused
only once their arrays are gone, regions the server may not use refused
with the right status, and the inline reply whenever a slot is too small,
busy or unknown. Each test starts the server it needs on loopback."""

import os
import secrets
import signal
import threading

import numpy as np
import pytest

grpc = pytest.importorskip("grpc")

import solidgraph  # noqa: E402
from solidgraph._proto import solidgraph_pb2 as pb  # noqa: E402
from test_server import N, make_store, same, same_sample, serve, twin  # noqa: E402,F401

if not hasattr(solidgraph._native, "RemoteChannel") or not hasattr(solidgraph._native.RemoteChannel, "shm_create"):
    pytest.skip("the extension has no shared-memory client", allow_module_level=True)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("shm") / "g")


def in_shm(a):
    return type(a.base).__name__ == "_ShmSlot"


def inline(a):
    return type(a.base).__name__ == "_ReplyBuffer"


def sample(g, seeds, seed=7):
    return g.sample_neighbors(seeds, [5, 3], seed=seed, tensors=["x", "y"])


def owner(a):
    """The object at the end of an array's chain of bases."""
    while getattr(a, "base", None) is not None:
        a = a.base
    return type(a).__name__


def test_shm_replies_equal_inline_and_local(serve, store):
    srv = serve(store, "--read-only", "--shm")
    r, i, g = srv.connect(shm=True), srv.connect(shm=False), solidgraph.open(store)
    ids = np.r_[np.arange(0, N, 3), [0, 0, 7]]
    for seeds in (ids[:50], ids, np.array([3])):
        s, t, u = sample(r, seeds), sample(i, seeds), sample(g, seeds)
        same_sample(s, t)
        same_sample(s, u)
        assert in_shm(s.node) and in_shm(s.tensors["x"]) and inline(t.node)
        # row and col lie one after the other in the slot: edge_index is a
        # view over them, not a copy.
        assert owner(s.edge_index) == "_ShmSlot" and np.shares_memory(s.edge_index, s.row) and np.shares_memory(s.edge_index, s.col)
        assert s.edge_index.flags.writeable and owner(t.edge_index) == "ndarray"
    for d in ("out", "in"):
        same(r.neighbors(ids, d), g.neighbors(ids, d))
        same(r.neighbors(ids, d, with_weights=True), g.neighbors(ids, d, with_weights=True))
        same(r.degree(ids, d), g.degree(ids, d))
    x = r.tensor("x", ids)
    same(x, g.tensor("x", ids))
    assert in_shm(x) and x.flags.writeable and x.flags.aligned
    x[0, 0] = -1.0  # the caller's own array, as a local result is
    assert r.tensor("x", ids)[0, 0] == g.tensor("x", ids)[0, 0]
    same(r.neighbors([]), g.neighbors([]))
    # A tensor named twice: the same answer as in process.
    twice = r.sample_neighbors(ids, [5, 3], seed=7, tensors=["x", "x"])
    same_sample(twice, g.sample_neighbors(ids, [5, 3], seed=7, tensors=["x", "x"]))
    region, free, slots = r._native.shm_state()
    assert len(region) == 32 and slots == 8
    # The region is its connection's: another connection naming it gets
    # the reply inline, and cannot release it.
    req = pb.DegreeRequest(store=i._store, ids=pb.Array(dtype="int64", shape=[2], data=np.array([1, 2], "<i8").tobytes()))
    assert degree_chunk(i._calls["Degree"], req, f"{region}/4096/4096").data == g.degree([1, 2]).tobytes()
    i._unary("ReleaseShm", pb.ReleaseShmRequest(region=region))
    assert in_shm(r.degree([1, 2]))
    # "auto" on a loopback address takes the same path.
    a = srv.connect()
    assert in_shm(sample(a, ids).node) and a._native.shm_state() is not None
    # The client's file is gone from /dev/shm once registered.
    assert not [f for f in os.listdir("/dev/shm") if f.startswith(f"solidgraph-{os.getpid()}-")]
    native = r._native
    r.close()
    assert native.shm_state() is None


def test_earlier_batches_stay_intact(serve, store):
    srv = serve(store, "--read-only", "--shm")
    r, g = srv.connect(shm=True, shm_bytes=3 << 20, shm_slot_bytes=1 << 20), solidgraph.open(store)
    seeds = [np.arange(k, N, 7) for k in range(6)]
    held = [sample(r, s) for s in seeds[:3]]
    assert all(in_shm(h.node) for h in held)
    assert r._native.shm_state()[1] == 0  # every slot lent
    # A fourth call finds no free slot: inline, same answer.
    fourth = sample(r, seeds[3])
    assert inline(fourth.node)
    same_sample(fourth, sample(g, seeds[3]))
    for h, s in zip(held, seeds):
        same_sample(h, sample(g, s))
    # A slot comes back only when every array over it is gone.
    x = held[1].tensors["x"]
    del held[1]
    assert r._native.shm_state()[1] == 0
    del x
    assert r._native.shm_state()[1] == 1
    fifth = sample(r, seeds[4])
    assert in_shm(fifth.node)
    for h, s in zip(held, (seeds[0], seeds[2])):
        same_sample(h, sample(g, s))
    same_sample(fifth, sample(g, seeds[4]))
    del fifth
    # Threads calling at once, each result checked while the others run.
    errors = []

    def work(k):
        try:
            for j in range(10):
                s = seeds[(k + j) % len(seeds)]
                same_sample(sample(r, s, seed=j), sample(g, s, seed=j))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    for h, s in zip(held, (seeds[0], seeds[2])):
        same_sample(h, sample(g, s))
    del h
    held.clear()
    assert r._native.shm_state()[1] == 3


def test_fallback_when_too_small(serve, store):
    srv = serve(store, "--read-only", "--shm")
    r, g = srv.connect(shm=True, shm_bytes=2 * 4096, shm_slot_bytes=4096), solidgraph.open(store)
    ids = np.arange(N)
    s = sample(r, ids)
    assert inline(s.node)
    same_sample(s, sample(g, ids))
    assert r._native.shm_state()[1] == 2  # the unused slot is free again
    small = r.degree([1, 2])
    assert in_shm(small)
    same(small, g.degree([1, 2]))
    # A slot that holds the features but not the ids besides them: inline.
    want = sample(g, ids)
    rows = sum(a.nbytes for a in want.tensors.values())
    slot = (rows // 4096 + 1) * 4096
    assert slot < rows + want.node.nbytes + 3 * want.row.nbytes
    r = srv.connect(shm=True, shm_bytes=slot, shm_slot_bytes=slot)
    s = sample(r, ids)
    assert inline(s.node) and inline(s.tensors["x"])
    same_sample(s, want)
    # A slot of exactly what the reply takes, each array 64-byte aligned.
    sizes = [a.nbytes for a in (*want.tensors.values(), want.node)] + [2 * want.row.nbytes, want.edge.nbytes, 8 * 3, 8 * 3]
    laid = 0
    for n in sizes:
        laid = -(-laid // 64) * 64 + n
    slot = -(-laid // 4096) * 4096
    r = srv.connect(shm=True, shm_bytes=slot, shm_slot_bytes=slot)
    s = sample(r, ids)
    assert in_shm(s.node) and in_shm(s.tensors["y"])
    same_sample(s, want)


def test_reused_slots_hold_no_stale_rows(serve, tmp_path):
    """Rows that no page holds (vertices added since the import) read as
    zeros in a slot whose last reply left other bytes there."""
    served, local = twin(tmp_path, "stale")
    srv = serve(served, "--shm")
    r, g = srv.connect(shm=True, shm_bytes=1 << 20, shm_slot_bytes=1 << 20), solidgraph.open(local, writable=True)
    for h in (r, g):
        new = h.add_vertices(3)
        h.add_edges([1, 2, new[0], new[1]], [new[0], new[1], 3, new[2]])
        h.update_tensor("x", [new[1]], np.full((1, 3), 5.0))
    ids = np.r_[new, [0, 5], new[::-1]]
    for _ in range(3):
        full = r.tensor("x", np.arange(N))  # the one slot, filled with rows
        assert in_shm(full) and (full[1:] != 0).all()
        del full
        x = r.tensor("x", ids)
        assert in_shm(x)
        same(x, g.tensor("x", ids))
        assert (x[0] == 0).all() and (x[1] == 5).all()
        del x
        r.tensor("y", np.arange(N))
        s = r.sample_neighbors(ids, [4, 4], seed=3, tensors=["x", "y"], direction="out")
        assert in_shm(s.tensors["x"])
        same_sample(s, g.sample_neighbors(ids, [4, 4], seed=3, tensors=["x", "y"], direction="out"))
        del s


def call_through_restart(f):
    """f() once the channel has found the restarted server (the first calls
    may find the old connection gone)."""
    for _ in range(50):
        try:
            return f()
        except solidgraph.SolidGraphError as e:
            assert e.code == grpc.StatusCode.UNAVAILABLE, e
    return f()


def test_region_registered_again_after_a_restart(serve, store):
    srv = serve(store, "--read-only", "--shm")
    r, a, g = srv.connect(shm=True), srv.connect(), solidgraph.open(store)
    ids = np.arange(0, N, 3)
    before = sample(r, ids)
    assert in_shm(before.node) and in_shm(sample(a, ids).node)
    region = r._native.shm_state()[0]
    srv.stop(signal.SIGKILL)
    again = serve(store, "--read-only", "--shm", listen=srv.addr)
    # The first call names a region the new server does not hold: inline,
    # and the client drops the region.
    first = call_through_restart(lambda: sample(r, ids))
    assert inline(first.node)
    same_sample(first, sample(g, ids))
    assert r._native.shm_lost() and r._native.shm_state() is None
    # The next call registers a new region and replies through it.
    second = sample(r, ids)
    assert in_shm(second.node) and r._native.shm_state()[0] != region
    assert not r._native.shm_lost()
    same_sample(second, sample(g, ids))
    # Arrays over the old region stay intact.
    same_sample(before, sample(g, ids))
    # Restarted without --shm: "auto" goes on inline, True raises.
    again.stop(signal.SIGKILL)
    serve(store, "--read-only", listen=srv.addr)
    assert inline(call_through_restart(lambda: sample(a, ids)).node)
    s = sample(a, ids)
    assert inline(s.node) and a._native.shm_state() is None
    same_sample(s, sample(g, ids))
    assert inline(call_through_restart(lambda: sample(r, ids)).node)
    with pytest.raises(solidgraph.SolidGraphError) as e:
        sample(r, ids)
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION


def region_file(size=1 << 16, mode=0o600, cookie=None):
    path = f"/dev/shm/solidgraph-test-{secrets.token_hex(8)}"
    cookie = cookie or secrets.token_bytes(32)
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode)
    os.ftruncate(fd, size)
    os.pwrite(fd, cookie, 0)
    os.close(fd)
    os.chmod(path, mode)
    return path, cookie


def register(g, path, size, cookie):
    return g._unary("RegisterShm", pb.RegisterShmRequest(path=path, size=size, cookie=cookie))


def refused(g, path, size, cookie, code):
    with pytest.raises(solidgraph.SolidGraphError) as e:
        register(g, path, size, cookie)
    assert e.value.code == code, e.value
    return str(e.value)


def test_regions_the_server_may_not_use_are_refused(serve, store, tmp_path):
    plain = serve(store, "--read-only")
    # Without --shm: refused; "auto" stays inline, True raises.
    path, cookie = region_file()
    try:
        g = plain.connect(shm=False)
        assert "--shm" in refused(g, path, 1 << 16, cookie, grpc.StatusCode.FAILED_PRECONDITION)
        a = plain.connect()
        assert inline(a.degree([1])) and a._native.shm_state() is None
        with pytest.raises(solidgraph.SolidGraphError) as e:
            plain.connect(shm=True).degree([1])
        assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
    finally:
        os.unlink(path)

    srv = serve(store, "--read-only", "--shm")
    g = srv.connect(shm=False)
    path, cookie = region_file()
    link = f"/dev/shm/solidgraph-test-link-{secrets.token_hex(8)}"
    os.symlink(path, link)
    other, _ = region_file(cookie=cookie)
    os.chown(other, 65534, 65534)  # another user's file
    loose, _ = region_file(mode=0o644, cookie=cookie)
    disk = tmp_path / "region"
    disk.write_bytes(cookie + bytes((1 << 16) - len(cookie)))
    os.chmod(disk, 0o600)
    try:
        refused(g, link, 1 << 16, cookie, grpc.StatusCode.INVALID_ARGUMENT)  # a symlink
        refused(g, "/dev/shm", 1 << 16, cookie, grpc.StatusCode.INVALID_ARGUMENT)  # a directory
        refused(g, str(disk), 1 << 16, cookie, grpc.StatusCode.INVALID_ARGUMENT)  # not tmpfs
        refused(g, other, 1 << 16, cookie, grpc.StatusCode.FAILED_PRECONDITION)
        refused(g, loose, 1 << 16, cookie, grpc.StatusCode.FAILED_PRECONDITION)
        refused(g, path, 1 << 16, secrets.token_bytes(32), grpc.StatusCode.INVALID_ARGUMENT)  # not its cookie
        refused(g, path, 1 << 15, cookie, grpc.StatusCode.INVALID_ARGUMENT)  # not its size
        refused(g, path, 1 << 16, cookie[:8], grpc.StatusCode.INVALID_ARGUMENT)  # a short cookie
        refused(g, path, 2 << 30, cookie, grpc.StatusCode.INVALID_ARGUMENT)  # over the limit
        refused(g, "relative", 1 << 16, cookie, grpc.StatusCode.INVALID_ARGUMENT)
        region = register(g, path, 1 << 16, cookie).region
    finally:
        for p in (path, link, other, loose):
            os.unlink(p)
    # A slot outside the region, or a malformed header: INVALID_ARGUMENT.
    ref = solidgraph.open(store)
    req = pb.DegreeRequest(store=g._store, ids=pb.Array(dtype="int64", shape=[2], data=np.array([1, 2], "<i8").tobytes()))
    call = g._calls["Degree"]
    for header in (f"{region}/0/{1 << 20}", f"{region}/8/64", "x", f"{region}/a/64"):
        with pytest.raises(grpc.RpcError) as e:
            list(call(req, metadata=(("solidgraph-shm", header),)))
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, header
    # A region the server does not hold: the reply comes inline.
    unknown = secrets.token_hex(16)
    want = ref.degree([1, 2]).astype("<i8").tobytes()
    assert degree_chunk(call, req, f"{unknown}/0/4096").data == want
    # A region it holds: the reply names the slot, the data is there.
    c = degree_chunk(call, req, f"{region}/4096/4096")
    assert not c.data and c.shm.offset == 4096 and c.shm.length == 16 and list(c.shape) == [2]
    g._unary("ReleaseShm", pb.ReleaseShmRequest(region=region))
    assert degree_chunk(call, req, f"{region}/4096/4096").data == want


def degree_chunk(call, req, header):
    """The one named chunk of a Degree reply to a call with `header`."""
    msgs = [pb.Arrays.FromString(m) for m in call(req, metadata=(("solidgraph-shm", header),))]
    named = [c for m in msgs for c in m.chunks if c.name]
    assert len(named) == 1 and named[0].name == "degree"
    return named[0]
