#!/usr/bin/env bash
# Sets up (once) and runs every check: formatting, the modules' shape, clippy
# on the server and the browser builds (as they compile, see
# scripts/lint.env), unit tests, real-engine tests, PostgreSQL tests and
# the headless-browser test.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh --browser --tests

echo "==> cargo fmt --check"
cargo fmt --all --check
echo "==> module shape (no circles, storage on its own types, file sizes)"
python3 scripts/check_modules.py
# Optuna, for the test that loads a study's Optuna journal with it.
TUNEBOOK_OPTUNA_PYTHON="$(scripts/setup-bench-venv.sh)"
export TUNEBOOK_OPTUNA_PYTHON
# schemathesis, for the test that fuzzes the JSON API from its description.
TUNEBOOK_SCHEMATHESIS="$(scripts/setup-fuzz-venv.sh)"
export TUNEBOOK_SCHEMATHESIS
echo "==> cargo test"
# The build setup.sh made, linted as it compiled: the same variables, so
# nothing compiles again.
# shellcheck source=scripts/lint.env
source scripts/lint.env
# Two tests at a time, whatever the machine reports: the suites start real
# engines and browsers, sized for two cores. The tests that start a real
# engine take turns among themselves (their suites' `common` modules): two
# engines on two cores wait on each other's spinning threads.
cargo test --workspace -- --test-threads=2
# Compares its speeds with llama-bench's, so it runs with nothing beside it.
echo "==> the acceptance study, alone"
# The same build as above (the workspace's features), one test.
cargo test --workspace --test suite -- --ignored acceptance::
