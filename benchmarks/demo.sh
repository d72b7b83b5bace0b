#!/usr/bin/env bash
# `make demo`: the main job on generated data, side by side with baselines.
set -euo pipefail
cd "$(dirname "$0")/.."
benchmarks/io.sh --seconds 5 --rounds 1
