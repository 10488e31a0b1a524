#!/usr/bin/env bash
# Checks the GPU side on a machine with an NVIDIA GPU and the CUDA toolkit
# (nvcc, cmake); never part of the tests, which need no GPU. Builds
# llama.cpp's llama-server and llama-bench with CUDA from the same
# llama-cpp-python source package as the CPU engine, then runs
# engine-bridge's gpu_check (the planner's GPU split against the engine's
# own buffers at several -ngl and with a mixture of experts' experts kept on
# the CPU, the nvidia-smi sampling against the device)
# and the harness benchmark with every layer on the GPU (on a 4.3 GB model
# gpu_check writes).
#
# Usage: scripts/check-gpu.sh [LLAMA_SRC]
#   LLAMA_SRC: a llama.cpp source folder or .tar.xz of one; by default the
#   package's own, fetched with pip.
#   TUNEBOOK_GPU_BINARIES=DIR: take gpu_check, bench_harness and
#   tunebook-fake-engine from DIR (built elsewhere with
#   `cargo build --release -p engine-bridge --example gpu_check
#   --example bench_harness --bin tunebook-fake-engine`) where this machine
#   has no Rust toolchain.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
work="${TUNEBOOK_GPU_WORK:-$root/.tools/gpu}"
mkdir -p "$work" "$work/models"

src="${1:-}"
if [[ -z "$src" ]]; then
  python3 -m pip download --quiet --no-deps "llama-cpp-python==$version" -d "$work"
  tar -xzf "$work/llama_cpp_python-$version.tar.gz" -C "$work"
  src="$work/llama_cpp_python-$version/vendor/llama.cpp"
elif [[ -f "$src" ]]; then
  tar -xJf "$src" -C "$work"
  src="$work/llama.cpp"
fi

build="$work/build-cuda"
if [[ ! -x "$build/bin/llama-fit-params" ]]; then
  echo "==> building llama.cpp with CUDA from $src"
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=native \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF >"$work/cmake.log"
  cmake --build "$build" --target llama-server llama-bench llama-fit-params -j "$(nproc)" >"$work/build.log"
fi
"$build/bin/llama-server" --version 2>&1 | head -n 3

bins="${TUNEBOOK_GPU_BINARIES:-}"
if [[ -z "$bins" ]]; then
  cargo build --quiet --release -p engine-bridge \
    --example gpu_check --example bench_harness --bin tunebook-fake-engine
  bins="$root/target/release"
fi
find_bin() { if [[ -x "$bins/$1" ]]; then echo "$bins/$1"; else echo "$bins/examples/$1"; fi; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
status=0
"$(find_bin gpu_check)" "$build/bin/llama-server" "$work/models" || status=1
echo
# Every layer on the GPU, on a model big enough to be bound by its memory.
"$(find_bin bench_harness)" "$build/bin/llama-server" "$build/bin/llama-bench" \
  "$(find_bin tunebook-fake-engine)" "$work/models/large-llama.gguf" "${THREADS:-4}" 99 512
exit "$status"
