#!/usr/bin/env bash
# Packs an engine built on this machine for the GPU machine, whose own CUDA build takes minutes of
# its time: llama-bench, test-backend-ops (as engine-test-backend-ops), their shared libraries and
# 1bit, into .carry/prebuilt.tar.xz, which `dev/gpu_measure.sh prebuilt` unpacks there.
#
#   scripts/engine.sh --prepare /tmp/llama
#   cmake -S /tmp/llama -B /tmp/cuda-build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF \
#     -DBUILD_SHARED_LIBS=ON -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
#     -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DCMAKE_BUILD_TYPE=Release
#   cmake --build /tmp/cuda-build --target llama-bench test-backend-ops
#   dev/pack_prebuilt.sh /tmp/cuda-build
set -euo pipefail
build=${1:?usage: pack_prebuilt.sh CMAKE_BUILD_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
for f in "$build/bin/llama-bench" "$build/bin/test-backend-ops" "$root/build/bin/1bit"; do
  [ -x "$f" ] || { echo "pack_prebuilt.sh: $f is missing (build it first)" >&2; exit 1; }
done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp "$build/bin/llama-bench" "$root/build/bin/1bit" "$stage/"
cp "$build/bin/test-backend-ops" "$stage/engine-test-backend-ops"
find "$build/bin" -maxdepth 1 -name 'lib*.so*' -exec cp -P {} "$stage/" \;
mkdir -p "$root/.carry"
tar -C "$stage" -cJf "$root/.carry/prebuilt.tar.xz" .
echo "pack_prebuilt.sh: $(du -h "$root/.carry/prebuilt.tar.xz" | cut -f1) in .carry/prebuilt.tar.xz: $(ls "$stage" | tr '\n' ' ')"
