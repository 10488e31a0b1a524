#!/usr/bin/env bash
# The API fuzzer: a virtual environment with schemathesis, which drives
# every route of the JSON API from its OpenAPI description (the `openapi`
# test). Kept once per machine in the cache, linked as .tools/fuzz-venv;
# installs only when missing; prints the path of the `schemathesis` command.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="4.32.5"
cache="${TUNEBOOK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tunebook}"
venv="$cache/fuzz-venv-schemathesis-$version"
mkdir -p "$root/.tools"
# A checkout from before the cache kept its own folder there: replaced.
link="$root/.tools/fuzz-venv"
[[ -L "$link" || ! -e "$link" ]] || rm -rf "$link"
ln -sfn "$venv" "$link"
if [[ "$("$venv/bin/schemathesis" --version 2>/dev/null)" != *"$version"* ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "schemathesis==$version" >&2
fi
echo "$venv/bin/schemathesis"
