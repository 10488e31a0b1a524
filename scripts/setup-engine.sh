#!/usr/bin/env bash
# Builds llama.cpp's own llama-server and llama-bench (CPU) from the
# llama-cpp-python source package, once per machine, and links the result
# into .tools/engine. Idempotent: a finished build is reused.
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${TUNEBOOK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tunebook}"
# Built for this machine's CPU but without AMX: a virtual machine may
# report AMX tiles and refuse them (llama-server then dies of SIGILL on
# the first quantized matrix product); the AVX-512 and AVX2 paths remain.
NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
prefix="$cache/engine-llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION-noamx"
stamp="$prefix/.complete"

if [[ ! -f "$stamp" ]]; then
  echo "==> building llama.cpp (llama-cpp-python $LLAMA_CPP_PYTHON_VERSION) into $prefix; this takes several minutes once"
  rm -rf "$prefix"
  mkdir -p "$prefix"
  python3 -m venv "$prefix/venv"
  "$prefix/venv/bin/pip" install --quiet --upgrade pip
  # All the tools, not only the four needed: building only those targets
  # (scikit-build-core's build.targets) saved 5 % of the CPU time, side by
  # side (16m54s against 15m59s); ggml, libllama and the server are most.
  CMAKE_ARGS="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
  CFLAGS="$NO_AMX" CXXFLAGS="$NO_AMX" \
  CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    "$prefix/venv/bin/pip" install --no-cache-dir \
      --config-settings=build-dir="$prefix/build" \
      "llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION"
  test -x "$prefix/build/bin/llama-server"
  test -x "$prefix/build/bin/llama-bench"
  # The probes and `tunebook plan` call these beside llama-server.
  test -x "$prefix/build/bin/llama-perplexity"
  test -x "$prefix/build/bin/llama-fit-params"
  touch "$stamp"
fi

# The library that makes llama.cpp's tools write their last lines before
# they exit (see engine-bridge/native/log_flush.c), rebuilt when its source
# changes.
flush_src="$root/engine-bridge/native/log_flush.c"
flush_lib="$prefix/build/bin/libtunebook-log-flush.so"
if [[ ! -f "$flush_lib" || "$flush_src" -nt "$flush_lib" ]]; then
  cc -shared -fPIC -O2 -Wall -Wextra -Werror -o "$flush_lib.tmp" "$flush_src" -ldl
  mv "$flush_lib.tmp" "$flush_lib"
fi

mkdir -p "$root/.tools"
ln -sfn "$prefix/build/bin" "$root/.tools/engine-bin"
ln -sfn "$prefix/venv" "$root/.tools/engine-venv"
echo "==> engine ready: $root/.tools/engine-bin/llama-server"
