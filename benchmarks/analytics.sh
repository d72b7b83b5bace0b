#!/usr/bin/env bash
# Out-of-core analytics (issue 6): BFS, WCC, PageRank (10 iterations) and
# k-core on a Graph500 Kronecker graph, SolidGraph's engine with a memory
# budget of 10% of the store (cgroup v1 per run, caches cold) against the
# same algorithms over plain CSR in mmap (default and MADV_RANDOM) under the
# same limit, and against SolidGraph with the whole store cached; the
# device's sequential bandwidth (bench io --pattern read --block 1MiB) is
# measured in the same run. Results are verified across contenders.
#
#   benchmarks/analytics.sh                  # scale 24, edge factor 16, 1 round
#   benchmarks/analytics.sh --quick          # scale 18, < 1 minute (make demo)
#   benchmarks/analytics.sh --rounds 3 --json
#
# Other arguments go to `solidgraph-bench analytics` (see --help there).
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmarks/_bench_bin.sh
args=()
for a in "$@"; do
  if [ "$a" = "--quick" ]; then
    args+=(--scale 18 --baseline-max-seconds 20 --max-seconds 60 --io-seconds 2 --dir "${SOLIDGRAPH_BENCH_DIR:-/work/bench}/analytics-quick")
  else
    args+=("$a")
  fi
done
exec "$BENCH_BIN" analytics "${args[@]}"
