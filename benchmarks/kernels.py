"""Kernel benchmark: the runner's optimised CPU kernels against PyTorch on the
same shapes and the same number of threads, contenders alternating.

- GEMM (`x W^T`, PyTorch Linear layout) against `torch.matmul(x, w.T)`;
  the bar is at least 0.8x torch's speed.
- Aggregation SpMM (sum and mean over in-edges, CSR by destination) against
  PyG's scatter-based aggregation, `torch_geometric.utils.scatter(x[src],
  dst, reduce=...)` (what MessagePassing runs without torch_scatter /
  pyg-lib: gather the messages, then scatter them); the bar is 1.5x.

Our time is the kernel alone (`solidgraph.infer.time_kernel`, operands
converted before the clock starts); torch's is the op call. Each contender
runs `--reps` times per shape, alternating, after one warm-up each; medians
and the ratio torch / ours (above 1: ours is faster) are printed and, with
--json, written as JSON. Outputs are compared (relative 1e-4).

    .venv/bin/python benchmarks/kernels.py --threads 2 --reps 7
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="small shapes (a smoke run)")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args(argv)
    # Both thread pools sized before either library starts one.
    os.environ["RAYON_NUM_THREADS"] = str(a.threads)
    import numpy as np
    import torch
    from torch_geometric.utils import scatter

    from solidgraph.infer import time_kernel

    torch.set_num_threads(a.threads)
    rng = np.random.default_rng(0)
    results = []

    def alternate(name, ours, theirs, check):
        ours()
        theirs()
        t_ours, t_theirs = [], []
        for _ in range(a.reps):
            out, secs = ours()
            t_ours.append(secs)
            t0 = time.perf_counter()
            ref = theirs()
            t_theirs.append(time.perf_counter() - t0)
        check(out, ref)
        mo, mt = statistics.median(t_ours), statistics.median(t_theirs)
        r = {"case": name, "ours_ms": mo * 1e3, "torch_ms": mt * 1e3, "ratio": mt / mo}
        results.append(r)
        print(f"{name:48s} ours {mo * 1e3:9.2f} ms  torch {mt * 1e3:9.2f} ms  torch/ours {mt / mo:5.2f}x", flush=True)

    def close(out, ref):
        ref = ref.numpy()
        err = float(np.abs(out - ref).max() / max(np.abs(ref).max(), 1e-30))
        assert err < 1e-4, err

    scale = 8 if a.quick else 1
    gemm_shapes = [(262144 // scale, 128, 64), (65536 // scale, 512, 64), (65536 // scale, 64, 16), (16384 // scale, 512, 512)]
    for m, k, n in gemm_shapes:
        x = rng.standard_normal((m, k), dtype=np.float32)
        w = rng.standard_normal((n, k), dtype=np.float32)
        xt, wt = torch.from_numpy(x), torch.from_numpy(w)

        def ours(x=x, w=w):
            out, secs = time_kernel("gemm", x, w)
            return out, secs[0]

        alternate(f"gemm m={m} k={k} n={n}", ours, lambda xt=xt, wt=wt: torch.matmul(xt, wt.T), close)

    # Graphs: a skewed random graph (a few hubs) in CSR by destination.
    spmm_shapes = [(200000 // scale, 10, 64), (200000 // scale, 10, 128), (50000 // scale, 40, 64)]
    for nodes, deg, cols in spmm_shapes:
        e = nodes * deg
        src = np.minimum(rng.zipf(1.5, e) - 1, nodes - 1).astype(np.int64)
        src = np.where(rng.random(e) < 0.5, src, rng.integers(0, nodes, e))
        dst = np.sort(rng.integers(0, nodes, e))
        indptr = np.zeros(nodes + 1, np.int64)
        np.cumsum(np.bincount(dst, minlength=nodes), out=indptr[1:])
        x = rng.standard_normal((nodes, cols), dtype=np.float32)
        xt, st, dt = torch.from_numpy(x), torch.from_numpy(src), torch.from_numpy(dst)
        for reduce in ["sum", "mean"]:

            def ours(x=x, src=src, indptr=indptr, reduce=reduce):
                out, secs = time_kernel("spmm", x, indptr=indptr, indices=src, reduce=reduce)
                return out, secs[0]

            def theirs(xt=xt, st=st, dt=dt, reduce=reduce, nodes=nodes):
                return scatter(xt[st], dt, dim=0, dim_size=nodes, reduce=reduce)

            alternate(f"spmm {reduce} nodes={nodes} edges={e} cols={cols}", ours, theirs, close)

    if a.json:
        with open(a.json, "w") as f:
            json.dump({"threads": a.threads, "reps": a.reps, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
