"""Shared helpers for benchmarks/io_compare.py and benchmarks/io_drives.py.

Standard library only. Runs fio and `solidgraph-bench io --json` with the
same parameters and reads back comparable figures: IOPS, MiB/s and total
per-I/O latency percentiles (submission to completion).
"""

import json
import os
import shutil
import statistics
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def bench_bin():
    """SOLIDGRAPH_BENCH_BIN, else target/release/solidgraph-bench (built when missing)."""
    b = os.environ.get("SOLIDGRAPH_BENCH_BIN")
    if b:
        return b
    b = os.path.join(REPO, "target", "release", "solidgraph-bench")
    if not os.path.exists(b):
        log("building target/release/solidgraph-bench ...")
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "solidgraph-bench"], cwd=REPO, check=True)
    return b


def need_fio():
    if shutil.which("fio"):
        return
    log("fio not found; installing it with apt-get")
    r = subprocess.run(["apt-get", "install", "-y", "-q", "fio"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if r.returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        subprocess.run(["apt-get", "install", "-y", "-q", "fio"], stdout=subprocess.DEVNULL, check=True)
    if not shutil.which("fio"):
        sys.exit("fio is required (apt-get install fio)")


def parse_size(s):
    s = str(s).strip()
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
    low = s.lower().rstrip("b").rstrip("i")
    if low and low[-1] in units:
        return int(float(low[:-1]) * units[low[-1]])
    return int(low)


def fio_run(filenames, rw, bs, depth, seconds, size=None, engine="io_uring", dist=None, jobs=None, extra=()):
    """One fio invocation. `filenames` is a list; with jobs=None they are one
    job (fio's --filename=a:b, I/O spread over them); with jobs="per-file"
    each file gets its own job, all running at once, and the result is the
    sum of IOPS/bandwidth with the I/O-weighted mean of the percentiles."""
    common = [
        "--direct=1",
        f"--ioengine={engine}",
        f"--rw={rw}",
        f"--bs={bs}",
        f"--iodepth={depth}",
        f"--runtime={seconds}",
        "--time_based",
        "--lat_percentiles=1",
        "--percentile_list=50:99",
        "--output-format=json",
    ]
    if size:
        common.append(f"--size={size}")
    if dist and dist != "uniform":
        common.append(f"--random_distribution={dist}")
    common += list(extra)
    cmd = ["fio"]
    if jobs == "per-file":
        cmd += common
        for i, f in enumerate(filenames):
            cmd += [f"--name=j{i}", f"--filename={f}"]
    else:
        cmd += common + ["--name=j", "--filename=" + ":".join(f.replace(":", "\\:") for f in filenames)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"fio failed ({' '.join(cmd)}):\n{out.stderr.strip()}")
    j = json.loads(out.stdout[out.stdout.index("{"):])
    iops = mib = ios = 0.0
    p50 = p99 = 0.0
    for job in j["jobs"]:
        for d in ("read", "write"):
            st = job[d]
            if st["total_ios"] == 0:
                continue
            iops += st["iops"]
            mib += st["bw_bytes"] / (1 << 20)
            n = st["total_ios"]
            pct = st["lat_ns"].get("percentile", {})
            p50 += pct.get("50.000000", 0) / 1000 * n
            p99 += pct.get("99.000000", 0) / 1000 * n
            ios += n
    if ios:
        p50 /= ios
        p99 /= ios
    return {"iops": iops, "mib_s": mib, "p50_us": p50, "p99_us": p99}


def ours_run(paths, pattern, block, depth, seconds, size, backend=None, dist=None, stripe=None):
    cmd = [
        bench_bin(), "io",
        "--path", ",".join(paths),
        "--pattern", pattern,
        "--block", str(block),
        "--depth", str(depth),
        "--seconds", str(seconds),
        "--size", str(size),
        "--json",
    ]
    if backend:
        cmd += ["--backend", backend]
    if dist:
        cmd += ["--dist", dist]
    if stripe:
        cmd += ["--stripe", str(stripe)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"solidgraph-bench io failed ({' '.join(cmd)}):\n{out.stderr.strip()}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def fmt(x, unit=""):
    if x != x:  # nan
        return "-"
    if unit in ("IOPS",):
        return f"{x:,.0f}"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.1f}"


def table(rows, header):
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(str(c).rjust(w) if i > 0 else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(lines)
