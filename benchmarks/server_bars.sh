#!/bin/bash
# The two bars of the gRPC server (#30), measured as the issue states, in
# about 5 minutes; meant for a quiet machine (nothing else running).
#
#   benchmarks/server_bars.sh [SECONDS] [ROUNDS]      (defaults: 3 s, 3 rounds)
#
# Needs the release builds: `cargo build --release -p solidgraph-cli
# -p solidgraph-server --example h2load` and `make develop` (the Python
# client). SOLIDGRAPH_BIN (default target/release/solidgraph) is the server,
# LOAD (default target/release/examples/h2load) the generator.
#
# 1. Small requests: one vertex's neighbours of a warm store (100,000
#    vertices, 1,000,000 uniform random edges), the server pinned to CPU 1
#    and the generator (h2load: requests encoded once, HTTP/2 streams) to
#    CPU 0, at 1, 4, 16 and 64 clients, each client on its own connection
#    and then the clients sharing 4 connections (as gRPC clients in one
#    process share a channel); ROUNDS runs of SECONDS each a point. Prints
#    requests/s, p50/p99 and the CPU each process spends a request (the
#    server's from /proc/PID/stat, the generator's from getrusage).
#    Bar: 20,000 requests/s at 16 clients.
# 2. Sampling: SampleNeighbors, 1024 seeds, fanouts [25, 10], gathering the
#    features, at 1, 4, 16 and 64 clients through the server and the same
#    calls in process, alternating round by round (benchmarks/server.py,
#    R-MAT scale 16, x 128 float32). Bar: server >= 0.85 of in-process
#    seeds/s. Measured with the native client's replies in shared memory
#    (`serve --shm`, what `connect` uses on a loopback address), then over
#    TCP (`--tcp`) for comparison.
set -eu
S=${1:-3}; R=${2:-3}
BIN=${SOLIDGRAPH_BIN:-target/release/solidgraph}
LOAD=${LOAD:-target/release/examples/h2load}
PY=${PY:-.venv/bin/python}
for f in "$BIN" "$LOAD" "$PY"; do
  [ -x "$f" ] || { echo "missing $f: build it first (see the header of $0)" >&2; exit 1; }
done
TMP=$(mktemp -d)
SERVER=
trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; rm -rf "$TMP"' EXIT
HZ=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
field() { sed "s/.*\"$1\": \([0-9.]*\).*/\1/"; }
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

echo "== $(date -u +%FT%TZ) $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); server $BIN"
"$PY" -c "
import numpy as np, solidgraph
n, e = 100_000, 1_000_000
rng = np.random.default_rng(1)
solidgraph.import_graph('$TMP/g', (rng.integers(0, n, e), rng.integers(0, n, e)), num_nodes=n)
"
taskset -c 1 "$BIN" serve "$TMP/g" --read-only --listen 127.0.0.1:0 > "$TMP/out" 2>/dev/null &
SERVER=$!
for _ in $(seq 100); do grep -q listening "$TMP/out" && break; sleep 0.1; done
ADDR=http://$(awk '/listening/{print $3}' "$TMP/out")
# Warm: every vertex's list read once (the requests draw them uniformly).
taskset -c 0 "$LOAD" "$ADDR" g 16 3 4 > /dev/null

echo "== 1. small requests (one vertex's Neighbors, warm), $R x ${S} s a point"
BAR_SMALL=
for K in own 4; do
  for C in 1 4 16 64; do
    conns=$C; [ "$K" = own ] || conns=$((C < K ? C : K))
    : > "$TMP/runs"
    for _ in $(seq "$R"); do
      t0=$(ticks "$SERVER")
      line=$(taskset -c 0 "$LOAD" "$ADDR" g "$C" "$S" "$conns")
      t1=$(ticks "$SERVER")
      reqs=$(echo "$line" | field requests)
      cpu=$(awk -v d=$((t1 - t0)) -v hz="$HZ" -v n="$reqs" 'BEGIN{printf "%.1f", d / hz * 1e6 / n}')
      echo "$(echo "$line" | field requests_per_s) $(echo "$line" | field p50_us) $(echo "$line" | field p99_us) $cpu $(echo "$line" | field own_cpu_us)" >> "$TMP/runs"
    done
    col() { awk -v c="$1" '{print $c}' "$TMP/runs" | median; }
    rate=$(col 1)
    printf "small %2d clients on %2d connections | %7.0f req/s (runs: %s) | p50 %5.0f us p99 %6.0f us | CPU a request: server %5.1f us, generator %5.1f us\n" \
      "$C" "$conns" "$rate" "$(awk '{printf "%.0f\n", $1}' "$TMP/runs" | paste -sd' ')" "$(col 2)" "$(col 3)" "$(col 4)" "$(col 5)"
    [ "$C" = 16 ] && BAR_SMALL="$BAR_SMALL $K:$rate"
  done
done
kill "$SERVER"; wait "$SERVER" 2>/dev/null || true; SERVER=

echo "== 2. sampling (SampleNeighbors 1024 seeds [25, 10] + x), server vs in-process, $R rounds of $((S > 5 ? S : 5)) s"
# At 64 clients a call takes a second or more: at least 5 s a run.
SOLIDGRAPH_BIN=$BIN "$PY" benchmarks/server.py --scale 16 --seconds "$((S > 5 ? S : 5))" --rounds "$R" --clients 1,4,16,64 --workloads sample | tee "$TMP/sample"
echo "== 2b. the same over TCP (the native client without shared memory)"
SOLIDGRAPH_BIN=$BIN "$PY" benchmarks/server.py --scale 16 --seconds "$((S > 5 ? S : 5))" --rounds "$R" --clients 1,4,16,64 --workloads sample --tcp | tee "$TMP/sample-tcp"

echo "== bars"
for kr in $BAR_SMALL; do
  awk -v k="${kr%%:*}" -v r="${kr#*:}" 'BEGIN{printf "small requests at 16 clients (%s connections): %.0f req/s = %.2f of the 20,000 bar\n", k == "own" ? "their own" : k " shared", r, r / 20000}'
done
for f in sample sample-tcp; do
  how=shm; [ "$f" = sample ] || how=tcp
  awk -v how="$how" '/^sample [0-9]+ clients: server\/in-process median/{printf "sampling (%s) at %2d clients: server/in-process median %s (min-max of %d rounds: %s-%s) against the 0.85 bar\n", how, $2, $6, $11, $8, $10}' "$TMP/$f" | tr -d ','
done
