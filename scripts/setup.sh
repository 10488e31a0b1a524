#!/usr/bin/env bash
# Sets up everything Tunebook needs on a fresh machine, and builds it:
# tools (wasm target, wasm-bindgen), the real engine (llama.cpp, CPU), a
# real small instruct model and the tiny random one, the server and the
# browser bundle. Idempotent: tools, the engine build and the model are
# cached per machine, so a second run takes seconds.
# Usage: scripts/setup.sh [--browser]   (--browser also installs Chromium for tests)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

scripts/setup-tools.sh "$@"
scripts/setup-engine.sh
scripts/setup-models.sh
echo "==> building tunebook"
cargo build --quiet -p tunebook
# The browser bundle optimized (a third the size of a debug one, and it
# hydrates several times faster): what every page loads.
scripts/build-site.sh --release
model=.tools/models/tiny-llama.gguf
if [[ ! -f "$model" ]]; then
  target/debug/tunebook make-model "$model"
fi
