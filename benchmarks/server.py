"""Throughput and latency of the gRPC server against the same calls in
process, in the same run (alternating contenders per client count).

    .venv/bin/python benchmarks/server.py [--scale 18] [--dim 128] [--seconds 5]

Builds an R-MAT graph (2^scale vertices, 16 edges each, undirected) with a
float32 feature tensor in a temporary directory, starts `solidgraph serve`
on loopback (SOLIDGRAPH_BIN, or target/release/solidgraph), and at 1, 4, 16
and 64 client threads measures for each contender:
  - sample: SampleNeighbors, batch 1024 seeds, fanouts [25, 10], gathering
    the features: seeds/s and p50/p99 latency;
  - small: one vertex's neighbours (warm cache): requests/s, p50/p99;
  - loader: a training loop's batches (`sample_loader`, 1024 seeds,
    [25, 10], gathering the features; the local loader prefetches on its
    threads, the remote one keeps `prefetch` requests in flight): seeds/s
    over --loader-batches batches, one loader at a time.
In process, the threads share one `solidgraph.open` Graph (the GIL is
released inside each call); remote, each thread has its own channel
(the native client, its replies through shared memory unless --tcp, or
grpcio's with --grpcio), kept across runs.
Every point runs --rounds times, the two contenders alternating (which
goes first alternates too); prints
each round, then the median ratio and its spread (min-max). The machine's
other load adds noise: compare ratios within a run.
"""

import argparse
import os
import subprocess
import tempfile
import threading
import time

import numpy as np

import solidgraph
from solidgraph.datasets import rmat_edges

BIN = os.environ.get("SOLIDGRAPH_BIN", "target/release/solidgraph")


def run(threads, seconds, make_call):
    """Runs make_call(i)() in `threads` threads for `seconds`; returns
    (calls, latencies in seconds). Each thread makes its call and runs it
    once before the clock starts (a remote client's connection and its
    shared-memory region are set up once, not per window)."""
    lat = [[] for _ in range(threads)]
    errors = []
    # (end, start) of the timed window, set once every thread is warm.
    window = [0.0, 0.0]

    def begin():
        now = time.monotonic()
        window[:] = [now + seconds, now]

    ready = threading.Barrier(threads + 1, action=begin)

    def worker(i):
        call = None
        try:
            call = make_call(i)
            call()  # warm the connection and this thread's state
        except Exception as e:  # noqa: BLE001
            errors.append(e)
        ready.wait()
        if call is None:
            return
        try:
            while time.monotonic() < window[0]:
                t = time.perf_counter()
                call()
                lat[i].append(time.perf_counter() - t)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    ready.wait()
    for t in ts:
        t.join()
    took = time.monotonic() - window[1]
    if errors:
        raise errors[0]
    all_lat = np.concatenate([np.array(x) for x in lat])
    return len(all_lat) / took, all_lat


def fmt(rate, lat, unit):
    return f"{rate:10.0f} {unit}  p50 {np.percentile(lat, 50) * 1e3:7.2f} ms  p99 {np.percentile(lat, 99) * 1e3:7.2f} ms"


def summary(what, ratios):
    if len(ratios) > 1:
        print(f"{what}: server/in-process median {np.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f}, {len(ratios)} rounds)", flush=True)


def loader_rounds(a, local, remote, n):
    """Seeds/s of a whole pass of sample_loader, local and remote
    alternating round by round (each pass draws its own batches)."""
    ratios = []
    for r in range(a.rounds):
        batches = [np.random.default_rng(100 + r).integers(0, n, 1024) for _ in range(a.loader_batches)]
        rate = {}
        order = [("server", remote), ("in-process", local)]
        for name, g in order if r % 2 == 0 else order[::-1]:
            t = time.perf_counter()
            for _ in g.sample_loader(batches, [25, 10], seed=r, tensors="x"):
                pass
            rate[name] = 1024 * len(batches) / (time.perf_counter() - t)
        ratios.append(rate["server"] / rate["in-process"])
        print(f"loader round {r} | server {rate['server']:10.0f} seeds/s | in-process {rate['in-process']:10.0f} seeds/s | server/in-process {ratios[-1]:.2f}", flush=True)
    summary("loader", ratios)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=int, default=18)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--clients", default="1,4,16,64")
    ap.add_argument("--cache-bytes", type=int, default=2 << 30, help="page cache of each contender")
    ap.add_argument("--workloads", default="sample,small,loader")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--loader-batches", type=int, default=64)
    ap.add_argument("--grpcio", action="store_true", help="remote calls through grpcio instead of the native client")
    ap.add_argument("--tcp", action="store_true", help="the native client's replies over TCP, not shared memory (serve --shm)")
    a = ap.parse_args()
    clients = [int(c) for c in a.clients.split(",")]
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as tmp:
        path = os.path.join(tmp, "g")
        n = 1 << a.scale
        src, dst = rmat_edges(a.scale, 16, seed=1)
        x = np.random.default_rng(0).standard_normal((n, a.dim), dtype=np.float32)
        t = time.monotonic()
        solidgraph.import_graph(path, (src, dst), {"x": x}, undirected=True, dedup=True, num_nodes=n)
        print(f"graph: 2^{a.scale} vertices, {len(src)} edges, x {a.dim} float32; import {time.monotonic() - t:.1f} s", flush=True)
        del src, dst, x
        serve = [BIN, "serve", path, "--read-only", "--listen", "127.0.0.1:0", "--cache", str(a.cache_bytes), "--max-concurrent", "64", "--shm"]
        proc = subprocess.Popen(serve, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            addr = proc.stdout.readline().split()[-1]
            local = solidgraph.open(path, cache_bytes=a.cache_bytes)

            shm = not (a.grpcio or a.tcp)

            def connect():
                # Two 16 MiB slots a client: one call in flight, its reply
                # dropped before the next.
                return solidgraph.connect(addr, native=not a.grpcio, shm=shm, shm_bytes=32 << 20)

            # One connection per client thread, kept across runs: a
            # region is registered (and faulted in) once per connection.
            conns = {}

            def client(i):
                if i not in conns:
                    conns[i] = connect()
                return conns[i]

            rng = np.random.default_rng(7)
            batches = [rng.integers(0, n, 1024) for _ in range(64)]
            hot = rng.integers(0, n, 256)

            def local_sample(i):
                k = [i]
                return lambda: (local.sample_neighbors(batches[k[0] % 64], [25, 10], seed=k[0], tensors="x"), k.__setitem__(0, k[0] + 1))

            def remote_sample(i):
                g = client(i)
                k = [i]
                return lambda: (g.sample_neighbors(batches[k[0] % 64], [25, 10], seed=k[0], tensors="x"), k.__setitem__(0, k[0] + 1))

            def local_small(i):
                k = [i]
                return lambda: (local.neighbors(hot[k[0] % 256 : k[0] % 256 + 1]), k.__setitem__(0, k[0] + 1))

            def remote_small(i):
                g = client(i)
                k = [i]
                return lambda: (g.neighbors(hot[k[0] % 256 : k[0] % 256 + 1]), k.__setitem__(0, k[0] + 1))

            # Warm both caches with every batch once.
            for b in batches:
                local.sample_neighbors(b, [25, 10], seed=0, tensors="x")
            warm = connect()
            for b in batches:
                warm.sample_neighbors(b, [25, 10], seed=0, tensors="x")
            remote = connect()
            runs = {"sample": (local_sample, remote_sample, "seeds/s", 1024), "small": (local_small, remote_small, "req/s", 1)}
            for workload in a.workloads.split(","):
                if workload == "loader":
                    loader_rounds(a, local, remote, n)
                    continue
                lo, re_, unit, per = runs[workload]
                for c in clients:
                    ratios = []
                    for r in range(a.rounds):
                        # Alternate which contender goes first, so that a
                        # drift in the machine's load favours neither.
                        if r % 2 == 0:
                            r_rate, r_lat = run(c, a.seconds, re_)
                            l_rate, l_lat = run(c, a.seconds, lo)
                        else:
                            l_rate, l_lat = run(c, a.seconds, lo)
                            r_rate, r_lat = run(c, a.seconds, re_)
                        ratios.append(r_rate / l_rate)
                        print(
                            f"{workload:6} {c:3} clients | server {fmt(r_rate * per, r_lat, unit)} | in-process {fmt(l_rate * per, l_lat, unit)} | server/in-process {r_rate / l_rate:.2f}",
                            flush=True,
                        )
                    summary(f"{workload} {c} clients", ratios)
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
