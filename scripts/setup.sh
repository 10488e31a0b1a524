#!/usr/bin/env bash
# Sets up everything Tunebook needs on a fresh machine, and builds it:
# tools (wasm target, wasm-bindgen), the real engine (llama.cpp, CPU), a
# real small instruct model and the tiny random one, the server and the
# browser bundle. Idempotent: tools, the engine build and the model are
# cached per machine, so a second run takes seconds.
# Usage: scripts/setup.sh [--browser] [--release | --tests]
#   --browser  also installs Chromium for the browser tests
#   --release  builds the optimized server (what scripts/run.sh serves)
#   --tests    builds every test instead (what scripts/test.sh runs): the
#              server the tests start is that build's, so nothing is
#              compiled twice (a plain build unifies the dependencies'
#              features without the tests' and compiles most of them again);
#              clippy lints the workspace's crates as they compile, the
#              tests' and the browser bundle's (scripts/lint.env)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

build=debug
tools=()
for arg in "$@"; do
  case "$arg" in
    --browser) tools+=(--browser) ;;
    --release) build=release ;;
    --tests) build=tests ;;
    *) echo "setup.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

scripts/setup-tools.sh "${tools[@]}"
scripts/setup-engine.sh
scripts/setup-models.sh
# The build folder every checkout on this machine shares
# (.cargo/config.toml): each checkout adds its own crates to the
# dependencies they share, so past 16 GiB it starts over (a test build
# from nothing is about 3).
metadata="$(cargo metadata --format-version 1 --no-deps)"
shared="$(python3 -c 'import json, sys; print(json.load(sys.stdin)["build_directory"])' <<<"$metadata")"
if [[ -d "$shared" ]] && (($(du -s --block-size=1G "$shared" | cut -f1) > 16)); then
  echo "==> the shared build folder $shared is past 16 GiB: starting it over"
  rm -rf "$shared"
fi
# Cargo keys the workspace's own crates in the shared folder by their
# place within the checkout, not by the checkout's, and takes them as
# built when their files are older than what it built there last: a
# checkout made before another one's last build would be handed that
# one's programs. The folder keeps which checkout built in it last;
# another one's crates are marked changed first, and compile.
last="$shared/last-checkout"
if [[ "$(cat "$last" 2>/dev/null)" != "$root" ]]; then
  python3 -c '
import json, os, sys
for p in json.load(sys.stdin)["packages"]:
    for d, _, files in os.walk(os.path.dirname(p["manifest_path"])):
        for f in files:
            os.utime(os.path.join(d, f))
' <<<"$metadata"
  mkdir -p "$shared"
  printf '%s\n' "$root" >"$last"
fi
echo "==> building tunebook ($build)"
if [[ "$build" == tests ]]; then
  # shellcheck source=scripts/lint.env
  source scripts/lint.env
fi
# The browser bundle optimized (a third the size of a debug one, and it
# hydrates several times faster): what every page loads. It builds beside
# the server: its own folders of target/, whose locks the server's build
# does not take, and the end of its build (link-time optimization, one
# thread) leaves a core to the other.
scripts/build-site.sh --release &
site=$!
trap 'kill "$site" 2>/dev/null || true' EXIT
case "$build" in
  debug) cargo build --quiet -p tunebook; bin=target/debug/tunebook ;;
  release) cargo build --quiet --release -p tunebook --bin tunebook; bin=target/release/tunebook ;;
  tests) cargo test --quiet --workspace --no-run; bin=target/debug/tunebook ;;
esac
wait "$site"
trap - EXIT
model=.tools/models/tiny-llama.gguf
if [[ ! -f "$model" ]]; then
  "$bin" make-model "$model"
fi
