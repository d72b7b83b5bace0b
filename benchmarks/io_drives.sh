#!/usr/bin/env bash
# Falcon-style multi-drive benchmark: one submitting thread over 1, 2, 4, 8
# throttled drives, ours vs one fio job vs one fio job per drive ("ideal").
#
#   sudo benchmarks/io_drives.sh [--counts 1,2,4,8] [--iops 3000] [--seconds 8]
#                                [--rounds 1] [--dir /work/bench/drives] [--strict]
#
# Drives are loop devices (losetup --direct-io=on) over backing files in
# --dir, each limited by cgroup v1 blkio.throttle.{read,write}_iops_device in
# a cgroup created for the run; the benchmarked processes run inside it.
# Bars: ours >= 95% of ideal at every count, and ours >= the single fio job.
# Keep --iops x 8 below what the disk holding --dir sustains (see io_drives.py).
# Needs root and cgroup v1 blkio; otherwise prints why and exits 0. Loop
# devices and the cgroup are removed on exit (Python cleans up; this trap is
# the safety net if it is killed). Options: see io_drives.py -h.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ "$(id -u)" != 0 ]; then
  echo "io_drives: skipped (needs root for loop devices and blkio cgroups)"
  exit 0
fi
dir="${IO_BENCH_DIR:-/work/bench/drives}"
prev=""
for a in "$@"; do
  [ "$prev" = "--dir" ] && dir="$a"
  case "$a" in --dir=*) dir="${a#--dir=}" ;; esac
  prev="$a"
done
cleanup() {
  # Loop devices still bound to our backing files, and cgroups of dead runs.
  for f in "$dir"/drive*.img; do
    [ -e "$f" ] || continue
    losetup -j "$f" -O NAME -n 2>/dev/null | while read -r d; do losetup -d "$d" 2>/dev/null || true; done
  done
  for cg in /sys/fs/cgroup/blkio/sgbench-*; do
    [ -d "$cg" ] || continue
    if [ -z "$(cat "$cg/cgroup.procs" 2>/dev/null)" ]; then rmdir "$cg" 2>/dev/null || true; fi
  done
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
python3 "$here/io_drives.py" "$@"
