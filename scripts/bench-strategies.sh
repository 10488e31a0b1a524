#!/usr/bin/env bash
# Search strategies side by side on the planted search worlds: every
# project strategy and Optuna's multivariate TPE and NSGA-II, on the same
# worlds with the same noise and cost model. Prints the median trials and
# modelled hours to 95 % of the true Pareto hypervolume, and the ratio to
# TPE. Optuna is installed into a project-local virtual environment
# (.tools/bench-venv), once.
# Usage: scripts/bench-strategies.sh [SEEDS (5)] [MAX TRIALS (200)]
# ONLY=bayes,random runs only those of the project's strategies (ONLY=none
# none of them: Optuna's samplers alone, e.g. in longer searches);
# WORLDS=ridge,pocket only those worlds; OPTUNA=optuna_tpe,optuna_gp
# those of Optuna's samplers (optuna_gp, the GPSampler, installs scipy
# and torch first).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
seeds="${1:-5}"
max="${2:-200}"
extra=()
[[ ",${OPTUNA:-}," == *,optuna_gp,* ]] && extra=(scipy torch)
python="$(scripts/setup-bench-venv.sh "${extra[@]}")"
cargo build --quiet --release -p tunebook-study --example bench_strategies
binary="$root/target/release/examples/bench_strategies"
project="$(mktemp)"
trap 'rm -f "$project"' EXIT
if [[ "${ONLY:-}" != none ]]; then
  "$binary" project "$seeds" "$max" 0.95 "${ONLY:-random,two_phase,motpe,bayes,grid}" ${WORLDS:+"$WORLDS"} > "$project"
fi
"$python" scripts/bench_strategies.py "$binary" "$project" "$seeds" "$max" 0.95 ${WORLDS:+"$WORLDS"}
