"""Durable update throughput and reads through the delta (issue 4).

    .venv/bin/python benchmarks/updates.py [--nodes 1000000] [--edges 8000000] [--dir DIR]

Imports a random graph, then on a writable store:
  1. durable edge inserts/s with group commit, batches of 1, 100, 10,000
     (every call returns only once its WAL record is fdatasynced);
  2. neighbor-read throughput (batches of 1024 random vertices, warm cache)
     with 0%, 1% and 10% of the edges pending in the in-memory delta;
  3. durable inserts of 100 edges with 10% of the edges pending, alone and
     beside a thread that samples mini-batches the whole time (each sample
     reads one version: a write while it runs must not copy what is pending);
  4. merge: after one new edge from each of 0.1%, 1% and 10% of the
     vertices, the time and bytes a merge takes (copy-on-write of the dirty
     pages), against rewriting the whole store (the import's bytes and time).
Absolute numbers move with the machine's load; the ratios within a run do not.
"""

import argparse
import pathlib
import shutil
import tempfile
import threading
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
    import_s = time.perf_counter() - t
    store_bytes = sum(f.stat().st_size for f in path.glob("sg.*"))
    print(f"imported {n:,} vertices, {m:,} edges in {import_s:.1f} s ({store_bytes / 2**20:,.0f} MiB)")
    g = solidgraph.open(path, writable=True, cache_bytes=1 << 30, delta_budget=0)
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

    def insert_rate(calls: int = 100) -> float:
        t = time.perf_counter()
        for _ in range(calls):
            g.add_edges(rng.integers(0, n, 100), rng.integers(0, n, 100), weights=np.ones(100, np.float32))
        return calls / (time.perf_counter() - t)

    def sampling(stop: threading.Event, count: list) -> None:
        r = np.random.default_rng(2)
        while not stop.is_set():
            g.sample_neighbors(r.integers(0, n, 256), [10, 5], direction="out")
            count[0] += 1

    print("\ndurable 100-edge inserts with 10% pending, alone and beside a sampling thread (alternating)")
    print(f"{'round':>6} {'alone calls/s':>14} {'beside calls/s':>15} {'ratio':>6} {'samples':>8}")
    for rnd in range(3):
        alone = insert_rate()
        stop, count = threading.Event(), [0]
        th = threading.Thread(target=sampling, args=(stop, count))
        th.start()
        beside = insert_rate()
        stop.set()
        th.join()
        print(f"{rnd:>6} {alone:>14,.0f} {beside:>15,.0f} {beside / alone:>6.2f} {count[0]:>8}")

    pending = g.num_edges - base_edges
    rep = g.merge()
    print(f"\nmerged the {pending:,} edges inserted above in {rep['seconds']:.2f} s, {rep['bytes_written'] / 2**20:,.0f} MiB written")
    print("\nmerge after one new edge from a share of the vertices (copy-on-write of dirty pages)")
    print(f"full rewrite (the import): {import_s:.2f} s, {store_bytes / 2**20:,.0f} MiB")
    print(f"{'vertices':>9} {'lists':>9} {'seconds':>8} {'MiB written':>12} {'vs rewrite':>11} {'time vs':>8}")
    for share in (0.001, 0.01, 0.1):
        k = int(share * n)
        who = rng.choice(n, k, replace=False)
        for lo in range(0, k, 100_000):
            part = who[lo:lo + 100_000]
            g.add_edges(part, rng.integers(0, n, len(part)), weights=np.ones(len(part), np.float32), durable=False)
        g.flush()
        rep = g.merge()
        mib = rep["bytes_written"] / 2**20
        print(f"{share:>9.1%} {rep['lists']:>9,} {rep['seconds']:>8.2f} {mib:>12,.1f} {rep['bytes_written'] / store_bytes:>10.1%} {rep['seconds'] / import_s:>8.2f}")
    v = g.verify()
    print(f"verify after the merges: {v['pages']:,} pages in use, {v['free_pages']:,} free")
    if a.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
