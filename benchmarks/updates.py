"""Durable update throughput and reads through the delta (issue 4).

    .venv/bin/python benchmarks/updates.py [--nodes 1000000] [--edges 8000000] [--dir DIR]

Imports a random graph, then on a writable store:
  1. durable edge inserts/s with group commit, batches of 1, 100, 10,000
     (every call returns only once its WAL record is fdatasynced);
  2. neighbor-read throughput (batches of 1024 random vertices, warm cache)
     with 0%, 1% and 10% of the edges pending in the in-memory delta.
Absolute numbers move with the machine's load; the ratios within a run do not.
"""

import argparse
import pathlib
import shutil
import tempfile
import time

import numpy as np

import solidgraph


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--edges", type=int, default=8_000_000)
    ap.add_argument("--dir", type=pathlib.Path, default=None, help="work dir (default: a temp dir, removed)")
    a = ap.parse_args()
    work = a.dir or pathlib.Path(tempfile.mkdtemp(prefix="sg-updates-"))
    work.mkdir(parents=True, exist_ok=True)
    path = work / "g.sg"
    shutil.rmtree(path, ignore_errors=True)
    rng = np.random.default_rng(1)
    n, m = a.nodes, a.edges
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    t = time.perf_counter()
    solidgraph.import_graph(path, (src, dst, rng.random(m, dtype=np.float32)), dedup=True, in_edges=True)
    print(f"imported {n:,} vertices, {m:,} edges in {time.perf_counter() - t:.1f} s")
    g = solidgraph.open(path, writable=True, cache_bytes=1 << 30)
    base_edges = g.num_edges

    def read_rate() -> float:
        # Every page in the cache first, so the runs differ only by the delta.
        for lo in range(0, n, 65536):
            g.neighbors(np.arange(lo, min(n, lo + 65536)))
        ids = [rng.integers(0, n, 1024) for _ in range(200)]
        t = time.perf_counter()
        for b in ids:
            g.neighbors(b)
        return 200 * 1024 / (time.perf_counter() - t)

    def fill_delta(share: float) -> None:
        want = int(share * base_edges)
        while g.num_edges - base_edges < want:
            k = min(100_000, want - (g.num_edges - base_edges))
            g.add_edges(rng.integers(0, n, k), rng.integers(0, n, k), weights=np.ones(k, np.float32), durable=False)
        g.flush()

    reads = [("0%", read_rate())]
    fill_delta(0.01)
    reads.append(("1%", read_rate()))

    print("\ndurable edge inserts (group commit; each call returns after fdatasync)")
    print(f"{'batch':>8} {'calls':>6} {'edges/s':>12} {'ms/call':>9}")
    for batch, calls in ((1, 200), (100, 200), (10_000, 50)):
        t = time.perf_counter()
        for _ in range(calls):
            g.add_edges(rng.integers(0, n, batch), rng.integers(0, n, batch), weights=np.ones(batch, np.float32))
        dt = time.perf_counter() - t
        print(f"{batch:>8,} {calls:>6} {batch * calls / dt:>12,.0f} {1000 * dt / calls:>9.2f}")

    fill_delta(0.10)
    reads.append(("10%", read_rate()))
    print("\nneighbor reads with edges pending in the delta (warm cache, 1024 ids/batch)")
    print(f"{'pending':>8} {'vertices/s':>12} {'vs 0%':>7}")
    for name, r in reads:
        print(f"{name:>8} {r:>12,.0f} {r / reads[0][1]:>7.2f}")
    if a.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
