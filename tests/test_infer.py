"""GNN inference next to the store: models exported from
PyTorch / PyG with solidgraph.infer.export and run by Graph.infer equal
PyTorch's outputs on the same subgraph, full neighbourhood and sampled, on a
random graph and on Cora; bad inputs raise typed errors."""

import json
import struct
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

import solidgraph  # noqa: E402
from solidgraph import FormatError, InvalidArgumentError, NotFoundError, SolidGraphIOError  # noqa: E402
from solidgraph.infer import NGCF, batch_seed, export, load  # noqa: E402
from torch_geometric.nn import GATConv, GCNConv, SAGEConv  # noqa: E402
from torch_geometric.nn.models import GAT, GCN, GIN, GraphSAGE  # noqa: E402

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
CORA = DATASETS / "planetoid" / "Cora" / "raw"
TOL = 1e-4
MODELS = ["gcn", "sage", "gin", "gat", "ngcf", "custom"]


class Residual(torch.nn.Module):
    """A hand-written model traced with torch_geometric.nn.fx: convs, Linear,
    functional activations, dropout and a residual add."""

    def __init__(self, d, h, out):
        super().__init__()
        self.inp = torch.nn.Linear(d, h)
        self.c1 = GCNConv(h, h)
        self.c2 = SAGEConv(h, h)
        self.drop = torch.nn.Dropout(0.5)
        self.out = torch.nn.Linear(h, out)

    def forward(self, x, edge_index):
        x = torch.relu(self.inp(x))
        x = x + torch.nn.functional.elu(self.c1(x, edge_index))
        x = self.drop(x)
        x = x + self.c2(x, edge_index).tanh()
        return self.out(x)


def make_model(kind, d, seed=0):
    torch.manual_seed(seed)
    m = {
        "gcn": lambda: GCN(d, 32, 2, out_channels=8),
        "sage": lambda: GraphSAGE(d, 32, 2, out_channels=8),
        "gin": lambda: GIN(d, 32, 2, out_channels=8, train_eps=True),
        "gat": lambda: GAT(d, 8, 2, out_channels=8, heads=4),
        "ngcf": lambda: NGCF(d, [16, 8]),
        "custom": lambda: Residual(d, 16, 8),
    }[kind]()
    if kind == "gin":
        with torch.no_grad():
            for c in m.convs:
                c.eps.fill_(0.3)  # a non-zero eps, as trained
    return m.eval()


def edge_index_of(g):
    """Every stored edge as PyG's (source, target) edge_index."""
    indptr, indices = g.neighbors(np.arange(g.num_nodes), "out")[:2]
    src = np.repeat(np.arange(g.num_nodes), np.diff(indptr))
    return torch.from_numpy(np.stack([src, indices]).astype(np.int64))


def rel_err(out, ref):
    return float(np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-30))


class Case:
    def __init__(self, g, x):
        self.g, self.x = g, x
        self.ei = edge_index_of(g)
        self.xt = torch.from_numpy(x)


@pytest.fixture(scope="module")
def rand(tmp_path_factory):
    n, e, d = 500, 3000, 12
    rng = np.random.default_rng(1)
    src = rng.integers(0, n, e)
    # A few hubs and some isolated nodes (no edges at ids >= 480).
    dst = np.where(rng.random(e) < 0.1, rng.integers(0, 5, e), rng.integers(0, 480, e))
    src = np.minimum(src, 479)
    x = rng.standard_normal((n, d)).astype(np.float32)
    path = tmp_path_factory.mktemp("infer") / "rand"
    solidgraph.import_graph(path, (src, dst), {"x": x}, in_edges=True, dedup=True, num_nodes=n)
    return Case(solidgraph.open(path), x)


@pytest.fixture(scope="module")
def cora(tmp_path_factory):
    if not CORA.is_dir():
        pytest.skip(f"{CORA} is missing: check out the shared datasets as ../shared beside the repository")
    from solidgraph.datasets import load_planetoid

    ds = load_planetoid(CORA, "Cora")
    path = tmp_path_factory.mktemp("infer") / "cora"
    solidgraph.import_graph(path, (ds.src, ds.dst), {"x": ds.x}, undirected=True, dedup=True)
    return Case(solidgraph.open(path), np.asarray(ds.x, dtype=np.float32))


@pytest.fixture(params=["rand", "cora"])
def case(request):
    return request.getfixturevalue(request.param)


@pytest.mark.parametrize("kind", MODELS)
def test_full_neighbourhood_equals_full_batch(case, kind, tmp_path):
    m = make_model(kind, case.x.shape[1])
    model = export(m, tmp_path / kind)
    nodes = np.random.default_rng(2).permutation(case.g.num_nodes)[:150]
    nodes = np.concatenate([nodes, nodes[:5]])  # repeats get the same rows
    out = case.g.infer(model, nodes, batch_size=64)
    auto = solidgraph.infer.last_request()
    with torch.no_grad():
        ref = m(case.xt, case.ei)[torch.from_numpy(nodes)].numpy()
    assert out.dtype == np.float32 and out.shape == ref.shape
    assert rel_err(out, ref) < TOL, rel_err(out, ref)
    # The cost model's choice says why; either forced path gives the same rows.
    assert auto["path"] in ("stream", "batched") and (auto["path"] == "batched" or auto["reason"].startswith("stream")), auto
    for path in ("stream", "batched"):
        assert rel_err(case.g.infer(model, nodes, batch_size=64, path=path), ref) < TOL, path
        assert solidgraph.infer.last_request()["path"] == ("batched" if path == "batched" else auto["path"]), path


@pytest.mark.parametrize("kind", MODELS)
def test_sampled_equals_pyg_on_the_same_subgraph(case, kind, tmp_path):
    m = make_model(kind, case.x.shape[1], seed=3)
    export(m, tmp_path / kind)
    nodes = np.random.default_rng(4).permutation(case.g.num_nodes)[:100]
    fanouts, seed, bs = [5, 3], 11, 40
    out = case.g.infer(tmp_path / kind, nodes, fanouts=fanouts, batch_size=bs, seed=seed)
    for i, start in enumerate(range(0, len(nodes), bs)):
        seeds = nodes[start : start + bs]
        s = case.g.sample_neighbors(seeds, fanouts, seed=batch_seed(seed, i))
        with torch.no_grad():
            ref = m(case.xt[torch.from_numpy(s.node)], torch.from_numpy(s.edge_index))[: len(seeds)].numpy()
        assert rel_err(out[start : start + bs], ref) < TOL, (i, rel_err(out[start : start + bs], ref))


def test_model_object_and_path(rand, tmp_path):
    m = make_model("sage", rand.x.shape[1])
    model = export(m, tmp_path / "sage")
    again = load(tmp_path / "sage")
    assert (again.out_dim, again.num_layers, again.inputs) == (8, 2, [("x", 12)])
    assert model.full_fanouts == [-1, -1]
    assert load(export(make_model("gcn", 12), tmp_path / "gcn").path).full_fanouts == [-1, -1, -1]
    assert {k for _, _, k in model.kernels()}
    nodes = [3, 1, 4]
    np.testing.assert_array_equal(rand.g.infer(model, nodes), rand.g.infer(str(tmp_path / "sage"), nodes))
    assert rand.g.infer(model, []).shape == (0, 8)
    names = json.loads((tmp_path / "sage" / "model.json").read_text())["weights"]
    assert set(names) == {f"convs.{i}.{w}" for i in (0, 1) for w in ("lin_l.weight", "lin_l.bias", "lin_r.weight")}


# ---- bad input ---------------------------------------------------------------


@pytest.fixture
def sage_dir(rand, tmp_path):
    export(make_model("sage", rand.x.shape[1]), tmp_path / "m")
    return tmp_path / "m"


def test_width_mismatch(rand, tmp_path):
    export(make_model("gcn", 7), tmp_path / "m")
    with pytest.raises(InvalidArgumentError, match="takes 7 columns, store tensor \"x\" has 12"):
        rand.g.infer(tmp_path / "m", [0, 1])


def test_missing_feature_tensor(rand, sage_dir):
    with pytest.raises(NotFoundError):
        rand.g.infer(sage_dir, [0], features="nope")
    with pytest.raises(InvalidArgumentError, match="inputs"):
        rand.g.infer(sage_dir, [0], features=["x", "x"])


def edit_json(d, f):
    j = json.loads((d / "model.json").read_text())
    f(j)
    (d / "model.json").write_text(json.dumps(j))


def test_unknown_op_and_newer_version(rand, sage_dir):
    edit_json(sage_dir, lambda j: j["ops"][0].update(op="frobnicate"))
    with pytest.raises(FormatError, match="frobnicate"):
        rand.g.infer(sage_dir, [0])
    edit_json(sage_dir, lambda j: j.update(version=2))
    with pytest.raises(FormatError, match="newer") as e:
        load(sage_dir)
    assert (e.value.found, e.value.supported) == (2, 1)


def test_missing_weight_file(rand, sage_dir):
    (sage_dir / "weights.safetensors").unlink()
    with pytest.raises(SolidGraphIOError) as e:
        rand.g.infer(sage_dir, [0])
    assert isinstance(e.value, OSError) and "weights.safetensors" in str(e.value)


def read_safetensors(path):
    b = path.read_bytes()
    (n,) = struct.unpack("<Q", b[:8])
    header = json.loads(b[8 : 8 + n])
    return {k: np.frombuffer(b[8 + n + v["data_offsets"][0] : 8 + n + v["data_offsets"][1]], "<f4").reshape(v["shape"]).copy() for k, v in header.items()}


def test_nan_weights(rand, sage_dir):
    from solidgraph.infer import _write_safetensors

    w = read_safetensors(sage_dir / "weights.safetensors")
    w["convs.1.lin_l.bias"][2] = np.nan
    _write_safetensors(sage_dir / "weights.safetensors", w)
    with pytest.raises(InvalidArgumentError, match="convs.1.lin_l.bias.*non-finite"):
        rand.g.infer(sage_dir, [0])
    m = make_model("gcn", 12)
    with torch.no_grad():
        m.convs[0].bias[0] = float("inf")
    with pytest.raises(InvalidArgumentError, match="convs.0.bias"):
        export(m, sage_dir.parent / "inf")


def test_nodes_out_of_range(rand, sage_dir):
    with pytest.raises(InvalidArgumentError, match="out of range"):
        rand.g.infer(sage_dir, [0, rand.g.num_nodes])
    with pytest.raises(InvalidArgumentError):
        rand.g.infer(sage_dir, [-1])
    with pytest.raises(InvalidArgumentError, match="fanouts"):
        rand.g.infer(sage_dir, [0], fanouts=[])
    with pytest.raises(InvalidArgumentError, match="batch_size"):
        rand.g.infer(sage_dir, [0], batch_size=0)
    with pytest.raises(InvalidArgumentError, match="path must be"):
        rand.g.infer(sage_dir, [0], path="fast")


def test_unsupported_modules_are_named(tmp_path):
    from torch_geometric.nn import ChebConv

    class Cheb(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cheb = ChebConv(4, 4, K=2)

        def forward(self, x, edge_index):
            return self.cheb(x, edge_index)

    with pytest.raises(InvalidArgumentError, match="'cheb'.*ChebConv"):
        export(Cheb(), tmp_path / "a")
    with pytest.raises(InvalidArgumentError, match="aggr='max'"):
        export(GraphSAGE(4, 8, 2, aggr="max"), tmp_path / "b")
    with pytest.raises(InvalidArgumentError, match="jk"):
        export(GCN(4, 8, 2, jk="cat"), tmp_path / "c")
    class EdgeGat(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gat = GATConv(4, 4, edge_dim=3)

        def forward(self, x, edge_index):
            return self.gat(x, edge_index)

    with pytest.raises(InvalidArgumentError, match="'gat'.*edge_dim"):
        export(EdgeGat(), tmp_path / "d")


def test_cli(rand, sage_dir, tmp_path):
    """`solidgraph infer` writes the rows Graph.infer returns (SOLIDGRAPH_BIN, or target/release/solidgraph)."""
    import os
    import subprocess

    bin_ = os.environ.get("SOLIDGRAPH_BIN", "target/release/solidgraph")
    if not Path(bin_).exists():
        pytest.skip(f"{bin_} is not built (cargo build --release -p solidgraph-cli)")
    nodes = np.array([5, 3, 9, 3], dtype=np.int64)
    np.save(tmp_path / "nodes.npy", nodes)
    out = tmp_path / "out.npy"
    run = [bin_, "infer", str(rand.g.path), "--model", str(sage_dir), "--out", str(out)]
    subprocess.run(run + ["--nodes", str(tmp_path / "nodes.npy")], capture_output=True, check=True)
    np.testing.assert_array_equal(np.load(out), rand.g.infer(sage_dir, nodes))
    subprocess.run(run + ["--nodes", str(tmp_path / "nodes.npy"), "--fanouts", "3,-1", "--seed", "5"], capture_output=True, check=True)
    np.testing.assert_array_equal(np.load(out), rand.g.infer(sage_dir, nodes, fanouts=[3, -1], seed=5))
    subprocess.run(run + ["--all", "--batch-size", "100"], capture_output=True, check=True)
    np.testing.assert_array_equal(np.load(out), rand.g.infer(sage_dir, np.arange(rand.g.num_nodes)))
    bad = subprocess.run(run, capture_output=True, text=True)
    assert bad.returncode != 0 and "--nodes" in bad.stderr
    # --all --tensor: layer by layer into the store's infer/NAME/out.rows, a JSON report per layer.
    r = subprocess.run([bin_, "infer", str(rand.g.path), "--model", str(sage_dir), "--all", "--tensor", "cli-all", "--json"], capture_output=True, text=True, check=True)
    report = json.loads(r.stdout)
    rows = np.fromfile(report["path"], dtype=np.float32).reshape(report["rows"], report["cols"])
    np.testing.assert_array_equal(rows, rand.g.infer_all(sage_dir, out_tensor="cli-all"))
    assert [layer["layer"] for layer in report["layers"]] == [1, 2, 3]


def test_readme_snippet(tmp_path, monkeypatch):
    """The README's "GNN inference" example runs as written."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = text.split("## GNN inference", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})


# ---- whole-graph inference (infer_all) ---------------------------------------


@pytest.mark.parametrize("push", [True, False], ids=["push", "pull"])
@pytest.mark.parametrize("kind", ["gcn", "sage", "gin", "gat", "ngcf"])
def test_infer_all_equals_full_batch(case, kind, push, tmp_path):
    """Layer by layer over chunks of about 1 MiB (many chunks even on Cora)
    equals PyG's full-batch forward over the whole graph, with the linear
    aggregations pushed (by source) and pulled (by destination chunk)."""
    m = make_model(kind, case.x.shape[1], seed=5)
    model = export(m, tmp_path / kind)
    phases = []
    name = f"all-{kind}-{push}"
    out = case.g.infer_all(model, out_tensor=name, chunk_bytes=1 << 20, progress=lambda p, d, t: phases.append((p, d, t)), push=push)
    with torch.no_grad():
        ref = m(case.xt, case.ei).numpy()
    assert isinstance(out, np.memmap) and out.dtype == np.float32 and out.shape == ref.shape
    assert rel_err(np.asarray(out), ref) < TOL, rel_err(np.asarray(out), ref)
    assert phases and phases[-1][1:] == (case.g.num_nodes, case.g.num_nodes)
    d = Path(case.g.path) / "infer" / name
    assert sorted(p.name for p in d.iterdir()) == ["manifest.json", "out.crc", "out.rows"]


@pytest.mark.parametrize("kind", ["gcn", "sage", "gin"])
def test_infer_all_push_in_several_ranges(kind, tmp_path):
    """Accumulators larger than the memory bound (1 MiB chunks, no row
    cache: 512 KiB of accumulators for 40K x 64 columns) are split into
    destination ranges, each a pass over the sources with edges into it;
    the output equals PyG's full batch and the pull path's."""
    n, e, d = 40_000, 200_000, 16
    rng = np.random.default_rng(31)
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    dst[::5] = rng.integers(0, 8, len(dst[::5]))  # hubs
    x = rng.standard_normal((n, d)).astype(np.float32)
    solidgraph.import_graph(tmp_path / "g", (src, dst), {"x": x}, in_edges=True, num_nodes=n)
    g = solidgraph.open(tmp_path / "g")
    torch.manual_seed(3)
    m = {"gcn": lambda: GCN(d, 64, 2, out_channels=8), "sage": lambda: GraphSAGE(d, 64, 2, out_channels=8), "gin": lambda: GIN(d, 64, 2, out_channels=8)}[kind]().eval()
    model = export(m, tmp_path / kind)
    pushed = np.array(g.infer_all(model, out_tensor="push", chunk_bytes=1 << 20, row_cache_bytes=0))
    pulled = np.array(g.infer_all(model, out_tensor="pull", chunk_bytes=1 << 20, row_cache_bytes=0, push=False))
    with torch.no_grad():
        ref = m(torch.from_numpy(x), edge_index_of(g)).numpy()
    assert rel_err(pushed, ref) < TOL, rel_err(pushed, ref)
    assert rel_err(pushed, pulled) < 1e-5, rel_err(pushed, pulled)


RESUME_SCRIPT = """
import os, sys
import solidgraph
g = solidgraph.open(sys.argv[1])
def progress(phase, done, total):
    if phase.startswith("layer 2/"):
        os._exit(17)  # a crash in the middle of the second layer
g.infer_all(sys.argv[2], out_tensor="resumed", progress=progress)
"""


def test_infer_all_resumes_after_a_crash(cora, tmp_path):
    import subprocess
    import sys

    m = make_model("gcn", cora.x.shape[1], seed=6)
    export(m, tmp_path / "gcn")
    script = tmp_path / "crash.py"
    script.write_text(RESUME_SCRIPT)
    r = subprocess.run([sys.executable, str(script), str(cora.g.path), str(tmp_path / "gcn")], capture_output=True, text=True)
    assert r.returncode == 17, r.stderr
    d = Path(cora.g.path) / "infer" / "resumed"
    manifest = json.loads((d / "manifest.json").read_text())["body"]
    assert manifest["done"] == 1 and not (d / "out.rows").exists() or manifest["done"] == 1
    phases = set()
    out = cora.g.infer_all(tmp_path / "gcn", out_tensor="resumed", progress=lambda p, dn, t: phases.add(p.split("/")[0]))
    # The first layer (GCN's x W over the inputs) is not run again.
    assert phases == {"layer 2", "layer 3"}, phases
    with torch.no_grad():
        ref = m(cora.xt, cora.ei).numpy()
    assert rel_err(np.asarray(out), ref) < TOL
    again = cora.g.infer_all(tmp_path / "gcn", out_tensor="resumed", progress=lambda p, dn, t: phases.add("again"))
    np.testing.assert_array_equal(again, out)
    assert "again" not in phases  # everything was done: nothing runs


def test_infer_all_other_model_starts_over_and_damage_is_caught(rand, tmp_path):
    from solidgraph import CorruptionError

    a, b = make_model("sage", 12, seed=7), make_model("sage", 12, seed=8)
    export(a, tmp_path / "a")
    export(b, tmp_path / "b")
    rand.g.infer_all(tmp_path / "a", out_tensor="same")
    out = np.array(rand.g.infer_all(tmp_path / "b", out_tensor="same"))
    with torch.no_grad():
        assert rel_err(out, b(rand.xt, rand.ei).numpy()) < TOL
    f = Path(rand.g.path) / "infer" / "same" / "out.rows"
    data = bytearray(f.read_bytes())
    data[100] ^= 0x40
    f.write_bytes(bytes(data))
    with pytest.raises(CorruptionError, match="checksum"):
        rand.g.infer_all(tmp_path / "b", out_tensor="same")


def test_infer_all_bad_arguments(rand, sage_dir):
    with pytest.raises(InvalidArgumentError, match="output name"):
        rand.g.infer_all(sage_dir, out_tensor="../escape")
    with pytest.raises(InvalidArgumentError, match="chunk_bytes"):
        rand.g.infer_all(sage_dir, chunk_bytes=1000)
    with pytest.raises(NotFoundError):
        rand.g.infer_all(sage_dir, features="nope")


# ---- edge weights ------------------------------------------------------------


@pytest.fixture(scope="module")
def weighted(tmp_path_factory):
    """A directed random graph with positive edge weights and in-edges."""
    n, e, d = 300, 2000, 10
    rng = np.random.default_rng(9)
    pairs = np.unique(np.stack([rng.integers(0, n, e), rng.integers(0, n, e)], 1), axis=0)
    src, dst = pairs[:, 0], pairs[:, 1]
    w = rng.uniform(0.1, 2.0, len(src)).astype(np.float32)
    x = rng.standard_normal((n, d)).astype(np.float32)
    path = tmp_path_factory.mktemp("infer") / "weighted"
    solidgraph.import_graph(path, (src, dst), {"x": x}, edge_weights=w, in_edges=True, num_nodes=n)
    g = solidgraph.open(path)
    ei = torch.from_numpy(np.stack([src, dst]).astype(np.int64))
    return g, torch.from_numpy(x), ei, torch.from_numpy(w)


def test_gcn_with_edge_weights(weighted, tmp_path):
    """GCNConv reading the store's edge weights equals PyG's GCN(x, edge_index, edge_weight),
    whole-graph (infer_all) and over full neighbourhoods (infer)."""
    g, x, ei, w = weighted
    m = make_model("gcn", x.shape[1], seed=10)
    model = export(m, tmp_path / "gcnw", edge_weight=True)
    assert any(op.get("edge_weight") for op in json.loads((tmp_path / "gcnw" / "model.json").read_text())["ops"])
    with torch.no_grad():
        ref = m(x, ei, edge_weight=w).numpy()
        unweighted = m(x, ei).numpy()
    assert rel_err(unweighted, ref) > 1e-2  # the weights matter
    out = g.infer_all(model, out_tensor="gcnw", chunk_bytes=1 << 20)
    assert rel_err(np.asarray(out), ref) < TOL, rel_err(np.asarray(out), ref)
    nodes = np.arange(0, g.num_nodes, 7)
    assert rel_err(g.infer(model, nodes, batch_size=16), ref[nodes]) < TOL


@pytest.fixture(scope="module")
def parallel(tmp_path_factory):
    """A directed graph whose edges are mostly repeated: each (src, dst) pair
    two or three times, each copy with a weight of its own; no self-loops."""
    n, pairs_n, d = 200, 700, 10
    rng = np.random.default_rng(13)
    pairs = np.unique(np.stack([rng.integers(0, n, pairs_n), rng.integers(0, n, pairs_n)], 1), axis=0)
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    pairs = np.repeat(pairs, rng.integers(1, 4, len(pairs)), axis=0)
    pairs = pairs[rng.permutation(len(pairs))]
    src, dst = pairs[:, 0], pairs[:, 1]
    w = rng.uniform(0.1, 3.0, len(src)).astype(np.float32)
    x = rng.standard_normal((n, d)).astype(np.float32)
    path = tmp_path_factory.mktemp("infer") / "parallel"
    solidgraph.import_graph(path, (src, dst), {"x": x}, edge_weights=w, in_edges=True, num_nodes=n)
    g = solidgraph.open(path)
    assert g.num_edges == len(src)  # the repeats are stored
    ei = torch.from_numpy(np.stack([src, dst]).astype(np.int64))
    return g, torch.from_numpy(x), ei, torch.from_numpy(w)


def test_repeated_edges_keep_their_own_weights(parallel, tmp_path):
    """Repeated edges with different weights: a full-neighbourhood request,
    a sampled one and infer_all each read every edge's own weight, and equal
    PyG's GCN with edge weights on the same (sub)graph."""
    g, x, ei, w = parallel
    m = make_model("gcn", x.shape[1], seed=12)
    model = export(m, tmp_path / "gcnw", edge_weight=True)
    with torch.no_grad():
        ref = m(x, ei, edge_weight=w).numpy()
        # Every copy of a pair weighted as its first: what looking weights up by (src, dst) gave.
        _, first, inv = np.unique((ei[0] * g.num_nodes + ei[1]).numpy(), return_index=True, return_inverse=True)
        shared = m(x, ei, edge_weight=w[torch.from_numpy(first[inv])]).numpy()
    assert rel_err(shared, ref) > 1e-2  # the repeats' own weights matter
    nodes = np.random.default_rng(5).permutation(g.num_nodes)[:80]
    assert rel_err(g.infer(model, nodes, batch_size=32), ref[nodes]) < TOL
    out = np.asarray(g.infer_all(model, out_tensor="gcnw-par", chunk_bytes=1 << 20))
    assert rel_err(out, ref) < TOL, rel_err(out, ref)
    # Sampled: the reference weights are the stored in-lists' at the sampled edge ids.
    in_w = g.neighbors(np.arange(g.num_nodes), "in", with_weights=True)[2]
    fanouts, seed, bs = [4, 3], 17, 32
    got = g.infer(model, nodes, fanouts=fanouts, batch_size=bs, seed=seed)
    for i, start in enumerate(range(0, len(nodes), bs)):
        seeds = nodes[start : start + bs]
        s = g.sample_neighbors(seeds, fanouts, seed=batch_seed(seed, i))
        sw = torch.from_numpy(in_w[s.edge])
        with torch.no_grad():
            want = m(x[torch.from_numpy(s.node)], torch.from_numpy(s.edge_index), edge_weight=sw)[: len(seeds)].numpy()
        assert rel_err(got[start : start + bs], want) < TOL, (i, rel_err(got[start : start + bs], want))


def test_edge_weights_need_a_weighted_store(rand, tmp_path):
    model = export(make_model("gcn", 12), tmp_path / "gcnw", edge_weight=True)
    with pytest.raises(InvalidArgumentError, match="edge weights"):
        rand.g.infer(model, [0])
    with pytest.raises(InvalidArgumentError, match="edge weights"):
        rand.g.infer_all(model)


# ---- plugins from Python -----------------------------------------------------

PLUGIN_SRC = Path(__file__).resolve().parents[1] / "crates" / "runner" / "tests" / "plugin" / "test_plugin.c"
PLUGIN_INCLUDE = PLUGIN_SRC.parents[2] / "include"


def build_plugin(directory, name, *defines):
    import shutil
    import subprocess

    cc = shutil.which("cc") or pytest.skip("no C compiler to build the test plugin")
    out = directory / name
    cmd = [cc, "-shared", "-fPIC", "-O1", "-std=c11", "-Wno-unused-function", "-I", str(PLUGIN_INCLUDE), *[f"-D{d}" for d in defines], str(PLUGIN_SRC), "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True)
    return out


def test_plugins_from_python(rand, sage_dir, tmp_path):
    """The test plugin registers relu and gemm kernels at a higher priority: they run, and the
    rows equal the built-in kernels'."""
    plugins = tmp_path / "plugins"
    plugins.mkdir(mode=0o755)
    build_plugin(plugins, "libsg_test.so")
    model = load(sage_dir, plugins=plugins)
    kernels = {k for _, _, k in model.kernels()}
    assert {"libsg_test:testdev-gemm", "libsg_test:testdev-relu"} <= kernels, kernels
    assert not any(k.startswith("libsg_test:") for _, _, k in load(sage_dir).kernels())
    nodes = np.arange(40)
    ref = rand.g.infer(sage_dir, nodes)
    assert rel_err(rand.g.infer(model, nodes), ref) < 1e-5
    same = load(sage_dir, plugins=plugins, plugin_names=["libsg_test.so"])
    assert "libsg_test:testdev-gemm" in {k for _, _, k in same.kernels()}


def test_bad_plugins(sage_dir, tmp_path):
    plugins = tmp_path / "plugins"
    plugins.mkdir(mode=0o755)
    outside = tmp_path / "elsewhere"
    outside.mkdir(mode=0o755)
    build_plugin(outside, "libsg_test.so")
    with pytest.raises(InvalidArgumentError, match="outside the plugin directory"):
        load(sage_dir, plugins=plugins, plugin_names=["../elsewhere/libsg_test.so"])
    with pytest.raises(InvalidArgumentError, match="outside the plugin directory"):
        load(sage_dir, plugins=plugins, plugin_names=[outside / "libsg_test.so"])
    with pytest.raises(InvalidArgumentError, match="plugins=DIR"):
        load(sage_dir, plugin_names=["libsg_test.so"])
    build_plugin(plugins, "libsg_v2.so", "ABI=2")
    with pytest.raises(InvalidArgumentError, match="ABI") as e:
        load(sage_dir, plugins=plugins)
    assert "libsg_v2.so" in str(e.value)
    (plugins / "libsg_v2.so").unlink()
    (plugins / "libbroken.so").write_bytes(b"not an ELF file")
    with pytest.raises(InvalidArgumentError, match="libbroken.so"):
        load(sage_dir, plugins=plugins)
    with pytest.raises(InvalidArgumentError):
        load(sage_dir, plugins=tmp_path / "missing")


# ---- more bad input ----------------------------------------------------------


def test_mistyped_and_missing_weights(rand, sage_dir):
    w = read_safetensors(sage_dir / "weights.safetensors")
    b = (sage_dir / "weights.safetensors").read_bytes()
    (n,) = struct.unpack("<Q", b[:8])
    header = json.loads(b[8 : 8 + n])
    name = "convs.0.lin_l.bias"
    header[name]["dtype"] = "I32"  # same size, wrong type
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    (sage_dir / "weights.safetensors").write_bytes(struct.pack("<Q", len(h)) + h + b[8 + n :])
    with pytest.raises(InvalidArgumentError, match=f"{name}.*dtype I32"):
        load(sage_dir)
    from solidgraph.infer import _write_safetensors

    del w[name]
    _write_safetensors(sage_dir / "weights.safetensors", w)
    with pytest.raises(InvalidArgumentError, match=f"{name}.*missing"):
        rand.g.infer_all(sage_dir)
    w[name] = np.zeros(5, np.float32)  # the wrong shape
    _write_safetensors(sage_dir / "weights.safetensors", w)
    with pytest.raises(InvalidArgumentError, match=f"{name}.*shape"):
        load(sage_dir)


def test_infer_all_width_mismatch_and_newer_version(rand, tmp_path):
    export(make_model("sage", 7), tmp_path / "m")
    with pytest.raises(InvalidArgumentError, match="takes 7 columns, store tensor \"x\" has 12"):
        rand.g.infer_all(tmp_path / "m")
    edit_json(tmp_path / "m", lambda j: j.update(version=9))
    with pytest.raises(FormatError, match="newer"):
        rand.g.infer_all(tmp_path / "m")


def test_infer_all_on_a_renumbered_store(cora, tmp_path):
    """A store imported with order="degree" computes in its own order; the rows come back in the user's."""
    from solidgraph.datasets import load_planetoid

    ds = load_planetoid(CORA, "Cora")
    path = tmp_path / "cora-degree"
    solidgraph.import_graph(path, (ds.src, ds.dst), {"x": ds.x}, undirected=True, dedup=True, order="degree")
    g = solidgraph.open(path)
    m = make_model("gcn", cora.x.shape[1], seed=12)
    out = g.infer_all(export(m, tmp_path / "gcn"), chunk_bytes=1 << 20)
    with torch.no_grad():
        ref = m(cora.xt, cora.ei).numpy()
    assert rel_err(np.asarray(out), ref) < TOL, rel_err(np.asarray(out), ref)


@pytest.mark.parametrize("order", ["input", "degree"])
def test_infer_all_into_a_store_tensor(rand, tmp_path, order):
    """store_tensor=True adds the output as a real node tensor: it equals the
    memmap (in the user's order, also on a renumbered store), the sampler
    gathers it, it survives reopening, and a name in use or a read-only
    store is refused before any work."""
    indptr, indices = rand.g.neighbors(np.arange(rand.g.num_nodes), "out")[:2]
    src = np.repeat(np.arange(rand.g.num_nodes), np.diff(indptr))
    path = tmp_path / "st"
    solidgraph.import_graph(path, (src, indices), {"x": rand.x}, in_edges=True, num_nodes=rand.g.num_nodes, order=order)
    model = export(make_model("gcn", 12, seed=21), tmp_path / "gcn")
    with pytest.raises(InvalidArgumentError, match="needs the store opened writable"):
        solidgraph.open(path).infer_all(model, out_tensor="emb", store_tensor=True)
    with solidgraph.open(path, writable=True) as g:
        with pytest.raises(InvalidArgumentError, match="already has a tensor named \"x\""):
            g.infer_all(model, out_tensor="x", store_tensor=True)
        assert not (path / "infer" / "x").exists()  # refused before any work
        out = np.array(g.infer_all(model, out_tensor="emb", chunk_bytes=1 << 20, store_tensor=True))
        assert g.tensors["emb"] == ("float32", 8)
        np.testing.assert_array_equal(g.tensor("emb", np.arange(g.num_nodes)), out)
        with torch.no_grad():
            ref = make_model("gcn", 12, seed=21)(rand.xt, rand.ei).numpy()
        assert rel_err(out, ref) < TOL
    g = solidgraph.open(path)
    ids = np.array([7, 0, 499, 7])
    np.testing.assert_array_equal(g.tensor("emb", ids), out[ids])
    s = g.sample_neighbors(np.array([3, 4]), [4], seed=1, tensors=["emb"])
    np.testing.assert_array_equal(s.tensors["emb"], out[s.node])
    g.verify()


def test_cli_add_tensor(rand, sage_dir, tmp_path):
    import os
    import shutil
    import subprocess

    bin_ = os.environ.get("SOLIDGRAPH_BIN", "target/release/solidgraph")
    if not Path(bin_).exists():
        pytest.skip(f"{bin_} is not built (cargo build --release -p solidgraph-cli)")
    path = tmp_path / "copy"
    shutil.copytree(rand.g.path, path, ignore=shutil.ignore_patterns("infer", "writer.lock"))
    run = [bin_, "infer", str(path), "--model", str(sage_dir), "--all", "--tensor", "cli-emb", "--add-tensor"]
    subprocess.run(run, capture_output=True, check=True)
    g = solidgraph.open(path)
    np.testing.assert_array_equal(g.tensor("cli-emb", np.arange(g.num_nodes)), rand.g.infer_all(sage_dir, out_tensor="cli-ref"))
    del g
    again = subprocess.run(run, capture_output=True, text=True)
    assert again.returncode != 0 and "already has a tensor named" in again.stderr


def test_infer_all_pinned_rows_change_nothing(rand, tmp_path):
    """Pinning the most referenced rows of a layer's input (all of them, two
    pages, none) gives the same output bit for bit."""
    model = export(make_model("gcn", 12, seed=23), tmp_path / "gcn")
    outs = [np.array(rand.g.infer_all(model, out_tensor=f"pin-{b}", chunk_bytes=1 << 20, row_cache_bytes=b)) for b in [256 << 20, 8192, 0]]
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])
