"""Inference benchmark (issue 29): requests of k random target nodes, 2-layer
GCN and GraphSAGE, full neighbourhoods, against PyG.

  (a) cold PyG, what HolisticGNN measured: per request, load the edge list and
      the features from .npy, preprocess (undirected, self-loops, sort),
      k_hop_subgraph, infer;
  (b) warm PyG: graph and features already in RAM, k_hop_subgraph + infer;
  (s) SolidGraph: Graph.infer(model, targets) on the store (full neighbourhood).

Contenders alternate per request (s, a, b, s, a, b, ...) so machine noise hits
each alike; p50/p99 per request size are printed with the same-run ratios.
Not a test: it measures, it asserts only that the outputs agree.

    .venv/bin/python benchmarks/inference.py --nodes 100000 --edges 2000000 --dim 128 --requests 5 --dir /work/bench/infer-req
"""

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from torch_geometric.nn.models import GCN, GraphSAGE
from torch_geometric.utils import k_hop_subgraph, to_undirected

import solidgraph
from solidgraph.infer import export


def make(dirp: Path, n: int, e: int, d: int, seed: int):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, e, dtype=np.int64)
    dst = rng.integers(0, n, e, dtype=np.int64)
    x = rng.standard_normal((n, d), dtype=np.float32)
    np.save(dirp / "edges.npy", np.stack([src, dst]))
    np.save(dirp / "x.npy", x)
    store = dirp / "g.sg"
    if not store.exists():
        solidgraph.import_graph(store, (src, dst), {"x": x}, undirected=True, dedup=True, num_nodes=n)
    return store


def pyg_request(model, x, ei, targets, layers):
    subset, sub_ei, mapping, _ = k_hop_subgraph(torch.from_numpy(targets), layers, ei, relabel_nodes=True, num_nodes=x.shape[0])
    with torch.no_grad():
        return model(x[subset], sub_ei)[mapping]


def cold(dirp: Path, model, targets, layers):
    ei = torch.from_numpy(np.load(dirp / "edges.npy"))
    x = torch.from_numpy(np.load(dirp / "x.npy"))
    ei = to_undirected(ei, num_nodes=x.shape[0])  # also sorts and dedups
    return pyg_request(model, x, ei, targets, layers)


def pct(v, q):
    return float(np.percentile(np.asarray(v) * 1e3, q))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--edges", type=int, default=2_000_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--requests", type=int, default=5)
    ap.add_argument("--sizes", default="1,64,1024")
    ap.add_argument("--dir", default="/tmp/sg-infer-bench")
    a = ap.parse_args()
    dirp = Path(a.dir)
    dirp.mkdir(parents=True, exist_ok=True)
    store = make(dirp, a.nodes, a.edges, a.dim, 0)
    g = solidgraph.open(store)
    ei_warm = to_undirected(torch.from_numpy(np.load(dirp / "edges.npy")), num_nodes=a.nodes)
    x_warm = torch.from_numpy(np.load(dirp / "x.npy"))
    rng = np.random.default_rng(1)
    torch.manual_seed(0)
    print(f"graph: {a.nodes} nodes, {a.edges} edges (undirected), {a.dim}-dim f32; torch threads {torch.get_num_threads()}")
    for name, m in [("gcn", GCN(a.dim, 64, 2, out_channels=16)), ("sage", GraphSAGE(a.dim, 64, 2, out_channels=16))]:
        m = m.eval()
        model = export(m, dirp / name)
        # GCN's normalisation needs the degree of the last hop's nodes: one hop more.
        hops = len(model.full_fanouts)
        for k in [int(s) for s in a.sizes.split(",")]:
            t = {"s": [], "a": [], "b": []}
            for _ in range(a.requests):
                targets = rng.choice(a.nodes, k, replace=False)
                t0 = time.perf_counter()
                ours = g.infer(model, targets, batch_size=max(k, 1))
                t["s"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                ref_a = cold(dirp, m, targets, hops)
                t["a"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                ref_b = pyg_request(m, x_warm, ei_warm, targets, hops)
                t["b"].append(time.perf_counter() - t0)
                err = float((torch.from_numpy(ours) - ref_b).abs().max() / ref_b.abs().max().clamp_min(1e-30))
                assert err < 1e-3 and torch.equal(ref_a, ref_b), err
            p = {c: (pct(v, 50), pct(v, 99)) for c, v in t.items()}
            print(
                f"{name} k={k:5d}: solidgraph p50 {p['s'][0]:9.1f} ms p99 {p['s'][1]:9.1f} | "
                f"PyG cold p50 {p['a'][0]:9.1f} p99 {p['a'][1]:9.1f} | PyG warm p50 {p['b'][0]:9.1f} p99 {p['b'][1]:9.1f} | "
                f"cold/ours {p['a'][0] / p['s'][0]:6.1f}x  warm/ours {p['b'][0] / p['s'][0]:5.2f}x"
            )


if __name__ == "__main__":
    main()
