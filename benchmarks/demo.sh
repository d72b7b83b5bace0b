#!/usr/bin/env bash
# `make demo`: the main jobs on generated data, each side by side with its
# baseline, in a few minutes. Data goes to demo-data/ (make clean removes it).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p demo-data
export SOLIDGRAPH_BENCH_BIN="$PWD/target/release/solidgraph-bench"

echo "== 1/3 raw I/O: our volume engine vs fio on one file"
benchmarks/io.sh --quick --file demo-data/io.dat --size 1GiB

echo
# Every contender gets the same memory limit (5% of the store + 64 MiB):
# the mmap baselines' OS page cache lives in it, and SolidGraph's page cache
# is what its own process leaves of it (measured), so neither side's cache
# is smaller by the demo's choice.
echo "== 2/3 batched neighbor reads: a Kronecker graph (scale 20) on SSD pages vs CSR files (mmap, and our I/O engine), the same memory limit for each, cold"
benchmarks/neighbors.sh --scale 20 --batches 50 --rounds 1 --max-seconds 10 --dir demo-data/neighbors-s20

echo
echo "== 3/3 GraphSAGE on Cora, trained from a SolidGraph store on SSD (1 MiB page cache)"
.venv/bin/python examples/train_graphsage.py --quick
