#!/usr/bin/env bash
# Measures the study side: trials each search strategy needs to reach 95 %
# of the true hypervolume on a synthetic problem with a known Pareto front,
# and, with 100,000 stored trials, the history query and the Pareto front.
# Usage: scripts/bench-studies.sh [postgres://… URL of an empty database]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
cargo run --quiet --release -p tunebook-study --example strategy_bench
cargo run --quiet --release -p tunebook --example history_bench -- "$@"
