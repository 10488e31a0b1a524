#!/usr/bin/env bash
# Measures the harness against the real engine (see
# engine-bridge/examples/bench_harness.rs): health-poll latency, overhead per
# trial, and agreement of decode/prefill speed with llama-bench on a
# ~540 MB memory-bound model written by the project. Takes a few minutes.
# Usage: scripts/bench-engine.sh [THREADS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup-engine.sh >/dev/null
cargo build --quiet --release -p engine-bridge --example bench_harness --bin tunebook-fake-engine
cargo build --quiet -p tunebook
model=.tools/models/bench-llama.gguf
[[ -f "$model" ]] || target/debug/tunebook make-model --size memory-bound "$model"
exec target/release/examples/bench_harness \
  .tools/engine-bin/llama-server .tools/engine-bin/llama-bench \
  target/release/tunebook-fake-engine "$model" "${1:-2}"
