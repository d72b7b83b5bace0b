#!/usr/bin/env bash
# Import speed (issue 33 part 4): `solidgraph import` of a Graph500-style
# Kronecker graph (edge factor 16, undirected, dedup, degree order, lower
# lists) from a binary (2, E) int64 .npy and from text, against an older
# `solidgraph` binary on the same inputs and against gapbs's converter
# building its CSR (from the same text, `-s`, and from its own generator,
# `-g`), alternating contenders round by round. Every contender reads its
# input from the page cache (read once before each run); times are wall
# clock of the whole process, peak RSS and CPU seconds (user + system) from
# /usr/bin/time; cores = CPU seconds / wall seconds (out of the machine's
# cores: on a loaded machine the CPU-normalised rate, input edges per CPU
# second, is the fairer figure). Our imports' `--json` lines (per-phase
# wall and CPU seconds) are kept in DIR/json.log. The old and new stores
# are compared byte for byte.
#
#   benchmarks/import_speed.sh --old /tmp/solidgraph-old [--scale 22] [--rounds 2]
#       [--dir /work/bench/import] [--budget 1GiB] [--no-text] [--gapbs ../shared/peers/gapbs]
#
# Input edges/s counts the input's lines or pairs (E = 16 * 2^scale), as
# the issue's bar does.
set -euo pipefail
cd "$(dirname "$0")/.."
scale=22 rounds=2 dir=${SOLIDGRAPH_BENCH_DIR:-/work/bench}/import old="" budget=1GiB text=1
gapbs=$(cd .. && pwd)/shared/peers/gapbs
new=${SOLIDGRAPH_BIN:-target/release/solidgraph}
while [ $# -gt 0 ]; do
  case "$1" in
    --scale) scale=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --old) old=$2; shift 2 ;;
    --new) new=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --gapbs) gapbs=$2; shift 2 ;;
    --no-text) text=0; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "${SOLIDGRAPH_BIN:-}" ] || [ "$new" != target/release/solidgraph ] || cargo build --release -q -p solidgraph-cli
mkdir -p "$dir"
npy=$dir/s$scale.npy el=$dir/s$scale.el
[ -f "$npy" ] || .venv/bin/python benchmarks/_kron_npy.py "$scale" "$npy"
if [ "$text" = 1 ] && [ ! -f "$el" ]; then
  .venv/bin/python benchmarks/_kron_npy.py --text "$npy" "$el"
fi
if [ ! -x "$dir/gapbs/converter" ]; then
  rm -rf "$dir/gapbs" && cp -r "$gapbs" "$dir/gapbs" && make -s -C "$dir/gapbs" converter >/dev/null
fi
edges=$((16 << scale))
flags=(--undirected --dedup --order degree --lower-lists --num-nodes $((1 << scale)) --memory-budget "$budget" --json)
results=$dir/results.tsv
: > "$results"
: > "$dir/json.log"
# One run: name, input file, command...; appends "name seconds rss_kib".
run() {
  local name=$1 input=$2; shift 2
  rm -rf "$dir/out.sg" "$dir/out.gapbs"
  cat "$input" > /dev/null
  /usr/bin/time -f "%e %M %U %S" -o "$dir/time.txt" "$@" > "$dir/last.log" 2>&1 || { cat "$dir/last.log" >&2; exit 1; }
  read -r secs rss user sys < "$dir/time.txt"
  printf '%s\t%s\t%s\t%s\n' "$name" "$secs" "$rss" "$(echo "$user + $sys" | bc)" | tee -a "$results"
  case "$name" in new*|old*) printf '%s\t%s\n' "$name" "$(tail -1 "$dir/last.log")" >> "$dir/json.log" ;; esac
  if [ "$name" = "new npy" ]; then rm -rf "$dir/new.sg"; mv "$dir/out.sg" "$dir/new.sg"; fi
  if [ "$name" = "old npy" ] && [ -d "$dir/new.sg" ]; then
    # Binaries that lay out a different number of vertex ranges write
    # different bytes for the same lists.
    if cmp -s "$dir/out.sg/sg.0" "$dir/new.sg/sg.0"; then echo "old and new stores: identical bytes"; else echo "old and new stores: different bytes"; fi
  fi
}
for r in $(seq 1 "$rounds"); do
  echo "round $r (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  run "new npy" "$npy" "$new" import "$dir/out.sg" --edges "$npy" "${flags[@]}"
  [ -z "$old" ] || run "old npy" "$npy" "$old" import "$dir/out.sg" --edges "$npy" "${flags[@]}"
  if [ "$text" = 1 ]; then
    run "new text" "$el" "$new" import "$dir/out.sg" --edges "$el" "${flags[@]}"
    [ -z "$old" ] || run "old text" "$el" "$old" import "$dir/out.sg" --edges "$el" "${flags[@]}"
    run "gapbs text" "$el" "$dir/gapbs/converter" -f "$el" -s -b "$dir/out.gapbs"
  fi
  run "gapbs generator" /dev/null "$dir/gapbs/converter" -g "$scale" -b "$dir/out.gapbs"
done
rm -rf "$dir/out.sg" "$dir/out.gapbs"
.venv/bin/python - "$results" "$edges" <<'EOF'
import sys, statistics
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
edges = int(sys.argv[2])
by = {}
for name, secs, rss, cpu in rows:
    by.setdefault(name, []).append((float(secs), int(rss), float(cpu)))
base = statistics.median(r[0] for r in by["new npy"])
print(f"\n{edges:,} input edges; median of rounds; ratio = contender seconds / new npy seconds")
print(f"{'contender':<16} {'seconds':>20} {'M edges/s':>10} {'ratio':>6} {'CPU s':>7} {'cores':>6} {'M edges/CPU-s':>14} {'RSS MiB':>8}")
for name, runs in by.items():
    med = statistics.median(r[0] for r in runs)
    cpu = statistics.median(r[2] for r in runs)
    secs = " / ".join(f"{r[0]:.1f}" for r in runs)
    cores = statistics.median(r[2] / r[0] for r in runs)
    print(f"{name:<16} {secs:>20} {edges / med / 1e6:>10.2f} {med / base:>6.2f} {cpu:>7.1f} {cores:>6.2f} {edges / cpu / 1e6:>14.2f} {max(r[1] for r in runs) / 1024:>8.0f}")
EOF
