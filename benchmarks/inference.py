"""Inference benchmark (issue 29): requests of k random target nodes, 2-layer
GCN and GraphSAGE, full neighbourhoods, against PyG.

  (a) cold PyG, what HolisticGNN measured: per request, load the edge list and
      the features from .npy, preprocess (undirected, self-loops, sort),
      k_hop_subgraph, infer;
  (b) warm PyG: graph and features already in RAM, k_hop_subgraph + infer;
  (s) SolidGraph: Graph.infer(model, targets) on the store (full neighbourhood).

PyG runs the model on a sparse adjacency (a torch CSR tensor, PyG's
memory-efficient path: GCNConv and SAGEConv aggregate with one SpMM): with
an edge_index it materialises a message per edge (E x 512 f32 for SAGE's
first layer), which at 40M edges does not fit this machine. (a)'s time is
also reported split into load / preprocess / k-hop / model.

Contenders alternate per request (s, a, b, s, a, b, ...) so machine noise hits
each alike; p50/p99 per request size are printed with the same-run ratios.
Not a test: it measures, it asserts only that the outputs agree.

    .venv/bin/python benchmarks/inference.py --nodes 100000 --edges 2000000 --dim 128 --requests 5 --dir /work/bench/infer-req

Out of core (`--mem-limit`): SolidGraph runs as a service in a child process
inside a cgroup v1 memory group of that limit (the store several times
larger), opened once; before each request of (s) and of (a) the OS page
cache is dropped (`sync; echo 3 > drop_caches`), so both read from the
device. (a) and (b) run in this process without a limit: (a) must hold the
whole graph and features to preprocess them, and (b) holds them by
definition. (s)'s time is measured in the child around `Graph.infer`.

    .venv/bin/python benchmarks/inference.py --nodes 2000000 --edges 40000000 --dim 512 --requests 3 \\
        --mem-limit 1G --batch-size 16 --prefetch 1 --dir /work/bench/infer-req-40m

`--batch-size` caps the targets of one engine batch (a request of more
targets runs as several batches): a batch's neighbourhood and rows are held
in memory (with `--prefetch 1` up to three batches at once), and 1,024
targets of the 40M-edge graph reach over half of its rows; at 64 targets in
one batch GCN's request passed the 1 GiB limit (OOM).
Per request the service also reports the store's pages read and I/Os.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch_geometric.nn.models import GCN, GraphSAGE
from torch_geometric.utils import k_hop_subgraph, remove_self_loops, to_torch_csr_tensor, to_undirected

import solidgraph
from solidgraph.infer import export


def make(dirp: Path, n: int, e: int, d: int, seed: int):
    store = dirp / "g.sg"
    done = dirp / "made.json"
    params = {"n": n, "e": e, "d": d, "seed": seed}
    if done.exists() and json.loads(done.read_text()) == params and store.exists():
        return store
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, e, dtype=np.int64)
    dst = rng.integers(0, n, e, dtype=np.int64)
    np.save(dirp / "edges.npy", np.stack([src, dst]))
    # Features in slices, so that generating them never holds two copies.
    x = np.lib.format.open_memmap(dirp / "x.npy", mode="w+", dtype=np.float32, shape=(n, d))
    for lo in range(0, n, 1 << 18):
        x[lo : lo + (1 << 18)] = rng.standard_normal((min(n, lo + (1 << 18)) - lo, d), dtype=np.float32)
    x.flush()
    del x
    solidgraph.import_graph(store, (src, dst), {"x": str(dirp / "x.npy")}, undirected=True, dedup=True, num_nodes=n)
    done.write_text(json.dumps(params))
    return store


CGROUP = Path("/sys/fs/cgroup/memory/sg-inference-req")

# The SolidGraph service: one request per stdin line ("MODEL TARGETS.npy"),
# one JSON reply per line (seconds of Graph.infer, the output's .npy).
SERVICE = r"""
import json, sys, time
import numpy as np
import solidgraph
import solidgraph.infer
g = solidgraph.open(sys.argv[1])
batch, prefetch = int(sys.argv[2]), int(sys.argv[3])
print("ready", flush=True)
for line in sys.stdin:
    model, targets, stream, path = line.split()
    t = np.load(targets)
    g.reset_stats()
    t0 = time.perf_counter()
    out = g.infer(model, t, batch_size=min(batch, len(t)) if batch else max(len(t), 1), prefetch=prefetch, stream_bytes=int(stream), path=path)
    dt = time.perf_counter() - t0
    st = g.stats()
    np.save(targets + ".out.npy", out)
    rep = {"seconds": dt, "pages": st["pages_read"], "ios": st["ios"], "bytes": st["bytes_read"]}
    print(json.dumps(dict(rep, request=solidgraph.infer.last_request())), flush=True)
"""


def phases(r: dict) -> str:
    """A request report (`solidgraph.infer.last_request()`) on one line."""
    out = f"path {r['path']}" + (f" ({r['reason']})" if "reason" in r else "")
    if r["path"] == "stream":
        sec, cpu, th = r["seconds"], r["cpu_seconds"], r["rows_thread_seconds"]
        out += (
            f"; reach {r['nodes']} nodes; wall / CPU s: expand {sec[0]:.2f} / {cpu[0]:.2f}, rows {sec[1]:.2f} / {cpu[1]:.2f}, model {sec[2]:.2f} / {cpu[2]:.2f}; "
            f"rows thread-s: read {th['read']:.2f}, check+copy {th['copy']:.2f}, gemm {th['gemm']:.2f}, degrees {th['degrees']:.2f}; "
            f"rows step read {r['bytes_read'] / 2**20:.0f} MiB in {r['ios']} I/Os ({r['bytes_read'] / max(r['ios'], 1) / 1024:.0f} KiB each), "
            f"{'direct' if r['direct'] else 'through the caches'}"
        )
    return out


def drop_caches():
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


class Service:
    """Graph.infer in a child process inside a memory cgroup of `limit` bytes."""

    def __init__(self, store: Path, limit: int, threads: int, batch: int, prefetch: int):
        CGROUP.mkdir(exist_ok=True)
        (CGROUP / "memory.limit_in_bytes").write_text(str(limit))
        env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
        cmd = " ".join(shlex.quote(c) for c in [sys.executable, "-c", SERVICE, str(store), str(batch), str(prefetch)])
        self.p = subprocess.Popen(["sh", "-c", f"echo $$ > {CGROUP}/cgroup.procs && exec {cmd}"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        assert self.p.stdout.readline().strip() == "ready"

    def infer(self, model_dir: Path, targets_path: Path, stream_bytes: int, path: str = "auto"):
        self.p.stdin.write(f"{model_dir} {targets_path} {stream_bytes} {path}\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise SystemExit(f"the SolidGraph service died (cgroup OOM?); memory.failcnt {(CGROUP / 'memory.failcnt').read_text().strip()}")
        reply = json.loads(line)
        return reply, np.load(str(targets_path) + ".out.npy")

    def close(self):
        self.p.stdin.close()
        self.p.wait()
        peak = int((CGROUP / "memory.max_usage_in_bytes").read_text())
        CGROUP.rmdir()
        return peak


def pyg_request(model, x, ei, targets, layers, split=None, data=None):
    """`data`, when given, holds (x, ei) instead and is emptied as soon as
    they are no longer needed: (a) then never holds the whole graph and the
    subgraph's features at once beside (b)'s copy."""
    t0 = time.perf_counter()
    if data is not None:
        x, ei = data.pop("x"), data.pop("ei")
    n = x.shape[0]
    subset, sub_ei, mapping, _ = k_hop_subgraph(torch.from_numpy(targets), layers, ei, relabel_nodes=True, num_nodes=n)
    del ei
    if isinstance(model, GCN):
        # GCNConv adds a loop per node on a sparse adjacency (add_remaining_self_loops on an edge_index).
        sub_ei = remove_self_loops(sub_ei)[0]
    # adj_t[dst, src]: PyG's convs aggregate with one SpMM over it, no per-edge messages.
    adj_t = to_torch_csr_tensor(sub_ei.flip(0), size=(len(subset), len(subset)))
    del sub_ei
    xs = x[subset]
    del x
    t1 = time.perf_counter()
    with torch.no_grad():
        out = model(xs, adj_t)[mapping]
    if split is not None:
        split["khop"] = t1 - t0
        split["model"] = time.perf_counter() - t1
    return out


def cold(dirp: Path, model, targets, layers, split):
    t0 = time.perf_counter()
    ei = torch.from_numpy(np.load(dirp / "edges.npy"))
    x = torch.from_numpy(np.load(dirp / "x.npy"))
    t1 = time.perf_counter()
    ei = to_undirected(ei, num_nodes=x.shape[0])  # also sorts and dedups
    split["load"], split["prep"] = t1 - t0, time.perf_counter() - t1
    data = {"x": x, "ei": ei}
    del x, ei
    return pyg_request(model, None, None, targets, layers, split, data)


def MIB(v: str) -> int:
    """A size: bytes, or with an M or G suffix."""
    return int(float(v[:-1]) * {"M": 1 << 20, "G": 1 << 30}[v[-1]]) if v[-1] in "MG" else int(v)


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
    ap.add_argument("--mem-limit", type=MIB, help="out of core: see the module docs")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models", default="gcn,sage")
    ap.add_argument("--batch-size", type=int, default=0, help="targets per engine batch (0: the whole request)")
    ap.add_argument("--prefetch", type=int, default=2, help="batches read ahead (Graph.infer's prefetch)")
    ap.add_argument("--stream-bytes", type=MIB, default=512 << 20, help="Graph.infer's stream_bytes (0: batch by batch)")
    ap.add_argument("--path", default="auto", choices=["auto", "stream", "batched"], help="Graph.infer's path")
    a = ap.parse_args()
    dirp = Path(a.dir)
    dirp.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    store = make(dirp, a.nodes, a.edges, a.dim, 0)
    print(f"data ready in {time.perf_counter() - t0:.0f} s", flush=True)
    torch.set_num_threads(a.threads)
    service = Service(store, a.mem_limit, a.threads, a.batch_size, a.prefetch) if a.mem_limit else None
    g = None if service else solidgraph.open(store)
    ei_warm = to_undirected(torch.from_numpy(np.load(dirp / "edges.npy")), num_nodes=a.nodes)
    x_warm = torch.from_numpy(np.load(dirp / "x.npy"))
    rng = np.random.default_rng(1)
    torch.manual_seed(0)
    print(f"graph: {a.nodes} nodes, {a.edges} edges (undirected), {a.dim}-dim f32; torch threads {torch.get_num_threads()}")
    store_bytes = sum(f.stat().st_size for f in store.iterdir() if f.is_file())
    if service:
        print(f"store {store_bytes / 2**30:.2f} GiB, SolidGraph's cgroup limit {a.mem_limit / 2**30:.2f} GiB; caches dropped before each (s) and (a) request", flush=True)
    for name, m in [("gcn", GCN(a.dim, 64, 2, out_channels=16)), ("sage", GraphSAGE(a.dim, 64, 2, out_channels=16))]:
        if name not in a.models.split(","):
            continue
        m = m.eval()
        model = export(m, dirp / name)
        # GCN's normalisation needs the degree of the last hop's nodes: one hop more.
        hops = len(model.full_fanouts)
        for k in [int(s) for s in a.sizes.split(",")]:
            t = {"s": [], "a": [], "b": []}
            io, splits = [], []
            for _ in range(a.requests):
                targets = rng.choice(a.nodes, k, replace=False)
                if service:
                    np.save(dirp / "targets.npy", targets)
                    drop_caches()
                    reply, ours = service.infer(dirp / name, dirp / "targets.npy", a.stream_bytes, a.path)
                    t["s"].append(reply["seconds"])
                    io.append(reply)
                    drop_caches()
                else:
                    t0 = time.perf_counter()
                    ours = g.infer(model, targets, batch_size=min(a.batch_size, k) if a.batch_size else max(k, 1), prefetch=a.prefetch, stream_bytes=a.stream_bytes, path=a.path)
                    t["s"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                split = {}
                ref_a = cold(dirp, m, targets, hops, split)
                t["a"].append(time.perf_counter() - t0)
                splits.append(split)
                t0 = time.perf_counter()
                ref_b = pyg_request(m, x_warm, ei_warm, targets, hops)
                t["b"].append(time.perf_counter() - t0)
                err = float((torch.from_numpy(ours) - ref_b).abs().max() / ref_b.abs().max().clamp_min(1e-30))
                assert err < 1e-3 and torch.equal(ref_a, ref_b), err
            p = {c: (pct(v, 50), pct(v, 99)) for c, v in t.items()}
            print(
                f"{name} k={k:5d}: solidgraph p50 {p['s'][0]:9.1f} ms p99 {p['s'][1]:9.1f} | "
                f"PyG cold p50 {p['a'][0]:9.1f} p99 {p['a'][1]:9.1f} | PyG warm p50 {p['b'][0]:9.1f} p99 {p['b'][1]:9.1f} | "
                f"cold/ours {p['a'][0] / p['s'][0]:6.1f}x  warm/ours {p['b'][0] / p['s'][0]:5.2f}x",
                flush=True,
            )
            if io:
                med = {f: float(np.median([r[f] for r in io])) for f in ("pages", "ios", "bytes")}
                paths = sorted({r["request"]["path"] for r in io})
                reach = f", reach {np.median([r['request']['nodes'] for r in io]):.0f} nodes" if paths == ["stream"] else ""
                print(f"    ours per request (median): {med['pages']:.0f} pages read in {med['ios']:.0f} I/Os, {med['bytes'] / 2**20:.0f} MiB; path {'/'.join(paths)}{reach}", flush=True)
                for r in io:
                    print(f"    ours: {phases(r['request'])}", flush=True)
            sp = {f: float(np.median([s[f] for s in splits])) * 1e3 for f in ("load", "prep", "khop", "model")}
            print("    PyG cold split (median ms): " + ", ".join(f"{f} {v:.0f}" for f, v in sp.items()), flush=True)
    if service:
        print(f"SolidGraph's cgroup peak {service.close() / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
