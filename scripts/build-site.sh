#!/usr/bin/env bash
# Builds the browser side: the app compiled to wasm with the `hydrate`
# feature, wasm-bindgen's JS glue, and the stylesheet, into target/site/pkg.
# Usage: scripts/build-site.sh [--release]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

profile=debug
cargo_profile=()
if [[ "${1:-}" == "--release" ]]; then
  profile=wasm-release
  cargo_profile=(--profile wasm-release)
fi

cargo build --quiet -p tunebook-app --lib --target wasm32-unknown-unknown \
  --no-default-features --features hydrate "${cargo_profile[@]}"
pkg="$root/target/site/pkg"
mkdir -p "$pkg"
"$root/.tools/bin/wasm-bindgen" --target web --no-typescript \
  --out-dir "$pkg" --out-name tunebook \
  "target/wasm32-unknown-unknown/$profile/tunebook_app.wasm"
cp style/main.css "$pkg/tunebook.css"
echo "==> browser bundle in $pkg"
