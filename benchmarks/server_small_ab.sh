#!/bin/bash
# One-vertex Neighbors requests/s of two `solidgraph` servers, alternating
# round by round: the server pinned to CPU 1, the Rust load generator LOAD
# (crates/server/examples/h2load.rs, the lean one, or load.rs, tonic's
# client) to CPU 0, so neither takes the other's core.
#
#   benchmarks/server_small_ab.sh A B LOAD STORE CLIENTS SECONDS ROUNDS [CONNECTIONS]
#
# A and B are each a `solidgraph` binary, optionally preceded by
# environment settings (`"LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2
# target/release/solidgraph"`), run through env(1). STORE is served
# read-only under its directory name; the clients share CONNECTIONS HTTP/2
# connections (default: one each); each run warms the cache for 3 s
# first. Prints one JSON line per run, prefixed by the variant, with the
# server's own CPU time per request (user + system, from /proc/PID/stat over
# the measured run) as "server_cpu_us" and the generator's as "load_cpu_us".
set -eu
A=$1; B=$2; LOAD=$3; STORE=$4; C=$5; S=$6; R=$7; K=${8:-$5}
NAME=$(basename "$STORE")
OUT=$(mktemp); TIMES=$(mktemp)
trap 'rm -f "$OUT" "$TIMES"' EXIT
HZ=$(getconf CLK_TCK)
# utime + stime of a process, in clock ticks (fields 14 and 15; the name in
# field 2 has no spaces here).
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
for _ in $(seq "$R"); do
  for variant in "$A" "$B"; do
    # shellcheck disable=SC2086 # the variant is words: settings, then the binary
    taskset -c 1 env $variant serve "$STORE" --read-only --listen 127.0.0.1:0 > "$OUT" 2>/dev/null &
    pid=$!
    for _ in $(seq 100); do grep -q listening "$OUT" && break; sleep 0.1; done
    addr=$(awk '/listening/{print $3}' "$OUT")
    taskset -c 0 "$LOAD" "http://$addr" "$NAME" "$C" 3 "$K" > /dev/null
    t0=$(ticks "$pid")
    line=$(/usr/bin/time -o "$TIMES" -f "%U %S" taskset -c 0 "$LOAD" "http://$addr" "$NAME" "$C" "$S" "$K")
    t1=$(ticks "$pid")
    reqs=$(echo "$line" | sed 's/.*"requests": \([0-9]*\).*/\1/')
    cpu=$(awk -v d=$((t1 - t0)) -v hz="$HZ" -v n="$reqs" 'BEGIN{printf "%.1f", d / hz * 1e6 / n}')
    lcpu=$(awk -v n="$reqs" '{printf "%.1f", ($1 + $2) * 1e6 / n}' "$TIMES")
    echo "[$variant] ${line%\}}, \"server_cpu_us\": $cpu, \"load_cpu_us\": $lcpu}"
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
