#!/bin/bash
# More cache is never slower (issue 33): for each pair, each binary runs the
# cached analytics worker with a 128 MiB and a 2 GiB page cache, in that
# order, caches dropped before every process; prints each process's run
# times (warm-up runs, then the timed one). Needs root (drop_caches).
# usage: benchmarks/cache_pairs.sh ALGO PAIRS ITERATIONS BIN...
set -euo pipefail
ALGO=$1; PAIRS=$2; ITER=$3; shift 3
D=${DATA:-demo-data/analytics-s23}
for p in $(seq 1 "$PAIRS"); do
  for BIN in "$@"; do
    for C in 134217728 2147483648; do
      sync; echo 3 > /proc/sys/vm/drop_caches
      OUT=$("$BIN" analytics-worker --dir "$D" --contender cached --algo "$ALGO" --source 6808296 --iterations "$ITER" \
        --cache-bytes "$C" --inflight 64 --out "/tmp/cache-pairs-$$.bin" 2>&1 | tail -1)
      echo "$BIN $ALGO pair=$p cache=$C load=$(cut -d' ' -f1 /proc/loadavg) $(echo "$OUT" | python3 -c \
        'import json,sys; d=json.loads(sys.stdin.read()); print("runs", [round(x,2) for x in d["warmup_runs"]] + [round(d["seconds"],2)])' 2>/dev/null || echo "$OUT")"
    done
  done
done
