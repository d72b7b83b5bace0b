"""Simulates the row cache's admission policies on GraphSAGE mini-batches.

A Graph500 Kronecker graph (undirected, deduplicated) is generated in numpy,
mini-batches of 1024 seeds are sampled with fanouts [25, 10], and the
distinct feature rows of each batch are looked up in a cache holding a share
of all rows, which starts with the highest-degree vertices' rows, as the
store's open warms it:

  all     every missed row is admitted (CLOCK, the SIEVE-like policy)
  seen    once full, a missed row is admitted only if it was offered
          before within a window of 2x the capacity's offers (what
          `RowAdmission::Seen`'s doorkeeper does with hashed bits)
  hot     only rows of the highest-degree vertices are admitted (what
          `RowAdmission::Hot` does with the store's hot table)
  static  no row is admitted after the warm-up

It counts lookups, not time: run `solidgraph-bench sampling --row-cache-share
0.8 --row-admission seen|all|hot` for the store's measured hit rates.

    .venv/bin/python benchmarks/row_admission_sim.py --scale 20 --share 0.052
"""

import argparse
from collections import deque

import numpy as np


def kronecker(scale, edge_factor, rng):
    n, m = 1 << scale, edge_factor << scale
    a, b, c = 0.57, 0.19, 0.19
    src = np.zeros(m, np.int64)
    dst = np.zeros(m, np.int64)
    ab = a + b
    for bit in range(scale):
        i = rng.random(m) > ab
        j = rng.random(m) > np.where(i, c / (1 - ab), a / ab)
        src += i << bit
        dst += j << bit
    perm = rng.permutation(n)
    src, dst = perm[src], perm[dst]
    keys = np.unique(np.concatenate([src * n + dst, dst * n + src]))
    s, d = keys // n, keys % n
    deg = np.bincount(s, minlength=n)
    indptr = np.concatenate([[0], np.cumsum(deg)])
    return n, deg, indptr, d


def batches(n, deg, indptr, d, count, rng):
    has = np.nonzero(deg)[0]
    for _ in range(count):
        frontier = rng.choice(has, 1024, replace=False)
        nodes = [frontier]
        for k in (25, 10):
            picked = []
            for v in frontier:
                lo, hi = indptr[v], indptr[v + 1]
                picked.append(d[lo:hi] if hi - lo <= k else d[lo + rng.choice(hi - lo, k, replace=False)])
            frontier = np.unique(np.concatenate(picked))
            nodes.append(frontier)
        yield np.unique(np.concatenate(nodes))


def hit_rate(policy, rows_of_batches, hot, capacity):
    if policy == "static":
        hits = sum(int(hot[u].sum()) for u in rows_of_batches)
        return hits / sum(len(u) for u in rows_of_batches)
    warm = np.nonzero(hot)[0].tolist()
    visited, ring, hits, total = dict.fromkeys(warm, False), deque(warm), 0, 0
    seen, marks = set(warm), len(warm)
    for u in rows_of_batches:
        u = u.tolist()
        total += len(u)
        for x in u:
            if x in visited:
                hits += 1
                visited[x] = True
        for x in u:
            if x in visited or (policy == "hot" and not hot[x]):
                continue
            if policy == "seen":
                again = x in seen
                seen.add(x)
                marks += not again
                if marks >= 2 * capacity:
                    seen, marks = set(), 0
                if not again and len(visited) >= capacity:
                    continue
            while len(visited) >= capacity:
                y = ring.popleft()
                if visited[y]:
                    visited[y] = False
                    ring.append(y)
                else:
                    del visited[y]
            visited[x] = False
            ring.append(x)
    return hits / total


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=int, default=20)
    p.add_argument("--edge-factor", type=int, default=16)
    p.add_argument("--share", type=float, default=0.052, help="cache capacity as a share of all rows")
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    rng = np.random.default_rng(a.seed)
    n, deg, indptr, d = kronecker(a.scale, a.edge_factor, rng)
    rows = list(batches(n, deg, indptr, d, a.batches, rng))
    capacity = int(a.share * n)
    hot = np.zeros(n, bool)
    hot[np.argsort(-deg, kind="stable")[:capacity]] = True
    print(f"Kronecker scale {a.scale}: {n} vertices, {len(d)} edges; {np.mean([len(r) for r in rows]):.0f} rows per batch; "
          f"cache of {capacity} rows ({100 * a.share:.1f}%) warmed with the highest-degree vertices' rows, {a.batches} batches")
    for policy in ("all", "seen", "hot", "static"):
        print(f"{policy:>7}: {100 * hit_rate(policy, rows, hot, capacity):.1f}% of rows hit")


if __name__ == "__main__":
    main()
