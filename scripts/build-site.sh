#!/usr/bin/env bash
# Builds the browser side: the app compiled to wasm with the `hydrate`
# feature, wasm-bindgen's JS glue, the stylesheet and plotly.js (npm's
# plotly.js-dist-min and plotly.js-gl2d-dist-min, fetched once per machine
# and checked), into
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
rm -rf "$pkg/snippets" # the app's JS modules, written anew below
"$root/.tools/bin/wasm-bindgen" --target web --no-typescript \
  --out-dir "$pkg" --out-name tunebook \
  "target/wasm32-unknown-unknown/$profile/tunebook_app.wasm"
cp style/main.css "$pkg/tunebook.css"

# plotly.js, served by the app itself: pinned, checked, cached per machine.
# The whole library, and its partial bundle of 2D traces that study and
# trial pages start with (app/src/plot.rs, plotly_for).
plotly_version=3.2.0
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tunebook/plotly-$plotly_version"
fetch_plotly() { # npm package, its sha256, the file it holds
  local package=$1 sha256=$2 file=$3
  local tarball="$cache/$package-$plotly_version.tgz"
  if [[ ! -f "$cache/$file" ]]; then
    mkdir -p "$cache"
    (cd "$cache" && npm pack --silent "$package@$plotly_version" >/dev/null)
    echo "$sha256  $tarball" | sha256sum --check --quiet
    tar -xzf "$tarball" -C "$cache" --strip-components=1 "package/$file" package/LICENSE
  fi
  cp "$cache/$file" "$pkg/$file"
}
fetch_plotly plotly.js-dist-min \
  aa6b8416ed1277c5f9931347557cdb3d62444f4340adef9498a2bc9ae878c250 plotly.min.js
fetch_plotly plotly.js-gl2d-dist-min \
  99a86b41e777ea3e85717ef7537e69b51b0bedf7dfdd82a9a35f8b03b0fa6698 plotly-gl2d.min.js
# A gzipped copy beside each file, which the server sends to browsers that
# take gzip (compressed once here, not on every request).
find "$pkg" -type f \( -name '*.js' -o -name '*.wasm' -o -name '*.css' \) \
  -exec gzip -9 --keep --force {} +
echo "==> browser bundle in $pkg"
