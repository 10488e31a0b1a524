#!/usr/bin/env bash
# The benchmarks' Python: a virtual environment with Optuna 5.0.0 and, when
# asked, more packages
# (modules named as Python imports them, e.g. `scipy torch` for Optuna's
# GPSampler). Kept once per machine in the cache (as the engine is), linked
# as .tools/bench-venv; installs only what is missing; prints the venv's
# python.
# Usage: scripts/setup-bench-venv.sh [MODULE…]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
optuna_version="5.0.0"
cache="${TUNEBOOK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tunebook}"
venv="$cache/bench-venv-optuna-$optuna_version"
mkdir -p "$root/.tools"
# A checkout from before the cache kept its own folder there: replaced.
link="$root/.tools/bench-venv"
[[ -L "$link" || ! -e "$link" ]] || rm -rf "$link"
ln -sfn "$venv" "$link"
imports="$(printf ', %s' optuna "$@")"
if ! "$venv/bin/python" -c "import sys${imports}; sys.exit(optuna.__version__ != '$optuna_version')" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "optuna==$optuna_version" "$@" >&2
fi
echo "$venv/bin/python"
