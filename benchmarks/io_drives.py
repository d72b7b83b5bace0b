#!/usr/bin/env python3
"""Multi-drive benchmark after Falcon: one submitting thread over N drives.

Called by benchmarks/io_drives.sh (see there). As root, builds N "drives" as
loop devices with direct I/O over backing files, each throttled by a cgroup
v1 blkio limit (read and write IOPS per device), moves itself into that
cgroup (children inherit it) and, for N in --counts, compares

  ours    one thread, `solidgraph-bench io` on the striped volume over the N
          devices (depth --depth per member)
  fio1    one fio job with io_uring over the same devices
          (--filename=/dev/loopA:/dev/loopB:..., iodepth depth*N)
  ideal   Falcon's ideal: one fio job per device, all at once (sum of IOPS)

for random reads and writes with uniform and zipf offsets. The throttle
(--iops, default 3000 per drive) must keep N drives below what the one disk
under the backing files sustains: at 10000 per drive the 8-drive "ideal" of
random writes on a shared virtio disk was ~33K IOPS, the disk's limit, not
the drives'. Bars: ours >= 95% of ideal at every N, and ours >= fio1.
Loop devices and the cgroup are removed on exit (also on Ctrl-C); backing
files stay for the next run unless --remove-files. Standard library only.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _iobench as B  # noqa: E402

BLKIO = "/sys/fs/cgroup/blkio"


class Rig:
    """Loop devices + the blkio cgroup, torn down by close()."""

    def __init__(self, args):
        self.a = args
        self.loops = []
        self.cg = None

    def files(self, n):
        os.makedirs(self.a.dir, exist_ok=True)
        size = self.a.member_bytes
        block = os.urandom(1 << 20)
        out = []
        for i in range(n):
            p = os.path.join(self.a.dir, f"drive{i}.img")
            if not (os.path.exists(p) and os.path.getsize(p) == size):
                B.log(f"writing {p} ({size >> 20} MiB)")
                with open(p, "wb") as f:
                    left = size
                    while left:
                        k = min(left, len(block))
                        f.write(block[:k])
                        left -= k
                    f.flush()
                    os.fsync(f.fileno())
            out.append(p)
        return out

    def attach(self, files):
        for p in files:
            dev = subprocess.run(
                ["losetup", "--find", "--show", "--direct-io=on", "--sector-size", "4096", p],
                capture_output=True, text=True, check=True,
            ).stdout.strip()
            self.loops.append(dev)
            name = os.path.basename(dev)
            dio = open(f"/sys/block/{name}/loop/dio").read().strip()
            if dio != "1":
                raise RuntimeError(f"{dev}: direct I/O did not turn on (dio={dio})")
        return list(self.loops)

    def cgroup(self, devs):
        self.cg = os.path.join(BLKIO, f"sgbench-{os.getpid()}")
        os.mkdir(self.cg)
        for d in devs:
            st = os.stat(d)
            mm = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
            for knob in ("read_iops_device", "write_iops_device"):
                with open(os.path.join(self.cg, f"blkio.throttle.{knob}"), "w") as f:
                    f.write(f"{mm} {self.a.iops}\n")
        with open(os.path.join(self.cg, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    def close(self):
        if self.cg:
            try:
                with open(os.path.join(BLKIO, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
            except OSError as e:
                B.log(f"leaving {self.cg}: {e}")
            for _ in range(50):
                try:
                    os.rmdir(self.cg)
                    break
                except OSError:
                    time.sleep(0.1)
            else:
                B.log(f"could not remove {self.cg}")
            self.cg = None
        for d in reversed(self.loops):
            subprocess.run(["losetup", "-d", d], check=False)
        self.loops = []
        if self.a.remove_files:
            for i in range(max(self.a.counts)):
                p = os.path.join(self.a.dir, f"drive{i}.img")
                if os.path.exists(p):
                    os.remove(p)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--counts", default="1,2,4,8", help="drive counts (default 1,2,4,8)")
    ap.add_argument("--iops", type=int, default=3000,
                    help="blkio throttle per device, reads and writes (default 3000: eight drives must stay under what "
                         "the disk under /work/bench sustains, or the disk, not the drives, sets the 'ideal')")
    ap.add_argument("--depth", type=int, default=64, help="in flight per device (default 64)")
    ap.add_argument("--seconds", type=float, default=8, help="seconds per run (default 8)")
    ap.add_argument("--rounds", type=int, default=1, help="alternating rounds; medians reported (default 1)")
    ap.add_argument("--cases", default="randread:uniform,randread:zipf:1.2,randwrite:uniform,randwrite:zipf:1.2",
                    help="comma list of PATTERN:DIST (DIST uniform or zipf:THETA)")
    ap.add_argument("--dir", default=os.environ.get("IO_BENCH_DIR", "/work/bench/drives"),
                    help="backing files live here (default /work/bench/drives)")
    ap.add_argument("--member-size", default="512MiB", help="backing file per device (default 512MiB)")
    ap.add_argument("--remove-files", action="store_true", help="delete the backing files at the end")
    ap.add_argument("--json", metavar="FILE", help="also write raw runs and the table as JSON")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a bar is missed")
    a = ap.parse_args()
    a.counts = [int(x) for x in a.counts.split(",")]
    a.member_bytes = B.parse_size(a.member_size)
    a.member_bytes -= a.member_bytes % (256 << 10)  # whole stripe rows
    cases = []
    for c in a.cases.split(","):
        pat, _, dist = c.partition(":")
        cases.append((pat, dist or "uniform"))

    if os.geteuid() != 0:
        print("io_drives: skipped (needs root for loop devices and blkio cgroups)")
        return
    if not os.path.exists(os.path.join(BLKIO, "blkio.throttle.read_iops_device")):
        print(f"io_drives: skipped (no cgroup v1 blkio throttling at {BLKIO})")
        return
    B.need_fio()
    binary = B.bench_bin()

    rig = Rig(a)

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    runs = {}
    try:
        files = rig.files(max(a.counts))
        devs = rig.attach(files)
        rig.cgroup(devs)
        B.log(f"io_drives: {len(devs)} loop devices (direct I/O) over {a.dir}, {a.member_bytes >> 20} MiB each, "
              f"throttled to {a.iops} IOPS each (cgroup {rig.cg}); {a.rounds} round(s) x {a.seconds:g} s; binary {binary}")
        k = 0
        for rnd in range(a.rounds):
            for n in a.counts:
                d = devs[:n]
                for pat, dist in cases:
                    steps = [
                        ("ours", lambda: B.ours_run(d, pat, 4096, a.depth, a.seconds, n * a.member_bytes, backend="uring", dist=dist)),
                        ("fio1", lambda: B.fio_run(d, pat, 4096, a.depth * n, a.seconds, dist=dist)),
                        ("ideal", lambda: B.fio_run(d, pat, 4096, a.depth, a.seconds, dist=dist, jobs="per-file")),
                    ]
                    # Rotate the order so that none always runs first.
                    steps = steps[k % 3:] + steps[:k % 3]
                    k += 1
                    for who, fn in steps:
                        r = fn()
                        runs.setdefault(f"{n}|{pat}|{dist}|{who}", []).append(r)
                        B.log(f"  N={n} {pat:9s} {dist:9s} {who:5s} {r['iops']:>9,.0f} IOPS  p50 {r['p50_us']:8.1f} us  p99 {r['p99_us']:8.1f} us")
    except KeyboardInterrupt as e:
        B.log(f"interrupted ({e}); cleaning up")
        rig.close()
        sys.exit(130)
    finally:
        rig.close()

    rows = []
    missed = False
    for n in a.counts:
        for pat, dist in cases:
            got = {w: [r["iops"] for r in runs.get(f"{n}|{pat}|{dist}|{w}", [])] for w in ("ours", "fio1", "ideal")}
            m = {w: B.median(v) for w, v in got.items()}
            # Medians of the per-round ratios (a round's runs are neighbours in time).
            r_ideal = B.median([o / b for o, b in zip(got["ours"], got["ideal"]) if b])
            r_fio1 = B.median([o / b for o, b in zip(got["ours"], got["fio1"]) if b])
            ok = r_ideal >= 0.95 and r_fio1 >= 1.0
            missed |= not ok
            rows.append([str(n), pat, dist, B.fmt(m["ours"]), B.fmt(m["fio1"]), B.fmt(m["ideal"]),
                         f"{r_ideal:.3f}", f"{r_fio1:.3f}", "yes" if ok else "NO"])
    print(f"\n{a.iops} IOPS per device (blkio throttle), 4 KiB, depth {a.depth} per device; "
          f"{a.rounds} round(s) x {a.seconds:g} s; medians of values and of per-round ratios")
    print(B.table(rows, ["drives", "pattern", "dist", "ours", "fio 1 job", "ideal", "ours/ideal", "ours/fio1",
                         "met (>=0.95, >=1)"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"iops_per_device": a.iops, "depth": a.depth, "seconds": a.seconds, "rounds": a.rounds,
                       "runs": runs, "table": rows}, f, indent=1)
    if a.strict and missed:
        sys.exit(1)


if __name__ == "__main__":
    main()
