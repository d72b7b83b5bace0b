"""The PyTorch NeighborLoader at a memory budget, in a cgroup v1 memory
group of the budget plus torch's own footprint (measured: the resident
set, VmRSS, of a child that imports torch and torch_geometric; the file
pages it read beyond that are reclaimable), against the same
loader with twice the budget. Contenders alternate, caches dropped before
each; a contender the kernel kills (OOM) is reported as such.

    python benchmarks/loader_memory.py --store demo-data/train-s23/store --budget 1G --batches 30
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup/memory/sg-loader-memory")

BASE = "import torch, torch_geometric.data, solidgraph.torch; print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmRSS')][0])"

CHILD = r"""
import json, sys, time
import numpy as np
import torch, torch_geometric.data
import solidgraph
from solidgraph.torch import NeighborLoader
store, budget, batches = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
g = solidgraph.open(store, cache_bytes=0)
rng = np.random.default_rng(0)
cand = rng.choice(g.num_nodes, 1024 * batches * 4, replace=False)
train = cand[np.asarray(g.degree(cand)) > 0][: 1024 * batches]
loader = NeighborLoader(g, train, [25, 10], batch_size=1024, shuffle=True, num_workers=2, prefetch=4, labels=None, seed=0, memory_budget=budget)
t0, seeds = time.perf_counter(), 0
for b in loader:
    seeds += b.batch_size
dt = time.perf_counter() - t0
print(json.dumps({"seeds_per_s": seeds / dt, "seconds": dt, "memory": loader.memory}))
"""


def size(s: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * units[s[-1].upper()]) if s[-1].upper() in units else int(s)


def in_cgroup(code: str, args: list, limit: int) -> subprocess.CompletedProcess:
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")
    (CGROUP / "memory.limit_in_bytes").write_text(str(limit))
    (CGROUP / "memory.max_usage_in_bytes").write_text("0")
    cmd = [sys.executable, "-c", code, *map(str, args)]
    shell = f"echo $$ > {CGROUP}/cgroup.procs && exec " + " ".join(shlex.quote(c) for c in cmd)
    return subprocess.run(["sh", "-c", shell], capture_output=True, text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True)
    ap.add_argument("--budget", type=size, default=1 << 30)
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    CGROUP.mkdir(exist_ok=True)
    r = in_cgroup(BASE, [], 1 << 40)
    if r.returncode != 0:
        raise SystemExit(r.stderr[-2000:])
    base = int(r.stdout.split()[-1]) * 1024
    print(f"torch + torch_geometric alone: {base / 2**20:.0f} MiB resident", flush=True)
    results = []
    for rnd in range(a.rounds):
        for k in (1, 2) if rnd % 2 == 0 else (2, 1):
            budget = k * a.budget
            r = in_cgroup(CHILD, [a.store, budget, a.batches], budget + base)
            peak = int((CGROUP / "memory.max_usage_in_bytes").read_text())
            res = {"budget": budget, "limit": budget + base, "peak": peak, "round": rnd}
            if r.returncode != 0:
                res["failed"] = "OOM-killed" if r.returncode in (-9, 137) else r.stderr[-1500:]
            else:
                res.update(json.loads(r.stdout.strip().splitlines()[-1]))
            results.append(res)
            what = res.get("failed") or f"{res['seeds_per_s']:.0f} seeds/s"
            print(f"budget {budget / 2**20:.0f} MiB (limit {res['limit'] / 2**20:.0f} MiB): {what}, cgroup peak {peak / 2**20:.0f} MiB", flush=True)
    ok = [r for r in results if "failed" not in r]
    for k in (1, 2):
        s = [r["seeds_per_s"] for r in ok if r["budget"] == k * a.budget]
        if s:
            print(f"{k}x budget: mean {sum(s) / len(s):.0f} seeds/s over {len(s)} runs")
    if a.json:
        Path(a.json).write_text(json.dumps({"torch_base": base, "results": results}, indent=1))


if __name__ == "__main__":
    main()
