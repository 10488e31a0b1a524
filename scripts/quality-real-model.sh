#!/usr/bin/env bash
# The real instruct model's quality at each K/V cache type, asked through
# its chat template and asked raw: the default suite's score per
# configuration, from `tunebook probe`, in one run.
# Usage: scripts/quality-real-model.sh [MODEL]   (default smollm2-135m)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh
model="${1:-smollm2-135m}"
plans="$(mktemp -d)"
trap 'rm -rf "$plans"' EXIT
printf '[quality]\n' >"$plans/chat.toml"
printf '[quality]\nraw = true\n' >"$plans/raw.toml"
for cache in f16 q8_0 q4_0; do
  for how in chat raw; do
    score="$(target/debug/tunebook probe --profile demo --model "$model" --plan "$plans/$how.toml" \
      -- ctx_size=2048 threads=2 flash_attn=on cache_type_k="$cache" cache_type_v="$cache" \
      | grep -E '^ *quality' || true)"
    echo "$cache $how: ${score:-no quality line}"
  done
done
