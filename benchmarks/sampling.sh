#!/usr/bin/env bash
# GraphSAGE sampling out of core (issue 5): fanouts [25, 10], batch 1024
# seeds, 128-dim f32 features gathered, on a Graph500 Kronecker graph with
# the page cache at 5% of the store (cgroup v1 per contender, caches cold):
# SolidGraph against the same sampler over CSR + features in mmap (default
# and MADV_RANDOM), against the whole store cached (DRAM oracle), feature
# gather alone against mmap fancy indexing, and the device's random-read
# rates at depth 64 (bench io, 4 and 16 KiB reads) measured in the same run.
#
#   benchmarks/sampling.sh                   # scale 24, 20 batches, 1 round
#   benchmarks/sampling.sh --quick           # scale 18, few batches, < 1 minute (make demo)
#   benchmarks/sampling.sh --batches 60 --max-seconds 240 --kill-seconds 300 \
#     --skip gather-solidgraph,gather-mmap,gather-mmap-random
#                                            # every contender runs all 60 batches (~20 minutes):
#                                            # the open's warm-up weighs less, as in an epoch
#
# Other arguments go to `solidgraph-bench sampling` (see --help there).
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmarks/_bench_bin.sh
args=()
for a in "$@"; do
  if [ "$a" = "--quick" ]; then
    args+=(--scale 18 --batches 5 --gather-batches 2 --gather-rows 64000 --max-seconds 10 --kill-seconds 30 --io-seconds 2 --dir "${SOLIDGRAPH_BENCH_DIR:-/work/bench}/sampling-quick")
  else
    args+=("$a")
  fi
done
exec "$BENCH_BIN" sampling "${args[@]}"
