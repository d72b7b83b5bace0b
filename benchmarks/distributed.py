"""Distributed sampling over shard servers against one server, same run.

    .venv/bin/python benchmarks/distributed.py [--scale 17] [--dim 128] [--batches 20] [--rounds 3]

Builds an R-MAT graph (2^scale vertices, 16 edges each, directed with
in-edges) with a float32 feature tensor `x` in a temporary directory. For
each partition method (hash, stream, and metis when pymetis is importable)
at 2 and 4 shards it reports the edge cut and balance. Then, alternating
contenders round by round, it samples `--batches` batches of 1024 seeds,
fanouts [25, 10], gathering `x`, one batch at a time:
  - single: one `solidgraph serve` of the whole store, SampleNeighbors;
  - shards=K (K = 1, 2, 4, stream partition): `solidgraph.distributed`
    over K shard servers, one ShardSample per shard per hop and one Tensor
    gather per shard, all shards in flight at once.
Prints seeds/s (median over rounds), its ratio to `single`, and the
protobuf bytes on the wire per batch. Every server runs on this machine,
so K shards share its cores: the figures measure the protocol's and the
client's costs, not scale-out (see docs/PERFORMANCE.md).

`--drives IOPS` (root, cgroup v1 blkio): every store moves to its own
"drive", an ext4 file system on a loop device (direct I/O over a backing
file) throttled to IOPS reads/s and writes/s in a blkio cgroup that holds
every server, as benchmarks/io_drives.py builds them: the single store on
drive 0, shard k of each K on drive k; servers get a `--cache` of
`--cache` bytes, so sampling is bound by the drives' IOPS. The rig is torn
down at exit.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import solidgraph
from solidgraph import distributed
from solidgraph.datasets import rmat_edges

BIN = os.environ.get("SOLIDGRAPH_BIN", "target/release/solidgraph")


BLKIO = "/sys/fs/cgroup/blkio"
CACHE = "256M"
CGROUP = None


class Drives:
    """Loop devices with ext4, mounted, throttled in one blkio cgroup."""

    def __init__(self, root, count, iops, size=4 << 30):
        self.loops, self.mounts, self.cg = [], [], None
        try:
            for i in range(count):
                img = root / f"drive{i}.img"
                with open(img, "wb") as f:
                    f.truncate(size)
                dev = subprocess.run(["losetup", "--find", "--show", "--direct-io=on", str(img)], capture_output=True, text=True, check=True).stdout.strip()
                self.loops.append(dev)
                subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True)
                mnt = root / f"mnt{i}"
                mnt.mkdir()
                subprocess.run(["mount", dev, str(mnt)], check=True)
                self.mounts.append(mnt)
            self.cg = os.path.join(BLKIO, f"sgdist-{os.getpid()}")
            os.mkdir(self.cg)
            for d in self.loops:
                st = os.stat(d)
                for knob in ("read_iops_device", "write_iops_device"):
                    with open(os.path.join(self.cg, f"blkio.throttle.{knob}"), "w") as f:
                        f.write(f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)} {iops}\n")
        except BaseException:
            self.close()
            raise

    def close(self):
        if self.cg:
            for _ in range(50):
                try:
                    os.rmdir(self.cg)
                    break
                except OSError:
                    time.sleep(0.1)
        for m in reversed(self.mounts):
            for _ in range(50):  # a server that just exited may still hold it
                if subprocess.run(["umount", str(m)], capture_output=True).returncode == 0:
                    break
                time.sleep(0.2)
        for d in reversed(self.loops):
            subprocess.run(["losetup", "-d", d], check=False)
        self.loops, self.mounts, self.cg = [], [], None


def place(src, dst):
    """Copies a store (or a shard's stores) onto a drive."""
    subprocess.run(["cp", "-r", str(src), str(dst)], check=True)
    return dst


class Server:
    def __init__(self, *stores):
        cmd = [BIN, "serve", *[str(s) for s in stores], "--read-only", "--listen", "127.0.0.1:0", "--cache", CACHE]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if CGROUP:
            with open(os.path.join(CGROUP, "cgroup.procs"), "w") as f:
                f.write(str(self.proc.pid))
        line = self.proc.stdout.readline()
        if not line.startswith("listening on "):
            self.proc.kill()
            raise SystemExit(f"server did not start: {line!r}")
        self.addr = line.split()[-1]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


def partition(store, out, parts, *method):
    r = subprocess.run([BIN, "partition", str(store), str(out), "--parts", str(parts), *method, "--json"], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stderr)
    return json.loads(r.stdout)


def metis_assignment(store, parts, tmp):
    from solidgraph.cli import _metis_args

    args = _metis_args(["partition", str(store), str(tmp / "unused"), "--parts", str(parts), "--method", "metis"], str(tmp))
    return args[-1]


def measure(g, batches, **kw):
    """Seeds/s over `batches`, one batch at a time, and wire bytes per batch."""
    g.sample_neighbors(batches[0], [25, 10], seed=1, tensors="x")  # warm connections
    before = g.wire_bytes() if hasattr(g, "wire_bytes") else (0, 0)
    t = time.perf_counter()
    for i, b in enumerate(batches):
        g.sample_neighbors(b, [25, 10], seed=100 + i, tensors="x", **kw)
    took = time.perf_counter() - t
    after = g.wire_bytes() if hasattr(g, "wire_bytes") else (0, 0)
    per = (after[0] - before[0] + after[1] - before[1]) / len(batches)
    return sum(len(b) for b in batches) / took, per


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=int, default=17)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workdir", type=Path)
    p.add_argument("--drives", type=int, metavar="IOPS", help="each store on its own loop-device drive throttled to IOPS (root)")
    p.add_argument("--cache", default=None, help="servers' page cache (default 256M; with --drives 8M)")
    p.add_argument("--no-partition-report", action="store_true", help="skip the edge-cut table")
    a = p.parse_args(argv)
    global CACHE, CGROUP
    CACHE = a.cache or ("8M" if a.drives else "256M")
    tmp = Path(tempfile.mkdtemp(prefix="sg-dist-", dir=a.workdir))
    n = 1 << a.scale
    src, dst = rmat_edges(a.scale, 16, seed=1)
    x = np.random.default_rng(2).standard_normal((n, a.dim), dtype=np.float32)
    store = tmp / "g"
    solidgraph.import_graph(store, (src, dst), {"x": x}, in_edges=True, dedup=True, num_nodes=n)
    del src, dst, x
    print(f"R-MAT scale {a.scale}: {n} vertices, {solidgraph.open(store).num_edges} edges, x {a.dim} float32")

    methods = [("hash", ["--method", "hash"]), ("stream", ["--method", "stream"])]
    try:
        import pymetis  # noqa: F401

        methods.append(("metis", None))
    except ImportError:
        print("pymetis not importable: no METIS row")
    for parts in () if a.no_partition_report else (2, 4):
        for name, args in methods:
            if args is None:
                args = ["--assignment", metis_assignment(store, parts, tmp)]
            t = time.perf_counter()
            r = partition(store, tmp / f"{name}{parts}", parts, *args)
            took = time.perf_counter() - t
            print(f"partition {name:6} K={parts}: edge cut {r['edge_cut']:.1%} ({r['cut_edges']} of {r['num_edges']}), balance {r['balance']:.3f}, {took:.1f} s")

    rng = np.random.default_rng(3)
    batches = [rng.choice(n, 1024, replace=False) for _ in range(a.batches)]
    servers = []
    contenders = {}
    drives = None
    try:
        for k in (1, 2, 4):
            if not (tmp / f"stream{k}").exists():
                partition(store, tmp / f"stream{k}", k, "--method", "stream")
        if a.drives:
            drives = Drives(tmp, 4, a.drives)
            CGROUP = drives.cg
            store = place(store, drives.mounts[0] / "g")
            print(f"stores on 4 loop-device drives, each throttled to {a.drives} IOPS; servers' cache {CACHE}")
        s = Server(store)
        servers.append(s)
        contenders["single"] = solidgraph.connect(s.addr, timeout=600)
        for k in (1, 2, 4):
            out = tmp / f"stream{k}"
            dirs = [out / f"shard-{i}" for i in range(k)]
            if drives:
                dirs = [place(d, drives.mounts[i] / f"k{k}-shard-{i}") for i, d in enumerate(dirs)]
            ss = [Server(*sorted(d.glob("adj-*")), d / "rows") for d in dirs]
            servers += ss
            contenders[f"shards={k}"] = distributed.connect([x.addr for x in ss], book=out / "book.sgb", timeout=120)
        results = {name: [] for name in contenders}
        wire = {}
        for _ in range(a.rounds):
            for name, g in contenders.items():
                rate, per = measure(g, batches)
                results[name].append(rate)
                wire[name] = per
        base = statistics.median(results["single"])
        for name, rates in results.items():
            med = statistics.median(rates)
            extra = f", {wire[name] / 2**20:.2f} MiB on the wire per batch" if wire[name] else ""
            print(f"{name:9} {med:9.0f} seeds/s ({med / base:.2f}x single; rounds: {', '.join(f'{r:.0f}' for r in rates)}){extra}")
    finally:
        for g in contenders.values():
            g.close()
        for s in servers:
            s.stop()
        if drives:
            drives.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
