#!/usr/bin/env bash
# SolidGraph volume I/O vs fio on the same file with the same parameters.
#
#   benchmarks/io.sh [--file PATH] [--seconds S] [--rounds N] [--quick] [--strict] [--json OUT]
#
# Runs fio and `solidgraph-bench io --json` alternately (N rounds each) and
# prints one table: medians of the values, and the median of the per-round
# ratios (each round's runs are neighbours in time), with the bars:
#   randread 4 KiB qd64: ours io_uring >= 95% of fio io_uring (IOPS)
#   randread 4 KiB qd1:  ours p50 latency within 10% of fio psync
#   randread 4 KiB qd64: ours POSIX backend >= 70% of ours io_uring
#   sequential read (128 KiB, qd16): ours MiB/s vs fio io_uring (>= 95%)
# Defaults: --file /work/bench/io.dat (or $IO_BENCH_FILE; created and filled
# with --size, default 4GiB, when missing), --seconds 6, --rounds 5.
# --quick is --seconds 5 --rounds 1 (about 40 s, for `make demo`).
# Installs fio with apt-get when missing; builds
# target/release/solidgraph-bench when missing (or set SOLIDGRAPH_BENCH_BIN).
# Extra options: see io_compare.py -h.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
args=()
for a in "$@"; do
  case "$a" in
    --quick) args+=(--seconds 5 --rounds 1) ;;
    *) args+=("$a") ;;
  esac
done
exec python3 "$here/io_compare.py" "${args[@]}"
