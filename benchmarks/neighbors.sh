#!/usr/bin/env bash
# Batched neighbor reads of random vertices on a Graph500 Kronecker graph:
# SolidGraph against the same graph as plain CSR files (mmap, mmap with
# MADV_RANDOM, and CSR read with our own I/O engine), in one run, each under
# the same memory limit (5% of the store + 64 MiB; a cgroup per contender
# when root): the mmap contenders' OS page cache lives in it, SolidGraph's
# page cache is the limit less its process's measured footprint; caches
# cold. Defaults are the issue's configuration: scale 23, edge
# factor 16, undirected. The edge file, store and CSR stay in the work
# directory (default /work/bench/neighbors-s23) and are reused; --fresh
# rebuilds them.
#
#   benchmarks/neighbors.sh                       # scale 23, 200 batches x 1024, 3 rounds
#   benchmarks/neighbors.sh --scale 20 --batches 50 --rounds 1 --dir demo-data/neighbors-s20
#   benchmarks/neighbors.sh --json                # one JSON object
#
# Any argument goes to `solidgraph-bench neighbors` (see --help there).
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmarks/_bench_bin.sh
exec "$BENCH_BIN" neighbors "$@"
