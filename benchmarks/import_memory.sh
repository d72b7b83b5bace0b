#!/usr/bin/env bash
# An import larger than memory (issue 31 part 5): `solidgraph import` of a
# Kronecker edge list (a (2, E) int64 .npy) four times the import's
# --memory-budget, inside a cgroup v1 memory controller limited to the
# budget plus a fixed overhead, caches dropped before. It must finish (no
# OOM kill) with its peak RSS inside the limit. The fixed overhead is
# measured, not assumed: the peak RSS of the same command on a tiny input
# (scale 10: the binary, its threads, the I/O buffer pool), plus a slack
# (--slack-mib, 64 by default) for what grows with the vertex count whatever
# the budget (the presence bitmap, the GTT, the hot table). Prints one TSV line
# per run: input, budget, cgroup limit, seconds, peak RSS (/usr/bin/time),
# cgroup peak (charged page cache included), cgroup failcnt (reclaims at
# the limit), exit status.
#
#   benchmarks/import_memory.sh [--scale 22] [--budget-mib 256] [--slack-mib 64] [--dir /work/bench/import-memory] [--keep]
#
# Scale 22 is 2^26 edges, a 1 GiB .npy: 4x a 256 MiB budget. Needs root
# (cgroup, drop_caches). Data (input, spill runs, store) stays under
# 4 GB and is deleted at the end unless --keep.
set -euo pipefail
cd "$(dirname "$0")/.."
scale=22 budget_mib=256 slack_mib=64 dir=${SOLIDGRAPH_BENCH_DIR:-/work/bench}/import-memory keep=0
bin=${SOLIDGRAPH_BIN:-target/release/solidgraph}
while [ $# -gt 0 ]; do
  case "$1" in
    --scale) scale=$2; shift 2 ;;
    --budget-mib) budget_mib=$2; shift 2 ;;
    --slack-mib) slack_mib=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "${SOLIDGRAPH_BIN:-}" ] || cargo build --release -q -p solidgraph-cli
cg=/sys/fs/cgroup/memory/solidgraph-import-memory
[ -d /sys/fs/cgroup/memory ] || { echo "no cgroup v1 memory controller at /sys/fs/cgroup/memory" >&2; exit 1; }
mkdir -p "$dir"
cleanup() {
  [ -d "$cg" ] && rmdir "$cg" 2>/dev/null || true
  if [ "$keep" = 0 ]; then rm -rf "$dir"; fi
}
trap cleanup EXIT
small=$dir/s10.npy big=$dir/s$scale.npy
[ -f "$small" ] || .venv/bin/python benchmarks/_kron_npy.py 10 "$small"
[ -f "$big" ] || .venv/bin/python benchmarks/_kron_npy.py "$scale" "$big"
input_bytes=$(stat -c %s "$big")
budget=$((budget_mib << 20))
echo "input $(basename "$big"): $input_bytes bytes, $((input_bytes / budget)).$((input_bytes * 10 / budget % 10))x the $budget_mib MiB budget" >&2

# One import: name, input, vertex count, cgroup limit in bytes (0: none).
# Prints the TSV line; returns the import's exit status.
run() {
  local name=$1 input=$2 n=$3 limit=$4 status=0
  rm -rf "$dir/out.sg"
  sync
  echo 3 > /proc/sys/vm/drop_caches
  local cmd=("$bin" import --edges "$input" "$dir/out.sg" --in-edges --num-nodes "$n" --memory-budget "${budget_mib}MiB")
  if [ "$limit" -gt 0 ]; then
    rmdir "$cg" 2>/dev/null || true
    mkdir "$cg"
    echo "$limit" > "$cg/memory.limit_in_bytes"
    [ -f "$cg/memory.memsw.limit_in_bytes" ] && echo "$limit" > "$cg/memory.memsw.limit_in_bytes"
    # The subshell joins the cgroup, then becomes the timed import.
    ( echo $BASHPID > "$cg/cgroup.procs"; exec /usr/bin/time -f "%e %M" -o "$dir/time.txt" "${cmd[@]}" ) > "$dir/last.log" 2>&1 || status=$?
  else
    /usr/bin/time -f "%e %M" -o "$dir/time.txt" "${cmd[@]}" > "$dir/last.log" 2>&1 || status=$?
  fi
  local secs rss peak=- failcnt=-
  read -r secs rss < <(tail -n 1 "$dir/time.txt")
  if [ "$limit" -gt 0 ]; then
    peak=$(( $(cat "$cg/memory.max_usage_in_bytes") >> 20 ))
    failcnt=$(cat "$cg/memory.failcnt")
    grep -q "oom_kill [1-9]" "$cg/memory.oom_control" && status="$status(oom-killed)"
    rmdir "$cg"
  fi
  printf '%s\t%s MiB\t%s\t%s s\t%s MiB\t%s\t%s\t%s\n' "$name" "$budget_mib" \
    "$([ "$limit" -gt 0 ] && echo "$((limit >> 20)) MiB" || echo none)" "$secs" "$((rss >> 10))" "$peak$([ "$peak" = - ] || echo " MiB")" "$failcnt" "$status"
  [ "$status" = 0 ] || { cat "$dir/last.log" >&2; return 1; }
}

printf 'input\tbudget\tcgroup limit\ttime\tpeak RSS\tcgroup peak\tfailcnt\tstatus\n'
# The fixed overhead: the same command on a tiny input, no cgroup.
run "s10 (fixed overhead)" "$small" $((1 << 10)) 0
fixed_kib=$(tail -n 1 "$dir/time.txt" | cut -d' ' -f2)
overhead=$(( (fixed_kib << 10) + (slack_mib << 20) ))
limit=$((budget + overhead))
echo "fixed overhead: $((fixed_kib >> 10)) MiB process + $slack_mib MiB slack = $((overhead >> 20)) MiB; cgroup limit $((limit >> 20)) MiB" >&2
run "s$scale in cgroup" "$big" $((1 << scale)) "$limit"
"$bin" info "$dir/out.sg" >&2 || true
