#!/usr/bin/env bash
# The long run of the kill -9 crash harness (crates/store/tests/kill9.rs):
# a child applies random durable update batches and merges to a store on
# the real backend and is killed at random moments (half the trials right
# after a merge begins); each reopen must recover a prefix of the batches
# holding every acknowledged one, and pass `verify`.
#
#   benchmarks/crash.sh [--trials N]     (default 1000)
set -euo pipefail
cd "$(dirname "$0")/.."
trials=1000
while [[ $# -gt 0 ]]; do
    case "$1" in
        --trials) trials="$2"; shift 2 ;;
        -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
        *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
cargo build --release -q -p solidgraph-store --tests
start=$(date +%s)
SG_CRASH_TRIALS="$trials" cargo test --release -q -p solidgraph-store --test kill9 -- --nocapture 2>&1 | grep -E "kill -9|test result|panicked|FAILED"
echo "crash.sh: $trials trials in $(( $(date +%s) - start )) s"
