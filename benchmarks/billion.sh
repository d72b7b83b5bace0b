#!/usr/bin/env bash
# A Kronecker graph end to end inside one memory cgroup (issue 33, part 4:
# scale 26 is 1,073,741,824 input edges and 67,108,864 vertices): the
# edge list (uint32 .npy, `_kron_npy.py --u32`) and 128-dim float16
# features (a .npy written in chunks) are made if missing; then, each step
# in a cgroup v1 memory group of --mem with the page cache dropped before:
# the import (undirected, dedup, degree order, lower lists, the features as
# tensor "x") with its wall time, CPU, peak RSS and the disk it took at its
# peak (df sampled every second); BFS, WCC, PageRank (20 iterations) and
# k-core with a 256 MiB page cache; a sampling run of the PyTorch loader
# (`loader_memory.py`, [25, 10], batch 1024, --loader-budget). One JSON
# line per step goes to DIR/billion.jsonl. Run it at two scales to see how
# each cost grows.
#
#   benchmarks/billion.sh --scale 26 --dir /work/bench/s26 --edges-dir /work/bench/tmpfs
#   benchmarks/billion.sh --scale 22 --dir /work/bench/s22
#
# --edges-dir puts the edge list elsewhere (another disk or a tmpfs) when
# inputs and store do not fit one disk together; --keep-inputs keeps them.
set -euo pipefail
cd "$(dirname "$0")/.."
. benchmarks/_bench_bin.sh
SCALE=26 DIR= EDGES_DIR= MEM=4G BUDGET=2GiB LOADER_BUDGET=2G BATCHES=40 KEEP=0 STEPS=import,bfs,wcc,pagerank,kcore,loader
while [ $# -gt 0 ]; do
  case "$1" in
    --scale) SCALE=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --edges-dir) EDGES_DIR=$2; shift 2 ;;
    --mem) MEM=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --loader-budget) LOADER_BUDGET=$2; shift 2 ;;
    --batches) BATCHES=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --keep-inputs) KEEP=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$DIR" ] || { echo "--dir is required" >&2; exit 2; }
EDGES_DIR=${EDGES_DIR:-$DIR}
PY=${PY:-.venv/bin/python}
BIN=${SOLIDGRAPH_BIN:-$(dirname "$BENCH_BIN")/solidgraph}
N=$((1 << SCALE))
mkdir -p "$DIR" "$EDGES_DIR"
E="$EDGES_DIR/s$SCALE.npy" X="$DIR/x$SCALE.npy" S="$DIR/s$SCALE.sg" OUT="$DIR/billion.jsonl"
CG=/sys/fs/cgroup/memory/sg-billion-$SCALE
has() { case ",$STEPS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

# Inputs, outside the cgroup (not measured), when the store is to be made.
if has import && [ ! -e "$S" ]; then
[ -e "$E" ] || "$PY" benchmarks/_kron_npy.py --u32 "$SCALE" "$E"
[ -e "$X" ] || "$PY" - "$N" "$X" <<'EOF'
import os, sys
import numpy as np
n, out = int(sys.argv[1]), sys.argv[2]
a = np.lib.format.open_memmap(out + ".partial", mode="w+", dtype=np.float16, shape=(n, 128))
step = 1 << 20
for k, i in enumerate(range(0, n, step)):
    # Finite values in [2^-7, 1): uint16 bit patterns from 0x2000 to 0x3BFF.
    rows = np.random.default_rng([7, k]).integers(0x2000, 0x3C00, size=(min(step, n - i), 128), dtype=np.uint16)
    a[i : i + step] = rows.view(np.float16)
a.flush()
del a
os.replace(out + ".partial", out)
EOF
fi

# A fresh cgroup of $MEM for each step; the step's shell joins it.
in_cgroup() {
  [ -d "$CG" ] && rmdir "$CG" 2>/dev/null || true
  mkdir -p "$CG"
  echo "$MEM" > "$CG/memory.limit_in_bytes"
  sync
  echo 3 > /proc/sys/vm/drop_caches
  bash -c 'echo $$ > '"$CG"'/tasks; exec "$@"' _ "$@"
}
peak_cg() { cat "$CG/memory.max_usage_in_bytes"; }

if has import && [ ! -e "$S" ]; then
  used0=$(df -B1 --output=used "$DIR" | tail -1)
  (peak=0; while sleep 1; do u=$(df -B1 --output=used "$DIR" | tail -1); [ "$u" -gt "$peak" ] && peak=$u && echo "$peak" > "$DIR/.disk-peak"; done) &
  watcher=$!
  trap 'kill $watcher 2>/dev/null || true' EXIT
  t0=$(date +%s.%N)
  in_cgroup /usr/bin/time -v -o "$DIR/import.time" "$BIN" import "$S" --edges "$E" --tensor "x=$X" --undirected --dedup --order degree \
    --lower-lists --num-nodes "$N" --memory-budget "$BUDGET" --json > "$DIR/import.json"
  t1=$(date +%s.%N)
  kill $watcher
  peak=$(cat "$DIR/.disk-peak")
  rss=$(awk -F': ' '/Maximum resident/ {printf "%d\n", $2 * 1024}' "$DIR/import.time")
  cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {print s}' "$DIR/import.time")
  "$PY" - "$DIR/import.json" "$SCALE" "$t0" "$t1" "$cpu" "$rss" "$(peak_cg)" "$((peak - used0))" "$(du -sb "$S" | cut -f1)" "$MEM" "$BUDGET" >> "$OUT" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
secs = float(sys.argv[4]) - float(sys.argv[3])
print(json.dumps({"step": "import", "scale": int(sys.argv[2]), "seconds": secs, "cpu_s": float(sys.argv[5]),
    "input_edges": r.get("input_edges"), "M_input_edges_per_s": r.get("input_edges", 0) / secs / 1e6,
    "peak_rss": int(sys.argv[6]), "cgroup_peak": int(sys.argv[7]), "disk_peak_added": int(sys.argv[8]),
    "store_bytes": int(sys.argv[9]), "mem": sys.argv[10], "budget": sys.argv[11], "phases": r.get("phases")}))
EOF
  tail -1 "$OUT"
  [ "$KEEP" = 1 ] || rm -f "$E" "$X"
fi

# BFS from the vertex of highest degree among the first 4096 ids.
has bfs && SRC=$("$PY" -c "import sys, numpy as np, solidgraph; g = solidgraph.open(sys.argv[1]); d = np.asarray(g.degree(np.arange(4096))); print(int(d.argmax()))" "$S")
for algo in bfs wcc pagerank kcore; do
  has "$algo" || continue
  extra=()
  [ "$algo" = bfs ] && extra=(--source "$SRC")
  [ "$algo" = pagerank ] && extra=(--iterations 20)
  in_cgroup /usr/bin/time -v -o "$DIR/$algo.time" "$BIN" run "$algo" "$S" --json --cache 256MiB "${extra[@]}" > "$DIR/$algo.json"
  rss=$(awk -F': ' '/Maximum resident/ {printf "%d\n", $2 * 1024}' "$DIR/$algo.time")
  "$PY" -c "import json, sys; r = json.load(open(sys.argv[1])); r.update(step=sys.argv[2], scale=int(sys.argv[3]), peak_rss=int(sys.argv[4]), cgroup_peak=int(sys.argv[5]), mem=sys.argv[6]); print(json.dumps(r))" \
    "$DIR/$algo.json" "$algo" "$SCALE" "$rss" "$(peak_cg)" "$MEM" >> "$OUT"
  tail -1 "$OUT"
done

if has loader; then
  # loader_memory.py makes its own cgroup of the budget plus torch's footprint.
  "$PY" benchmarks/loader_memory.py --store "$S" --budget "$LOADER_BUDGET" --batches "$BATCHES" --rounds 1 --factor 1 --json "$DIR/loader.json"
  "$PY" -c "import json, sys; print(json.dumps({'step': 'loader', 'scale': int(sys.argv[2]), 'report': json.load(open(sys.argv[1]))}))" "$DIR/loader.json" "$SCALE" >> "$OUT"
  tail -1 "$OUT"
fi
rmdir "$CG" 2>/dev/null || true
