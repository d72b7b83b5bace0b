# Sourced by the benchmark scripts, at the repository root: BENCH_BIN is
# $SOLIDGRAPH_BENCH_BIN, else target/release/solidgraph-bench, built first.
BENCH_BIN=${SOLIDGRAPH_BENCH_BIN:-}
if [ -z "$BENCH_BIN" ]; then
  cargo build --release -q -p solidgraph-bench
  BENCH_BIN=target/release/solidgraph-bench
fi
