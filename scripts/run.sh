#!/usr/bin/env bash
# Sets up (once) and serves Tunebook on http://127.0.0.1:3000 with its
# embedded SQLite database in ./data. Extra arguments go to `tunebook serve`
# (e.g. --addr 127.0.0.1:8080, --database-url postgres://…). It serves an
# optimized build: a study's proposals and findings run several times
# faster than in the debug build the tests use.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/setup.sh --release
exec target/release/tunebook serve "$@"
