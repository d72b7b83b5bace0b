"""infer_all out of core: time and bytes read per layer, per contender
`MODE:ROW_CACHE_BYTES`: MODE `pull` (each destination chunk gathers its
sources' rows; `row_cache_bytes` pins the most referenced ones) or `push`
(linear aggregations read the lower layer's rows once per destination
range; `row_cache_bytes` goes to the accumulators).

Each contender runs in a child process placed in a cgroup v1 memory group
with the same limit (`--mem-limit`), after `drop_caches`; contenders
alternate. Per layer (from the progress callback's phase changes) the child
records wall seconds and its /proc/self/io counters: `rchar` (bytes its read
calls returned: store pages and row-file pages, page-cache hits included)
and `read_bytes` (bytes fetched from the block device). Layer 1 includes the
degree pass that precedes it.

    .venv/bin/python benchmarks/inference_all.py --store /work/bench/rowcache-s22-e16-d128.sg \\
        --model /work/bench/infer-models/gcn128 --contenders pull:256M,push:256M --mem-limit 1536M
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup/memory/sg-inference-all")

CHILD = r"""
import json, os, sys, time
import solidgraph
store, model, name, chunk, pin, push = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "push"
def io():
    d = dict(l.split(": ") for l in open("/proc/self/io").read().splitlines())
    return int(d["rchar"]), int(d["read_bytes"])
marks = [("start", time.perf_counter(), *io())]
def progress(phase, done, total):
    if phase != marks[-1][0]:
        marks.append((phase, time.perf_counter(), *io()))
g = solidgraph.open(store)
t0 = time.perf_counter()
out = g.infer_all(model, out_tensor=name, chunk_bytes=chunk, row_cache_bytes=pin, progress=progress, push=push)
marks.append(("end", time.perf_counter(), *io()))
# A phase's counters run from its first callback to the next phase's first one.
layers = []
for (p, t, r, b), (_, t2, r2, b2) in zip(marks[1:], marks[2:]):
    layers.append({"phase": p, "seconds": t2 - t, "rchar": r2 - r, "read_bytes": b2 - b})
layers[0]["seconds"] += marks[1][1] - marks[0][1]
layers[0]["rchar"] += marks[1][2] - marks[0][2]
layers[0]["read_bytes"] += marks[1][3] - marks[0][3]
print(json.dumps({"total_seconds": time.perf_counter() - t0, "layers": layers, "head": out[:1000].tolist()}))
"""


def size(s: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * units[s[-1].upper()]) if s[-1].upper() in units else int(s)


def run(a, mode: str, pin: int, round_: int) -> dict:
    name = f"bench-{mode}-{pin}-{round_}"
    out_dir = Path(a.store) / "infer" / name
    shutil.rmtree(out_dir, ignore_errors=True)
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")
    env = dict(os.environ, RAYON_NUM_THREADS=str(a.threads))
    cmd = [sys.executable, "-c", CHILD, a.store, a.model, name, str(a.chunk_bytes), str(pin), mode]
    # The child joins the cgroup before it starts: the shell writes its own pid, then execs.
    shell = f"echo $$ > {CGROUP}/cgroup.procs && exec " + " ".join(shlex.quote(c) for c in cmd)
    r = subprocess.run(["sh", "-c", shell], env=env, capture_output=True, text=True)
    shutil.rmtree(out_dir, ignore_errors=True)
    if r.returncode != 0:
        raise SystemExit(f"contender {mode}:{pin} failed:\n{r.stderr[-3000:]}")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    res["mode"], res["row_cache_bytes"] = mode, pin
    res["max_usage"] = int((CGROUP / "memory.max_usage_in_bytes").read_text())
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--contenders", default="pull:256M,push:256M", help="MODE:ROW_CACHE_BYTES,... (MODE pull or push)")
    ap.add_argument("--chunk-bytes", type=size, default=256 << 20)
    ap.add_argument("--mem-limit", type=size, default=1536 << 20)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    CGROUP.mkdir(exist_ok=True)
    (CGROUP / "memory.limit_in_bytes").write_text(str(a.mem_limit))
    contenders = [(c.split(":")[0], size(c.split(":")[1])) for c in a.contenders.split(",")]
    assert all(m in ("pull", "push") for m, _ in contenders), contenders
    results = []
    try:
        for rnd in range(a.rounds):
            for mode, pin in contenders if rnd % 2 == 0 else contenders[::-1]:
                (CGROUP / "memory.max_usage_in_bytes").write_text("0")
                res = run(a, mode, pin, rnd)
                results.append(res)
                print(f"{mode}:{pin}: {res['total_seconds']:.1f} s, cgroup max usage {res['max_usage'] / 2**20:.0f} MiB", flush=True)
                for layer in res["layers"]:
                    print(
                        f"  {layer['phase']:12s} {layer['seconds']:8.1f} s  read calls {layer['rchar'] / 1e9:7.2f} GB  device {layer['read_bytes'] / 1e9:7.2f} GB",
                        flush=True,
                    )
    finally:
        CGROUP.rmdir()
    # Pushing sums in another order than pulling: equal within float rounding.
    import numpy as np

    ref = np.array(results[0]["head"])
    for r in results[1:]:
        err = float(np.abs(np.array(r["head"]) - ref).max() / max(np.abs(ref).max(), 1e-30))
        assert err < 1e-4, f"contenders disagree on the output: {r['mode']}:{r['row_cache_bytes']} by {err}"
    if a.json:
        Path(a.json).write_text(json.dumps({"args": vars(a), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
