#!/bin/bash
# One-vertex Neighbors requests/s of two `solidgraph` binaries, alternating
# round by round: the server pinned to CPU 1, the Rust load generator
# (crates/server/examples/load.rs) to CPU 0, so neither takes the other's core.
#
#   benchmarks/server_small_ab.sh BIN_A BIN_B LOAD STORE CLIENTS SECONDS ROUNDS
#
# STORE is served read-only under its directory name; each run warms the
# cache for 3 s first. Prints one JSON line per run, prefixed by the binary,
# with the server's own CPU time per request (user + system, from
# /proc/PID/stat over the measured run) as "server_cpu_us".
set -eu
A=$1; B=$2; LOAD=$3; STORE=$4; C=$5; S=$6; R=$7
NAME=$(basename "$STORE")
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
HZ=$(getconf CLK_TCK)
# utime + stime of a process, in clock ticks (fields 14 and 15; the name in
# field 2 has no spaces here).
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
for _ in $(seq "$R"); do
  for bin in "$A" "$B"; do
    taskset -c 1 "$bin" serve "$STORE" --read-only --listen 127.0.0.1:0 > "$OUT" 2>/dev/null &
    pid=$!
    for _ in $(seq 100); do grep -q listening "$OUT" && break; sleep 0.1; done
    addr=$(awk '/listening/{print $3}' "$OUT")
    taskset -c 0 "$LOAD" "http://$addr" "$NAME" "$C" 3 > /dev/null
    t0=$(ticks "$pid")
    line=$(taskset -c 0 "$LOAD" "http://$addr" "$NAME" "$C" "$S")
    t1=$(ticks "$pid")
    reqs=$(echo "$line" | sed 's/.*"requests": \([0-9]*\).*/\1/')
    cpu=$(awk -v d=$((t1 - t0)) -v hz="$HZ" -v n="$reqs" 'BEGIN{printf "%.1f", d / hz * 1e6 / n}')
    echo "$bin ${line%\}}, \"server_cpu_us\": $cpu}"
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
