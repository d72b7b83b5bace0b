"""CPU time a SampleNeighbors call costs each process, in process and
through the server, one call at a time (what decides the sampling bar on a
machine whose cores the server and its clients share).

    .venv/bin/python benchmarks/server_cpu.py [--scale 16] [--calls 40] [--rounds 3]

Same graph and calls as benchmarks/server.py's sample workload (R-MAT,
1024 seeds, fanouts [25, 10], x 128 float32, all warm). Four contenders:
in process, through the server (`serve --shm`) with the native client's
replies in shared memory (`connect(shm=True)`), the native client over TCP
(`shm=False`), and grpcio (`connect(native=False)`). For each round, each in
turn (the order rotating round by round): wall time a
call, this process's CPU a call (getrusage), and the server's CPU a call
(utime + stime from /proc/PID/stat).
"""

import argparse
import os
import resource
import subprocess
import tempfile
import time

import numpy as np

import solidgraph
from solidgraph.datasets import rmat_edges

BIN = os.environ.get("SOLIDGRAPH_BIN", "target/release/solidgraph")


def own_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cpu_of(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=int, default=16)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as tmp:
        path = os.path.join(tmp, "g")
        n = 1 << a.scale
        src, dst = rmat_edges(a.scale, 16, seed=1)
        x = np.random.default_rng(0).standard_normal((n, a.dim), dtype=np.float32)
        solidgraph.import_graph(path, (src, dst), {"x": x}, undirected=True, dedup=True, num_nodes=n)
        del src, dst, x
        cache = str(2 << 30)
        proc = subprocess.Popen([BIN, "serve", path, "--read-only", "--listen", "127.0.0.1:0", "--cache", cache, "--shm"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            addr = proc.stdout.readline().split()[-1]
            graphs = {
                "in-process": solidgraph.open(path, cache_bytes=int(cache)),
                "native+shm": solidgraph.connect(addr, shm=True),
                "native": solidgraph.connect(addr, shm=False),
                "grpcio": solidgraph.connect(addr, native=False),
            }
            rng = np.random.default_rng(7)
            batches = [rng.integers(0, n, 1024) for _ in range(64)]
            for g in graphs.values():
                for b in batches:
                    g.sample_neighbors(b, [25, 10], seed=0, tensors="x")
            for r in range(a.rounds):
                order = list(graphs.items())
                k = r % len(order)
                for name, g in order[k:] + order[:k]:
                    c0, s0, t0 = own_cpu(), cpu_of(proc.pid), time.perf_counter()
                    for k in range(a.calls):
                        g.sample_neighbors(batches[k % 64], [25, 10], seed=k, tensors="x")
                    wall = (time.perf_counter() - t0) / a.calls
                    mine, server = (own_cpu() - c0) / a.calls, (cpu_of(proc.pid) - s0) / a.calls
                    print(f"round {r} {name:10} | {wall * 1e3:6.1f} ms a call | CPU a call: caller {mine * 1e3:5.1f} ms, server {server * 1e3:5.1f} ms", flush=True)
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
