#!/usr/bin/env bash
# A reordered tensor at import: `solidgraph import` of a Kronecker graph
# (edge factor 16, undirected, dedup, degree order, lower lists) with
# 128-dim float16 features from a .npy larger than the memory left for the
# page cache, two binaries alternating round by round, each run in a
# cgroup v1 memory group of --mem with caches dropped before. Reports wall
# seconds, CPU seconds and peak RSS per run, the ratio old / new, and
# whether the two stores are byte-identical (they should be: only how the
# rows are gathered differs).
#
#   benchmarks/import_tensor.sh --old /work/bench/solidgraph-old --new target/release/solidgraph \
#       [--scale 22] [--rounds 2] [--mem 1G] [--budget 512MiB] [--dir /work/bench/import-tensor]
set -euo pipefail
cd "$(dirname "$0")/.."
scale=22 rounds=2 mem=1G budget=512MiB dir=${SOLIDGRAPH_BENCH_DIR:-/work/bench}/import-tensor old="" new=target/release/solidgraph
while [ $# -gt 0 ]; do
  case "$1" in
    --scale) scale=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --old) old=$2; shift 2 ;;
    --new) new=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$old" ] || { echo "--old is required" >&2; exit 2; }
PY=${PY:-.venv/bin/python}
mkdir -p "$dir"
n=$((1 << scale)) e=$dir/s$scale.npy x=$dir/x$scale.npy
[ -e "$e" ] || "$PY" benchmarks/_kron_npy.py --u32 "$scale" "$e"
[ -e "$x" ] || "$PY" - "$n" "$x" <<'EOF'
import sys
import numpy as np
n, out = int(sys.argv[1]), sys.argv[2]
a = np.lib.format.open_memmap(out, mode="w+", dtype=np.float16, shape=(n, 128))
for k, i in enumerate(range(0, n, 1 << 20)):
    rows = np.random.default_rng([7, k]).integers(0x2000, 0x3C00, size=(min(1 << 20, n - i), 128), dtype=np.uint16)
    a[i : i + (1 << 20)] = rows.view(np.float16)
a.flush()
EOF
cg=/sys/fs/cgroup/memory/sg-import-tensor
results=$dir/results.tsv
: > "$results"
run() {
  local name=$1 bin=$2
  rm -rf "$dir/$name.sg"
  rmdir "$cg" 2>/dev/null || true
  mkdir -p "$cg" && echo "$mem" > "$cg/memory.limit_in_bytes"
  sync && echo 3 > /proc/sys/vm/drop_caches
  bash -c 'echo $$ > '"$cg"'/tasks; exec "$@"' _ /usr/bin/time -f "%e %M %U %S" -o "$dir/time.txt" \
    "$bin" import "$dir/$name.sg" --edges "$e" --tensor "x=$x" --undirected --dedup --order degree --lower-lists \
    --num-nodes "$n" --memory-budget "$budget" --json > "$dir/$name.json"
  read -r secs rss user sys < "$dir/time.txt"
  printf '%s\t%s\t%s\t%s\n' "$name" "$secs" "$rss" "$(echo "$user + $sys" | bc)" | tee -a "$results"
}
for r in $(seq 1 "$rounds"); do
  echo "round $r (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  if [ $((r % 2)) = 1 ]; then run new "$new"; run old "$old"; else run old "$old"; run new "$new"; fi
  if cmp -s "$dir/old.sg/sg.0" "$dir/new.sg/sg.0"; then echo "old and new stores: identical bytes"; else echo "old and new stores: DIFFERENT bytes"; fi
done
rm -rf "$dir/old.sg" "$dir/new.sg"
rmdir "$cg" 2>/dev/null || true
"$PY" - "$results" <<'EOF'
import statistics, sys
by = {}
for name, secs, rss, cpu in (l.split("\t") for l in open(sys.argv[1]).read().splitlines()):
    by.setdefault(name, []).append((float(secs), int(rss), float(cpu)))
for name, runs in by.items():
    print(f"{name}: seconds {' / '.join(f'{r[0]:.1f}' for r in runs)}, CPU s {' / '.join(f'{r[2]:.1f}' for r in runs)}, peak RSS {max(r[1] for r in runs) / 1024:.0f} MiB")
ratios = [o[0] / n[0] for o, n in zip(by["old"], by["new"])]
print("old / new seconds per round: " + ", ".join(f"{q:.2f}" for q in ratios))
EOF
