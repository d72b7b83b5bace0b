"""The PyTorch NeighborLoader at a memory budget, in a cgroup v1 memory
group of the budget plus torch's own footprint (measured: the resident
set, VmRSS, of a child that imports torch and torch_geometric; the file
pages it read beyond that are reclaimable), against the same
loader with twice the budget. Contenders alternate, caches dropped before
each; a contender the kernel kills (OOM) is reported as such. Each run
reports where its time went: page and row cache hit rates and MiB read per
batch (the loader's own store handle), the consumer's wait for batches,
the workers' waits for the buffer cap, and the groups sampled ahead.
`--builds name=DIR,...` alternates builds too (DIR holds a `solidgraph`
package, put first on PYTHONPATH; `current` is the installed one;
`name=DIR;VAR=VALUE;...` also sets environment variables).

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
import json, resource, sys, time
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
t0, seeds, wait, n = time.perf_counter(), 0, 0.0, 0
ru0 = resource.getrusage(resource.RUSAGE_SELF)
it = iter(loader)
while True:
    t = time.perf_counter()
    b = next(it, None)
    wait += time.perf_counter() - t
    if b is None:
        break
    seeds, n = seeds + b.batch_size, n + 1
    del b
dt = time.perf_counter() - t0
ru = resource.getrusage(resource.RUSAGE_SELF)
cpu = ru.ru_utime + ru.ru_stime - ru0.ru_utime - ru0.ru_stime
st = loader._store.stats()
pipe = loader.stats["pipeline"] if hasattr(type(loader), "stats") else None
rate = lambda h, m: h / max(h + m, 1)
print(json.dumps({"seeds_per_s": seeds / dt, "seconds": dt, "cpu_s": cpu, "memory": loader.memory, "wait_s": wait, "pipeline": pipe,
    "page_hits": rate(st["cache_hits"], st["cache_misses"]), "row_hits": rate(st["row_cache_hits"], st["row_cache_misses"]),
    "mib_read_per_batch": st["bytes_read"] / 2**20 / max(n, 1), "batches": n,
    "page_misses_per_batch": st["cache_misses"] / max(n, 1), "row_misses_per_batch": st["row_cache_misses"] / max(n, 1),
    "status": {l.split(":")[0]: int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.split(":")[0] in ("VmHWM", "RssAnon", "RssFile")}}))
"""


def size(s: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * units[s[-1].upper()]) if s[-1].upper() in units else int(s)


def in_cgroup(code: str, args: list, limit: int, path: str = "", extra_env: dict = {}) -> subprocess.CompletedProcess:
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")
    (CGROUP / "memory.limit_in_bytes").write_text(str(limit))
    (CGROUP / "memory.max_usage_in_bytes").write_text("0")
    cmd = [sys.executable, "-c", code, *map(str, args)]
    shell = f"echo $$ > {CGROUP}/cgroup.procs && exec " + " ".join(shlex.quote(c) for c in cmd)
    env = dict(os.environ, PYTHONWARNINGS="ignore", **extra_env)
    if path:
        env["PYTHONPATH"] = os.pathsep.join([path, env.get("PYTHONPATH", "")])
    return subprocess.run(["sh", "-c", shell], capture_output=True, text=True, env=env)


def describe(res: dict) -> str:
    if "failed" in res:
        return res["failed"]
    m = res["memory"]
    out = (
        f"{res['seeds_per_s']:.0f} seeds/s; caches {m['cache_bytes'] / 2**20:.0f}+{m['row_cache_bytes'] / 2**20:.0f} MiB, cap {m['buffer_bytes'] / 2**20:.0f} MiB; "
        f"page hits {res['page_hits']:.1%}, row hits {res['row_hits']:.1%}, misses/batch {res['page_misses_per_batch']:.0f} pages {res['row_misses_per_batch']:.0f} rows, {res['mib_read_per_batch']:.1f} MiB read/batch; waited {res['wait_s']:.1f} of {res['seconds']:.1f} s, CPU {res['cpu_s']:.1f} s"
    )
    st = res.get("status")
    if st:
        out += f"; anon {st['RssAnon'] / 2**20:.0f} MiB, file {st['RssFile'] / 2**20:.0f} MiB, hwm {st['VmHWM'] / 2**20:.0f} MiB"
    p = res.get("pipeline")
    if p:
        out += f"; cap waits {p['cap_waits']} ({p['cap_wait_s']:.1f} s), groups {p['drawn'] / max(p['draws'], 1):.1f} batches, peak held {p['peak_held'] / 2**20:.0f} MiB"
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True)
    ap.add_argument("--budget", type=size, default=1 << 30)
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--factor", type=float, default=2.0, help="the larger budget, as a multiple of --budget")
    ap.add_argument("--builds", default="current", help="name=DIR,... alternated (current: the installed package)")
    ap.add_argument("--slack", type=size, default=0, help="added to every cgroup limit (to tell memory pressure from the split)")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    builds = [(b.split("=", 1) + [""])[:2] for b in a.builds.split(",")]
    envs = {name: dict(kv.split("=", 1) for kv in spec.split(";")[1:]) for name, spec in builds}
    builds = [(name, spec.split(";")[0]) for name, spec in builds]
    CGROUP.mkdir(exist_ok=True)
    r = in_cgroup(BASE, [], 1 << 40)
    if r.returncode != 0:
        raise SystemExit(r.stderr[-2000:])
    base = int(r.stdout.split()[-1]) * 1024
    print(f"torch + torch_geometric alone: {base / 2**20:.0f} MiB resident", flush=True)
    results = []
    factors = (1.0,) if a.factor == 1 else (1.0, a.factor)
    runs = [(name, path, k) for name, path in builds for k in factors]
    for rnd in range(a.rounds):
        for name, path, k in runs if rnd % 2 == 0 else runs[::-1]:
            budget = int(k * a.budget)
            r = in_cgroup(CHILD, [a.store, budget, a.batches], budget + base + a.slack, path, envs[name])
            peak = int((CGROUP / "memory.max_usage_in_bytes").read_text())
            res = {"build": name, "budget": budget, "limit": budget + base + a.slack, "peak": peak, "round": rnd}
            if r.returncode != 0:
                res["failed"] = "OOM-killed" if r.returncode in (-9, 137) else r.stderr[-1500:]
            else:
                res.update(json.loads(r.stdout.strip().splitlines()[-1]))
            results.append(res)
            print(f"{name} budget {budget / 2**20:.0f} MiB (limit {res['limit'] / 2**20:.0f} MiB): {describe(res)}, cgroup peak {peak / 2**20:.0f} MiB", flush=True)
    ok = [r for r in results if "failed" not in r]
    for name, _ in builds:
        med = {}
        for k in factors:
            s = sorted(r["seeds_per_s"] for r in ok if r["build"] == name and r["budget"] == int(k * a.budget))
            if s:
                med[k] = s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2
                print(f"{name} {k}x budget: median {med[k]:.0f}, mean {sum(s) / len(s):.0f} seeds/s over {len(s)} runs")
        pairs = [
            (a2["seeds_per_s"] / a1["seeds_per_s"])
            for a1 in ok for a2 in ok
            if a1["build"] == a2["build"] == name and a1["round"] == a2["round"] and a1["budget"] == int(a.budget) and a2["budget"] == int(a.factor * a.budget)
        ]
        if pairs and len(factors) > 1:
            pairs.sort()
            print(f"{name} {a.factor}x/1x per round: {', '.join(f'{p:.2f}' for p in pairs)}; median {pairs[len(pairs) // 2]:.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps({"torch_base": base, "results": results}, indent=1))


if __name__ == "__main__":
    main()
