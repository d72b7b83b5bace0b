"""igraph in memory as an outside reference for `bench analytics`.

Loads the CSR baseline files of a `bench analytics` work directory
(csr/rowptr.u64, csr/colidx.u32, csr/meta.json), builds an undirected igraph
graph (each edge once, self-loops kept as in the store), and times BFS from
the given source, connected components, PageRank (PRPACK: exact, not 10
power iterations) and coreness. Prints one JSON line. Build time is reported
separately; it is not part of any algorithm's time.

    .venv/bin/python benchmarks/_igraph_analytics.py DIR SOURCE
"""

import json
import sys
import time

import igraph
import numpy as np


def main():
    d, source = sys.argv[1], int(sys.argv[2])
    meta = json.load(open(f"{d}/csr/meta.json"))
    n, m = meta["nodes"], meta["edges"]
    rp = np.fromfile(f"{d}/csr/rowptr.u64", dtype=np.uint64, count=n + 1)
    ci = np.fromfile(f"{d}/csr/colidx.u32", dtype=np.uint32, count=m)
    t = time.perf_counter()
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(rp).astype(np.int64))
    keep = src <= ci
    edges = np.stack([src[keep], ci[keep].astype(np.int64)], axis=1)
    del src, keep
    g = igraph.Graph(n=n, edges=edges, directed=False)
    del edges
    out = {"nodes": n, "edges_once": g.ecount(), "build_seconds": time.perf_counter() - t}
    t = time.perf_counter()
    _, layers, _ = g.bfs(source)
    out["bfs_seconds"] = time.perf_counter() - t
    out["bfs_levels"] = len(layers) - 1
    t = time.perf_counter()
    comps = g.connected_components()
    out["wcc_seconds"] = time.perf_counter() - t
    out["wcc_components"] = len(comps)
    t = time.perf_counter()
    pr = g.pagerank(damping=0.85)
    out["pagerank_seconds"] = time.perf_counter() - t
    out["pagerank_sum"] = float(np.sum(pr))
    t = time.perf_counter()
    core = g.coreness()
    out["kcore_seconds"] = time.perf_counter() - t
    out["kcore_max"] = int(max(core))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
