#!/usr/bin/env bash
# Installs the build tools Tunebook needs, once per machine, from package
# registries only: the wasm32 Rust target, wasm-bindgen-cli at exactly the
# version in Cargo.lock, and (with --browser) Debian's Chromium + ChromeDriver.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${TUNEBOOK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tunebook}"

rustup target list --installed | grep -qx wasm32-unknown-unknown \
  || rustup target add wasm32-unknown-unknown
rustup component list --installed | grep -q '^clippy' || rustup component add clippy
rustup component list --installed | grep -q '^rustfmt' || rustup component add rustfmt

# wasm-bindgen-cli must match the wasm-bindgen crate exactly.
wb_version="$(awk '/^name = "wasm-bindgen"$/ {getline; gsub(/version = |"/, ""); print; exit}' "$root/Cargo.lock")"
wb_root="$cache/wasm-bindgen-$wb_version"
if [[ ! -x "$wb_root/bin/wasm-bindgen" ]]; then
  echo "==> installing wasm-bindgen-cli $wb_version into $wb_root"
  cargo install --quiet wasm-bindgen-cli --version "$wb_version" --root "$wb_root"
fi
mkdir -p "$root/.tools/bin"
ln -sfn "$wb_root/bin/wasm-bindgen" "$root/.tools/bin/wasm-bindgen"

# systemd-analyze checks the systemd units recipes write (a unit test).
if ! command -v systemd-analyze >/dev/null; then
  echo "==> installing Debian's systemd (for systemd-analyze)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq systemd >/dev/null
fi

if [[ "${1:-}" == "--browser" ]]; then
  if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    echo "==> installing Debian's chromium and chromium-driver"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq chromium chromium-driver >/dev/null
  fi
fi
