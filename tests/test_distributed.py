"""Scale-out: `solidgraph partition` and `solidgraph.distributed` over 4
shard servers on loopback, each started and stopped here. Samples, features
and NeighborLoader batches equal the single store's; the partition book
round-trips; a shard that is down, killed, or of another book is an error
naming it, within the deadline."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

grpc = pytest.importorskip("grpc")

import solidgraph  # noqa: E402
from solidgraph import distributed  # noqa: E402
from solidgraph.distributed import ShardError  # noqa: E402

BIN = os.environ.get("SOLIDGRAPH_BIN", "target/release/solidgraph")
N = 600
K = 4


class Server:
    """`solidgraph serve ARGS --read-only` on 127.0.0.1, port chosen by the kernel."""

    def __init__(self, *args):
        cmd = [BIN, "serve", *[str(a) for a in args], "--read-only", "--listen", "127.0.0.1:0"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line!r} {self.proc.stderr.read()}")
        self.addr = line.split()[-1]

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        self.proc.wait(30)
        self.proc.stdout.close()
        self.proc.stderr.close()


def shard_stores(out, k):
    d = out / f"shard-{k}"
    return sorted(d.glob("adj-*")) + [d / "rows"]


def partition(store, out, *args):
    r = subprocess.run([BIN, "partition", str(store), str(out), *[str(a) for a in args], "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def make_store(path, undirected=False):
    """Four communities of 150 vertices with a few edges between them, and hubs."""
    rng = np.random.default_rng(1)
    e = 6000
    src = rng.integers(0, N, e)
    dst = np.where(rng.random(e) < 0.9, src // 150 * 150 + rng.integers(0, 150, e), rng.integers(0, N, e))
    dst = np.where(rng.random(e) < 0.1, rng.integers(0, 4, e), dst)
    w = rng.random(e).astype(np.float32)
    x = (np.arange(N)[:, None] * 10 + np.arange(3)).astype(np.float32)
    y = rng.integers(0, 7, N)
    kw = dict(undirected=True) if undirected else dict(in_edges=True)
    solidgraph.import_graph(path, (src, dst), {"x": x, "y": y}, dedup=True, num_nodes=N, edge_weights=w, **kw)
    return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A directed store with in-edges, its 4 stream shards, one server each."""
    tmp = tmp_path_factory.mktemp("dist")
    store = make_store(tmp / "g")
    report = partition(store, tmp / "shards", "--parts", K, "--method", "stream")
    servers = [Server(*shard_stores(tmp / "shards", k)) for k in range(K)]
    yield store, tmp / "shards", servers, report
    for s in servers:
        s.stop(signal.SIGKILL)


def same_sample(s, t):
    for k in ("node", "row", "col", "edge", "num_sampled_nodes", "num_sampled_edges"):
        a, b = getattr(s, k), getattr(t, k)
        assert a.shape == b.shape, (k, a.shape, b.shape)
        np.testing.assert_array_equal(a, b, err_msg=k)
    assert s.tensors.keys() == t.tensors.keys()
    for k in t.tensors:
        assert s.tensors[k].dtype == t.tensors[k].dtype
        np.testing.assert_array_equal(s.tensors[k], t.tensors[k])


def test_report_counts_every_vertex_and_edge(cluster):
    store, out, _, r = cluster
    g = solidgraph.open(store)
    assert r["parts"] == K and r["num_nodes"] == N and r["num_edges"] == g.num_edges
    assert sum(r["shard_nodes"]) == N and sum(r["shard_edges"]) == g.num_edges
    assert 0 < r["cut_edges"] < g.num_edges and r["balance"] <= 1.05 + K / N
    book = distributed.read_book(out / "book.sgb")
    assert book.id == r["book_id"] and list(book.sizes()) == r["shard_nodes"]


def test_samples_and_features_equal_the_single_store(cluster):
    store, out, servers, _ = cluster
    g = solidgraph.open(store)
    d = distributed.connect([s.addr for s in reversed(servers)], book=out / "book.sgb", timeout=10)
    assert (d.num_nodes, d.num_edges, d.directed) == (g.num_nodes, g.num_edges, g.directed)
    assert d.tensors == dict(g.tensors)
    ids = np.r_[np.arange(0, N, 7), [0, 0, 3]]
    for t in ("x", "y"):
        np.testing.assert_array_equal(d.tensor(t, ids), g.tensor(t, ids))
    for direction in ("out", "in"):
        for got, want in zip(d.neighbors(ids, direction, with_weights=True), g.neighbors(ids, direction, with_weights=True)):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(d.degree(ids, direction), g.degree(ids, direction))
    np.testing.assert_array_equal(d.neighbors([])[0], [0])
    cases = [("in", False, False), ("out", False, False), ("in", True, False), ("out", False, True), ("in", True, True)]
    for seed, (direction, replace, weighted) in enumerate(cases):
        kw = dict(fanouts=[5, 3], direction=direction, replace=replace, weighted=weighted, seed=seed, tensors=["x", "y"])
        same_sample(d.sample_neighbors(ids, **kw), g.sample_neighbors(ids, **kw))
    same_sample(d.sample_neighbors([3, 9], [-1, 2, -1], seed=2), g.sample_neighbors([3, 9], [-1, 2, -1], seed=2))
    batches = [np.arange(i, i + 64) for i in range(0, 384, 64)]
    remote = list(d.sample_loader(batches, [4, 2], seed=9, tensors="x", prefetch=3))
    local = list(g.sample_loader(batches, [4, 2], seed=9, tensors="x"))
    assert len(remote) == len(local) == len(batches)
    for s, t in zip(remote, local):
        same_sample(s, t)
    sent, received = d.wire_bytes()
    assert 0 < sent < received
    with pytest.raises(solidgraph.InvalidArgumentError):
        d.sample_neighbors([N], [2])
    with pytest.raises(solidgraph.NotFoundError):
        d.tensor("nope", [1])
    d.close()


def test_neighbor_loader_runs_over_the_shards(cluster):
    torch_mod = pytest.importorskip("solidgraph.torch")
    torch = pytest.importorskip("torch")
    store, out, servers, _ = cluster
    d = distributed.connect([s.addr for s in servers], book=out / "book.sgb", timeout=10)
    g = solidgraph.open(store)
    kw = dict(input_nodes=np.arange(300), num_neighbors=[5, 3], batch_size=64, shuffle=True, seed=5, features="x", labels="y")
    remote = list(torch_mod.NeighborLoader(d, **kw))
    local = list(torch_mod.NeighborLoader(g, **kw))
    assert len(remote) == len(local) == 5
    for a, b in zip(remote, local):
        for k in ("x", "y", "edge_index", "n_id", "e_id", "input_id"):
            assert (getattr(a, k) == getattr(b, k)).all(), k
    # PyG's NodeLoader over the PyG backend: the same batches as the local graph's.
    pyg = pytest.importorskip("solidgraph.pyg")
    from torch_geometric.loader import NodeLoader

    def batches(graph):
        data = (pyg.FeatureStore(graph, ["x"]), pyg.GraphStore(graph))
        return list(NodeLoader(data, pyg.NeighborSampler(data, [4, 3], seed=7), input_nodes=torch.arange(100), batch_size=50))

    for a, b in zip(batches(d), batches(g)):
        for k in ("x", "edge_index", "n_id", "e_id"):
            assert (getattr(a, k) == getattr(b, k)).all(), k
    csr = pyg.GraphStore(d).get_edge_index(edge_type=None, layout="csr")
    want = pyg.GraphStore(g).get_edge_index(edge_type=None, layout="csr")
    assert all((x == y).all() for x, y in zip(csr, want))
    d.close()


def test_undirected_hash_shards_and_a_given_assignment(tmp_path):
    store = make_store(tmp_path / "u", undirected=True)
    g = solidgraph.open(store)
    want = (np.arange(N) // 150).astype(np.int64)  # the communities themselves
    np.save(tmp_path / "a.npy", want)
    given = partition(store, tmp_path / "given", "--parts", K, "--assignment", tmp_path / "a.npy")
    hashed = partition(store, tmp_path / "hash", "--parts", 2, "--method", "hash")
    assert given["cut_edges"] < hashed["cut_edges"]
    book = distributed.read_book(tmp_path / "given" / "book.sgb")
    np.testing.assert_array_equal(book.shard, want)
    np.testing.assert_array_equal(book.local, np.arange(N) % 150)
    servers = [Server(*shard_stores(tmp_path / "hash", k)) for k in range(2)]
    try:
        d = distributed.connect([s.addr for s in servers], book=tmp_path / "hash" / "book.sgb", timeout=10)
        ids = np.arange(0, N, 5)
        for direction in ("in", "out"):
            kw = dict(fanouts=[4, 4], direction=direction, seed=3, tensors="x")
            same_sample(d.sample_neighbors(ids, **kw), g.sample_neighbors(ids, **kw))
        d.close()
    finally:
        for s in servers:
            s.stop(signal.SIGKILL)


def test_bad_partition_input_changes_nothing(tmp_path, cluster):
    store = cluster[0]
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep").write_text("x")
    for args, msg in (
        (["--parts", "0"], "--parts 0"),
        (["--parts", str(N + 1)], "at most"),
    ):
        r = subprocess.run([BIN, "partition", str(store), str(tmp_path / "o"), *args], capture_output=True, text=True)
        assert r.returncode == 1 and msg in r.stderr, r.stderr
        assert not (tmp_path / "o").exists()
    r = subprocess.run([BIN, "partition", str(store), str(tmp_path / "full"), "--parts", "2"], capture_output=True, text=True)
    assert r.returncode == 1 and "not empty" in r.stderr
    assert [p.name for p in (tmp_path / "full").iterdir()] == ["keep"]
    np.save(tmp_path / "bad.npy", np.full(N, 5))
    r = subprocess.run([BIN, "partition", str(store), str(tmp_path / "o"), "--parts", "2", "--assignment", str(tmp_path / "bad.npy")], capture_output=True, text=True)
    assert r.returncode == 1 and "shard 5" in r.stderr, r.stderr
    assert not (tmp_path / "o").exists() and not list(tmp_path.glob("o.partial-*"))


def test_book_damage_is_detected(tmp_path, cluster):
    raw = bytearray((cluster[1] / "book.sgb").read_bytes())
    raw[100] ^= 1
    (tmp_path / "bad.sgb").write_bytes(bytes(raw))
    with pytest.raises(solidgraph.CorruptionError, match="checksum"):
        distributed.read_book(tmp_path / "bad.sgb")


def test_shard_faults_name_the_shard(tmp_path, cluster):
    store, out, servers, _ = cluster
    book = out / "book.sgb"
    # A shard missing from the list, and a server that is not there.
    with pytest.raises(ShardError, match="no server given for shard"):
        distributed.connect([s.addr for s in servers[:3]], book=book, timeout=5)
    t0 = time.monotonic()
    with pytest.raises(ShardError, match="127.0.0.1:1"):
        distributed.connect([s.addr for s in servers[:3]] + ["127.0.0.1:1"], book=book, timeout=5)
    assert time.monotonic() - t0 < 10
    # A shard of another book (same store, hash partition).
    partition(store, tmp_path / "other", "--parts", K, "--method", "hash")
    other = Server(*shard_stores(tmp_path / "other", 2))
    try:
        with pytest.raises(ShardError, match="serves shard 2 of book") as e:
            distributed.connect([s.addr for s in servers[:2]] + [other.addr, servers[3].addr], book=book, timeout=5)
        assert e.value.addr == other.addr
    finally:
        other.stop(signal.SIGKILL)
    # A shard killed after connecting: the next sample names it, no hang.
    extra = Server(*shard_stores(out, 1))
    d = distributed.connect([servers[0].addr, extra.addr, servers[2].addr, servers[3].addr], book=book, timeout=5)
    d.sample_neighbors(np.arange(50), [3, 3], seed=1)
    extra.stop(signal.SIGKILL)
    t0 = time.monotonic()
    with pytest.raises(ShardError, match=f"shard 1 at {extra.addr}") as e:
        d.sample_neighbors(np.arange(50), [3, 3], seed=1, tensors="x")
    assert e.value.shard == 1 and time.monotonic() - t0 < 10
    d.close()


def test_metis_assignment_through_the_console_script(tmp_path, cluster):
    """`solidgraph partition --method metis` as the console script runs it:
    pymetis's assignment handed to the Rust partitioner."""
    pytest.importorskip("pymetis")
    from solidgraph.cli import _metis_args

    store = cluster[0]
    args = _metis_args(["partition", str(store), str(tmp_path / "m"), "--parts", str(K), "--method", "metis", "--json"], str(tmp_path))
    assert args[-2] == "--assignment" and "metis" not in args
    a = np.load(args[-1])
    assert a.shape == (N,) and set(np.unique(a)) == set(range(K))
    r = subprocess.run([BIN, *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    metis = json.loads(r.stdout)
    hashed = partition(store, tmp_path / "h", "--parts", K, "--method", "hash")
    # The graph is four communities: METIS finds them, hashing cuts across.
    assert metis["cut_edges"] < hashed["cut_edges"] / 2
    np.testing.assert_array_equal(distributed.read_book(tmp_path / "m" / "book.sgb").shard, a)


def torchrun(*args, nproc=2):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", "examples/train_distributed.py", *[str(a) for a in args]]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_ddp_training_resumes_to_the_same_model(tmp_path, cluster):
    """2 DDP ranks over the 4 shards: a run stopped after a checkpoint and
    restarted from it ends with the model of an uninterrupted run."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torch_geometric")
    _, out, servers, _ = cluster
    common = ["--shards", ",".join(s.addr for s in servers), "--book", out / "book.sgb", "--epochs", 2, "--batch-size", 8, "--fanouts", "4,3", "--hidden", 8]
    common += ["--checkpoint-every", 2, "--timeout", 10]
    full = torchrun(*common, "--checkpoint", tmp_path / "a.ck", "--save-model", tmp_path / "full.pt")
    assert full.returncode == 0, full.stderr[-3000:]
    assert "epoch 1:" in full.stdout
    # The stopped run's shard 1 is killed; the resumed run gets a new server for it.
    def shard_list(one):
        return ["--shards", ",".join(one.addr if k == 1 else s.addr for k, s in enumerate(servers))]

    first = Server(*shard_stores(out, 1))
    stopped = torchrun(*common, *shard_list(first), "--checkpoint", tmp_path / "b.ck", "--stop-after", 6)
    first.stop(signal.SIGKILL)
    assert stopped.returncode != 0 and "stopping after 6 batches" in stopped.stdout, stopped.stderr[-3000:]
    second = Server(*shard_stores(out, 1))
    try:
        resumed = torchrun(*common, *shard_list(second), "--checkpoint", tmp_path / "b.ck", "--save-model", tmp_path / "resumed.pt")
    finally:
        second.stop(signal.SIGKILL)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout and "epoch 1, batch 2" in resumed.stdout
    a, b = torch.load(tmp_path / "full.pt"), torch.load(tmp_path / "resumed.pt")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def _ip(*args, ns=None):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + ["ip", *args]
    subprocess.run(cmd, check=True, capture_output=True)


@pytest.fixture
def namespaces():
    """Up to 4 network namespaces, each joined to this one by a veth pair
    (root only): yields make(k) -> (namespace, server address in it)."""
    if os.geteuid() != 0 or subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        pytest.skip("network namespaces need root and iproute2")
    tag = f"sgd{os.getpid() % 100000}"
    made = []

    def make(k):
        ns, host, peer = f"{tag}-{k}", f"{tag}h{k}", f"{tag}n{k}"
        _ip("netns", "add", ns)
        made.append((ns, host))
        _ip("link", "add", host, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", ns)
        _ip("addr", "add", f"10.78.{k}.1/24", "dev", host)
        _ip("link", "set", host, "up")
        _ip("addr", "add", f"10.78.{k}.2/24", "dev", peer, ns=ns)
        _ip("link", "set", peer, "up", ns=ns)
        _ip("link", "set", "lo", "up", ns=ns)
        return ns, host

    yield make
    for ns, host in made:
        subprocess.run(["ip", "link", "del", host], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_shards_in_their_own_network_namespaces(tmp_path, cluster, namespaces):
    """Each shard server in its own network namespace behind a veth pair:
    samples equal the single store's; a shard whose link goes down is a
    ShardError naming it at the deadline, not a hang."""
    store, out, _, _ = cluster
    (tmp_path / "tokens").write_text("shard-token read\n")
    procs, addrs, links = [], [], []
    try:
        for k in range(K):
            ns, host = namespaces(k)
            cmd = ["ip", "netns", "exec", ns, BIN, "serve", *map(str, shard_stores(out, k)), "--read-only"]
            cmd += ["--tokens", str(tmp_path / "tokens"), "--listen", f"10.78.{k}.2:0"]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            procs.append(p)
            line = p.stdout.readline()
            assert line.startswith("listening on "), line
            addrs.append(line.split()[-1])
            links.append(host)
        d = distributed.connect(addrs, book=out / "book.sgb", token="shard-token", timeout=3)
        g = solidgraph.open(store)
        ids = np.arange(0, N, 3)
        kw = dict(fanouts=[5, 3], seed=4, tensors=["x"])
        same_sample(d.sample_neighbors(ids, **kw), g.sample_neighbors(ids, **kw))
        _ip("link", "set", links[2], "down")
        t0 = time.monotonic()
        with pytest.raises(ShardError, match=f"shard 2 at {addrs[2]}") as e:
            d.sample_neighbors(ids, **kw)
        assert e.value.code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE)
        assert time.monotonic() - t0 < 10
        d.close()
    finally:
        for p in procs:
            p.kill()
            p.wait(30)
            p.stdout.close()
