#!/usr/bin/env python3
"""Row cache sweep (issue 34): the PyTorch loader's seeds/s as the row cache
grows from nothing to more than the working set, as a user runs it.

Graph500 Kronecker graph (default scale 22, edge factor 16, undirected,
degree order) with 128-dim f32 features `x` and int64 labels `y`, imported
through `solidgraph.import_graph`. Each configuration opens the store in a
fresh process with the OS page cache dropped, builds
`solidgraph.torch.NeighborLoader(g, train_idx, [25, 10], batch_size=1024,
shuffle=True, num_workers=2, prefetch=4)` over 1M training vertices, takes
3 warm-up batches and times the next 40. Configurations run in alternating
order over the rounds (forward, then backward), so each ratio to the
no-row-cache run is a same-run ratio.

    .venv/bin/python benchmarks/rowcache_sweep.py                    # scale 22 sweep
    .venv/bin/python benchmarks/rowcache_sweep.py --scale 18 --batches 10 --rounds 1
    .venv/bin/python benchmarks/rowcache_sweep.py --configs 8:0,49:195,116:462
    .venv/bin/python benchmarks/rowcache_sweep.py --builds old=/tmp/py-old,new=/tmp/py-new
                                                   # two builds of the package, alternated

A configuration is `PAGE_MIB:ROW_MIB`. Needs root for drop_caches (it is
skipped with a warning otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

MIB = 1 << 20
DEFAULT_CONFIGS = "49:0,49:64,49:128,49:195,49:320,49:462,49:1024,49:2560"


def kronecker(scale: int, edge_factor: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Graph500 Kronecker edges (A=0.57, B=C=0.19), ids permuted."""
    a, b, c = 0.57, 0.19, 0.19
    rng = np.random.default_rng(seed)
    m = edge_factor << scale
    src = np.zeros(m, dtype=np.int64)
    dst = np.zeros(m, dtype=np.int64)
    chunk = 1 << 23
    for lo in range(0, m, chunk):
        hi = min(m, lo + chunk)
        s = np.zeros(hi - lo, dtype=np.int64)
        d = np.zeros(hi - lo, dtype=np.int64)
        for level in range(scale):
            ii = rng.random(hi - lo) > a + b
            jj = rng.random(hi - lo) > np.where(ii, c / (1 - a - b), a / (a + b))
            s |= ii.astype(np.int64) << level
            d |= jj.astype(np.int64) << level
        src[lo:hi] = s
        dst[lo:hi] = d
    perm = rng.permutation(1 << scale)
    return perm[src], perm[dst]


def build(args: argparse.Namespace, store: Path) -> None:
    import solidgraph

    n = 1 << args.scale
    t = time.perf_counter()
    src, dst = kronecker(args.scale, args.edge_factor, args.seed)
    rng = np.random.default_rng(args.seed + 1)
    x = rng.standard_normal((n, args.dim), dtype=np.float32)
    y = rng.integers(0, 47, n, dtype=np.int64)
    print(f"generated scale {args.scale}: {len(src):,} edges in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    t = time.perf_counter()
    solidgraph.import_graph(store, (src, dst), {"x": x, "y": y}, undirected=True, order="degree", num_nodes=n, progress=True)
    print(f"imported in {time.perf_counter() - t:.0f} s", file=sys.stderr)


def drop_caches() -> None:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as e:
        print(f"warning: caches not dropped ({e})", file=sys.stderr)


def run_one(args: argparse.Namespace) -> dict:
    """One configuration in this process; returns its report."""
    import torch  # noqa: F401  (the loader's batches are torch tensors)

    import solidgraph
    import solidgraph.torch as sgt

    page, row = (int(v) for v in args.run.split(":"))
    g = solidgraph.open(args.store, cache_bytes=page * MIB, row_cache_bytes=row * MIB)
    rng = np.random.default_rng(args.seed + 2)
    train = rng.choice(g.num_nodes, size=min(args.train, g.num_nodes), replace=False)
    loader = sgt.NeighborLoader(g, train, [25, 10], batch_size=args.batch_size, shuffle=True, num_workers=2, prefetch=4, seed=args.seed)
    it = iter(loader)
    for _ in range(args.warmup):
        next(it)
    g.reset_stats()
    seeds = 0
    t = time.perf_counter()
    for _ in range(args.batches):
        seeds += next(it).batch_size
    secs = time.perf_counter() - t
    st = g.stats()
    return {
        "page_mib": page,
        "row_mib": row,
        "seeds_per_s": seeds / secs,
        "seconds": secs,
        "bytes_read": st["bytes_read"],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=int, default=22)
    p.add_argument("--edge-factor", type=int, default=16)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dir", default=os.environ.get("SOLIDGRAPH_BENCH_DIR", "/work/bench"))
    p.add_argument("--configs", default=DEFAULT_CONFIGS, help="PAGE_MIB:ROW_MIB,... (default %(default)s)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batches", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--train", type=int, default=1_000_000)
    p.add_argument("--builds", default="", help="NAME=DIR,...: run every configuration with each DIR (a directory holding a built "
                   "solidgraph package) first on PYTHONPATH, alternating; default: the installed package")
    p.add_argument("--store", help=argparse.SUPPRESS)
    p.add_argument("--run", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.run:
        print(json.dumps(run_one(args)))
        return
    store = Path(args.dir) / f"rowcache-s{args.scale}-e{args.edge_factor}-d{args.dim}.sg"
    if not store.exists():
        store.parent.mkdir(parents=True, exist_ok=True)
        build(args, store)
    builds = dict(b.split("=", 1) for b in args.builds.split(",")) if args.builds else {"installed": ""}
    configs = [(b, c) for c in args.configs.split(",") for b in builds]
    results: dict[tuple[str, str], list[dict]] = {k: [] for k in configs}
    print(f"# store {store}, {args.batches} batches of {args.batch_size} after {args.warmup} warm-up, fanouts [25, 10], 2 workers")
    print(f"{'round':>5} {'build':>10} {'page MiB':>8} {'row MiB':>8} {'seeds/s':>9} {'GB read':>8} {'peak RSS MiB':>12}")
    for r in range(args.rounds):
        for b, c in configs if r % 2 == 0 else configs[::-1]:
            drop_caches()
            cmd = [sys.executable, __file__, "--store", str(store), "--run", c, "--seed", str(args.seed), "--warmup", str(args.warmup),
                   "--batches", str(args.batches), "--batch-size", str(args.batch_size), "--train", str(args.train)]
            env = dict(os.environ)
            if builds[b]:
                env["PYTHONPATH"] = builds[b] + os.pathsep + env.get("PYTHONPATH", "")
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
            rep = json.loads(out.stdout.strip().splitlines()[-1])
            results[(b, c)].append(rep)
            print(f"{r:>5} {b:>10} {rep['page_mib']:>8} {rep['row_mib']:>8} {rep['seeds_per_s']:>9.0f} {rep['bytes_read'] / 1e9:>8.2f} {rep['peak_rss_mib']:>12.0f}", flush=True)
    first = args.configs.split(",")[0]
    print(f"\n# summary: seeds/s per round, and its ratio to {first} of the same build in the same round")
    for b, c in configs:
        runs, base = results[(b, c)], results[(b, first)]
        ratios = " ".join(f"{x['seeds_per_s'] / y['seeds_per_s']:.2f}" for x, y in zip(runs, base))
        print(f"{b:>10} {c:>10}: " + " ".join(f"{x['seeds_per_s']:.0f}" for x in runs) + f"   ratio {ratios}")

if __name__ == "__main__":
    main()
