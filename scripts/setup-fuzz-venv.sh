#!/usr/bin/env bash
# The API fuzzer's Python: a project-local virtual environment
# (.tools/fuzz-venv) with schemathesis, which drives every route of the
# JSON API from its OpenAPI description (the `openapi` test). Installs only
# when missing; prints the path of the `schemathesis` command.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.tools/fuzz-venv"
version="4.32.5"
if [[ "$("$venv/bin/schemathesis" --version 2>/dev/null)" != *"$version"* ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "schemathesis==$version" >&2
fi
echo "$venv/bin/schemathesis"
