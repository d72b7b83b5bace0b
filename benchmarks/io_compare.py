#!/usr/bin/env python3
"""SolidGraph's volume I/O against fio on one file, same parameters.

Called by benchmarks/io.sh (see there for usage). Every round runs each case's
fio job and our `solidgraph-bench io` back to back, alternating which goes
first, and the table reports the medians over the rounds. Standard library
only.

Cases and bars (the issue's acceptance figures):
  randread 4 KiB, depth 64   ours (io_uring) IOPS >= 95% of fio io_uring
  randread 4 KiB, depth 1    ours p50 latency within 10% of fio psync
  randread 4 KiB, depth 64   ours with the POSIX backend >= 70% of ours io_uring
  sequential read            ours MiB/s >= 95% of fio io_uring, same block/depth
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _iobench as B  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", default=os.environ.get("IO_BENCH_FILE", "/work/bench/io.dat"),
                    help="file to read (created and filled by solidgraph when missing; not on tmpfs: O_DIRECT)")
    ap.add_argument("--size", default="4GiB", help="size when the file has to be created (default 4GiB)")
    ap.add_argument("--seconds", type=float, default=6, help="seconds per run (default 6)")
    ap.add_argument("--rounds", type=int, default=5,
                    help="alternating rounds per case (default 5); medians of the values and of the per-round ratios")
    ap.add_argument("--seq-block", default="128k", help="block of the sequential case (default 128k)")
    ap.add_argument("--seq-depth", type=int, default=16, help="depth of the sequential case (default 16)")
    ap.add_argument("--cases", default="qd64,qd1,posix,seq", help="subset of qd64,qd1,posix,seq")
    ap.add_argument("--json", metavar="FILE", help="also write the raw runs and medians as JSON")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a bar is missed")
    a = ap.parse_args()

    B.need_fio()
    binary = B.bench_bin()
    path = a.file
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        B.log(f"creating {path} ({a.size}) with solidgraph-bench io ...")
        B.ours_run([path], "randread", 4096, 64, 0.1, B.parse_size(a.size))
    size = os.path.getsize(path)
    size -= size % (256 << 10)  # a volume member is whole stripe rows
    if size < (64 << 20):
        sys.exit(f"{path}: {size} bytes; need at least 64 MiB")
    secs = a.seconds
    seq_bs = B.parse_size(a.seq_block)
    cases = set(a.cases.split(","))
    B.log(f"io.sh: {path} ({size / (1 << 30):.2f} GiB), {a.rounds} round(s) of {secs:g} s per run, binary {binary}")

    # name -> list of result dicts
    runs = {}

    def rec(name, fn):
        r = fn()
        runs.setdefault(name, []).append(r)
        B.log(f"  {name:28s} {r['iops']:>10,.0f} IOPS {r['mib_s']:>9.1f} MiB/s  p50 {r['p50_us']:8.1f} us  p99 {r['p99_us']:8.1f} us")

    fsize = str(size)
    for rnd in range(a.rounds):
        B.log(f"round {rnd + 1}/{a.rounds}")
        steps = []
        if "qd64" in cases or "posix" in cases:
            group = [
                ("fio io_uring qd64", lambda: B.fio_run([path], "randread", 4096, 64, secs, fsize)),
                ("ours uring qd64", lambda: B.ours_run([path], "randread", 4096, 64, secs, size, backend="uring")),
            ]
            if "posix" in cases:
                group.append(("ours posix qd64", lambda: B.ours_run([path], "randread", 4096, 64, secs, size, backend="posix")))
            steps.append(group)
        if "qd1" in cases:
            steps.append([
                ("fio psync qd1", lambda: B.fio_run([path], "randread", 4096, 1, secs, fsize, engine="psync")),
                ("ours uring qd1", lambda: B.ours_run([path], "randread", 4096, 1, secs, size, backend="uring")),
            ])
        if "seq" in cases:
            steps.append([
                ("fio io_uring seq", lambda: B.fio_run([path], "read", seq_bs, a.seq_depth, secs, fsize)),
                ("ours uring seq", lambda: B.ours_run([path], "read", seq_bs, a.seq_depth, secs, size, backend="uring")),
            ])
        for group in steps:
            # Alternate who goes first, so a drifting machine favours neither.
            for name, fn in (group if rnd % 2 == 0 else list(reversed(group))):
                rec(name, fn)

    def med(name, key):
        return B.median([r[key] for r in runs.get(name, [])])

    rows = []
    verdicts = []

    def row(case, metric, base_name, ours_name, key, bar, higher_is_better=True):
        base, ours = med(base_name, key), med(ours_name, key)
        # The ratio is the median of the per-round ratios: each round's two
        # runs are neighbours in time, so a burst of load elsewhere on a
        # shared machine hits both (a ratio of medians would mix rounds).
        pairs = [o[key] / b[key] for b, o in zip(runs.get(base_name, []), runs.get(ours_name, [])) if b[key]]
        ratio = B.median(pairs)
        if bar is None:
            ok = "info"
        elif ratio != ratio:
            ok = "-"
        elif higher_is_better:
            ok = "yes" if ratio >= bar else "NO"
        else:
            ok = "yes" if ratio <= bar else "NO"
        verdicts.append(ok)
        bar_s = "-" if bar is None else (">= " if higher_is_better else "<= ") + f"{bar:.2f}"
        rows.append([case, metric, base_name, B.fmt(base), B.fmt(ours), f"{ratio:.2f}" if ratio == ratio else "-", bar_s, ok])

    if "qd64" in cases:
        row("randread 4k qd64", "IOPS", "fio io_uring qd64", "ours uring qd64", "iops", 0.95)
        row("randread 4k qd64", "p50 us", "fio io_uring qd64", "ours uring qd64", "p50_us", None, False)
    if "qd1" in cases:
        row("randread 4k qd1", "p50 us", "fio psync qd1", "ours uring qd1", "p50_us", 1.10, False)
        row("randread 4k qd1", "IOPS", "fio psync qd1", "ours uring qd1", "iops", None)
    if "posix" in cases:
        row("randread 4k qd64 POSIX", "IOPS", "ours uring qd64", "ours posix qd64", "iops", 0.70)
    if "seq" in cases:
        row(f"read {a.seq_block} qd{a.seq_depth}", "MiB/s", "fio io_uring seq", "ours uring seq", "mib_s", 0.95)

    print(f"\nfile {path}, {size / (1 << 30):.2f} GiB; {a.rounds} alternating round(s) x {secs:g} s; "
          "medians of the values and of the per-round ratios")
    print(B.table(rows, ["case", "metric", "baseline run", "baseline", "ours", "ratio", "bar", "met"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"file": path, "size": size, "seconds": secs, "rounds": a.rounds, "runs": runs,
                       "table": rows}, f, indent=1)
    if a.strict and "NO" in verdicts:
        sys.exit(1)


if __name__ == "__main__":
    main()
