#!/bin/bash
# One-vertex Neighbors requests/s of two `solidgraph` binaries, alternating
# round by round: the server pinned to CPU 1, the Rust load generator
# (crates/server/examples/load.rs) to CPU 0, so neither takes the other's core.
#
#   benchmarks/server_small_ab.sh BIN_A BIN_B LOAD STORE CLIENTS SECONDS ROUNDS
#
# STORE is served read-only under its directory name; each run warms the
# cache for 3 s first. Prints one JSON line per run, prefixed by the binary.
set -eu
A=$1; B=$2; LOAD=$3; STORE=$4; C=$5; S=$6; R=$7
NAME=$(basename "$STORE")
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
for _ in $(seq "$R"); do
  for bin in "$A" "$B"; do
    taskset -c 1 "$bin" serve "$STORE" --read-only --listen 127.0.0.1:0 > "$OUT" 2>/dev/null &
    pid=$!
    for _ in $(seq 100); do grep -q listening "$OUT" && break; sleep 0.1; done
    addr=$(awk '/listening/{print $3}' "$OUT")
    taskset -c 0 "$LOAD" "http://$addr" "$NAME" "$C" 3 > /dev/null
    echo "$bin $(taskset -c 0 "$LOAD" "http://$addr" "$NAME" "$C" "$S")"
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
