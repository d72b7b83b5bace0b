"""The loader benchmark's store at a scale whose inputs and store do not fit
the disk together (scale 24 here): Kronecker edges (`_kron_npy.py`,
edge factor 16), imported undirected, deduplicated, in degree order (as
`solidgraph-bench sampling --prepare-only` builds the scale-22 one), the
edge file deleted as soon as the import has read it, then 128-dim random
features in [0, 1) made in memory (no file) and added with
`Graph.add_tensor` as "x". Prints a JSON report: seconds per step, the
import's report, the store's size and the peak bytes under --dir (sampled
every second).

    python benchmarks/loader_store.py --scale 24 --dir /work/bench/loader-s24 --dtype float16
"""

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

import solidgraph

sys.path.insert(0, str(Path(__file__).parent))
import _kron_npy  # noqa: E402

ROWS = 1 << 20


def du(path: Path) -> int:
    """Allocated bytes under path (sparse files count what is written)."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


class Peak(threading.Thread):
    def __init__(self, path: Path):
        super().__init__(daemon=True)
        self.path, self.peak, self.done = path, 0, threading.Event()

    def run(self):
        while not self.done.wait(1.0):
            self.peak = max(self.peak, du(self.path))


def features(n: int, dim: int, dtype: str, seed: int) -> np.ndarray:
    x = np.empty((n, dim), dtype=dtype)
    rng = np.random.default_rng(seed)
    for i in range(0, n, ROWS):
        x[i : i + ROWS] = rng.random((min(ROWS, n - i), dim), dtype=np.float32)
    return x


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, required=True)
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--dtype", choices=("float16", "float32"), default="float16")
    ap.add_argument("--memory-budget", type=int, default=1 << 30, help="the import's sort memory, bytes")
    a = ap.parse_args(argv)
    a.dir.mkdir(parents=True, exist_ok=True)
    edges, store, n = a.dir / f"s{a.scale}.npy", a.dir / "store", 1 << a.scale
    if store.exists():
        raise SystemExit(f"{store} exists")
    peak = Peak(a.dir)
    peak.start()
    rep = {"scale": a.scale, "dim": a.dim, "dtype": a.dtype}
    t = time.perf_counter()
    if not edges.exists():
        _kron_npy.generate(a.scale, str(edges))
        rep["generate_s"] = time.perf_counter() - t
    t = time.perf_counter()
    r = solidgraph.import_graph(store, str(edges), undirected=True, dedup=True, order="degree", num_nodes=n, memory_budget=a.memory_budget)
    rep["import_s"] = time.perf_counter() - t
    rep["import"] = dict(r)
    rep["peak_during_import"] = max(peak.peak, du(a.dir))
    edges.unlink()
    t = time.perf_counter()
    x = features(n, a.dim, a.dtype, seed=a.scale)
    rep["features_s"] = time.perf_counter() - t
    t = time.perf_counter()
    g = solidgraph.open(store, writable=True)
    g.add_tensor("x", x)
    del g, x
    rep["add_tensor_s"] = time.perf_counter() - t
    peak.done.set()
    peak.join()
    rep["store_bytes"] = du(store)
    rep["peak_bytes"] = max(peak.peak, rep["store_bytes"])
    print(json.dumps(rep, default=str), flush=True)


if __name__ == "__main__":
    main()
