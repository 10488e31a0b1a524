#!/usr/bin/env bash
# Builds the browser side: the app compiled to wasm with the `hydrate`
# feature, wasm-bindgen's JS glue, the stylesheet and plotly.js (npm's
# plotly.js-dist-min, fetched once per machine and checked), into
# target/site/pkg.
# Usage: scripts/build-site.sh [--release]   (setup.sh builds --release; a
# debug bundle builds faster while working on the pages)
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

# plotly.js, served by the app itself: pinned, checked, cached per machine.
plotly_version=3.1.0
plotly_sha256=468c836ebfef001ded27637aaef26d09917482b7d7a1584dc64a9194169490e2
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tunebook/plotly-$plotly_version"
tarball="$cache/plotly.js-dist-min-$plotly_version.tgz"
if [[ ! -f "$cache/plotly.min.js" ]]; then
  mkdir -p "$cache"
  (cd "$cache" && npm pack --silent "plotly.js-dist-min@$plotly_version" >/dev/null)
  echo "$plotly_sha256  $tarball" | sha256sum --check --quiet
  tar -xzf "$tarball" -C "$cache" --strip-components=1 package/plotly.min.js package/LICENSE
fi
cp "$cache/plotly.min.js" "$pkg/plotly.min.js"
echo "==> browser bundle in $pkg"
