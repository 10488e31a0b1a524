#!/usr/bin/env bash
# The server's time between one trial's end and the next trial's start
# (proposal, bookkeeping), by the number of trials so far: a study with the
# default strategy, run by the real study runner (`tunebook run`, release
# build) against the fake engine, whose trials take a fraction of a second.
# Beside it, in the same run, how long Optuna 5's multivariate TPE and its
# GPSampler take to propose on the same space at the same trial counts.
# Usage: scripts/bench-gap.sh [TRIALS (200)]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
trials="${1:-200}"
# GPSampler needs scipy and torch.
python="$(scripts/setup-bench-venv.sh scipy torch)"
cargo build --quiet --release -p tunebook -p engine-bridge --bin tunebook --bin tunebook-fake-engine

work="$(mktemp -d)"
trap '[[ -n "${KEEP:-}" ]] || rm -rf "$work"' EXIT
mkdir -p "$work/profiles" "$work/data"
: > "$work/model.gguf"
cat > "$work/profiles/fake.toml" <<EOF
name = "fake"
kind = "llama-server"
binary = "$root/target/release/tunebook-fake-engine"
# Decode at 4000 tokens a second a thread: a trial is its launch and a
# few requests.
args = ["--fake", "ok", "--fake-tps-per-thread", "4000"]
[[models]]
name = "m"
path = "$work/model.gguf"
EOF
# Every setting but top_k starts an engine; top_k is sent with each
# request (the running engine is reused for it).
cat > "$work/study.json" <<EOF
{
  "name": "gap",
  "profile": "fake",
  "model": "m",
  "space": {
    "threads": { "min": 1, "max": 16, "step": 1 },
    "batch_size": { "min": 64, "max": 4096, "log": true },
    "ubatch_size": { "min": 32, "max": 1024, "log": true },
    "ctx_size": { "min": 512, "max": 8192, "log": true },
    "cache_type_k": ["f16", "q8_0", "q4_0"],
    "top_k": { "min": 1, "max": 100, "step": 1 }
  },
  "constraints": ["ubatch_size <= batch_size"],
  "baseline": { "threads": 4, "batch_size": 2048, "ubatch_size": 512, "ctx_size": 4096, "cache_type_k": "f16", "top_k": 40 },
  "objectives": [{ "metric": "decode_tps" }, { "metric": "peak_rss_bytes" }],
  "budget": { "max_trials": $trials, "confirm_pairs": 0 },
  "probes": { "speed": { "prompt_tokens": 8, "n_predict": 8, "repeats": 1, "warmup": 0 } }
}
EOF
echo "==> $trials trials with the default strategy, release build, fake engine"
TUNEBOOK_BANDWIDTH_GBPS=20 target/release/tunebook run "$work/study.json" \
  --data-dir "$work/data" --profiles "$work/profiles" > /dev/null
"$python" scripts/bench_gap.py "$work/data/tunebook.db" "$work/study.json"
