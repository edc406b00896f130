#!/usr/bin/env bash
# The measurements a GPU session owes, in stages that each fit the GPU machine's 10-minute calls.
# Run from the checkout on that machine, after scripts/gpu_carry.sh filled .carry/ here; logs go
# to $OUT (default ./gpu-out).
#
#   scripts/gpu_session.sh build     the engine and 1bit with CUDA (about 6 minutes with 16 cores)
#   scripts/gpu_session.sh kernels   both kernel drivers with --bench-mode, and ctest -L cuda
#                                    (the drivers' checks and the engine's test-backend-ops)
#   scripts/gpu_session.sh e2e       llama-bench with each engine switch off and on, on
#                                    synthetic real-size models: pp2048 on a Qwen3.5-style hybrid
#                                    (gdn-prefill), tg128 on Llama 3 8B Q4_0 (gemv-q4_0)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
cd "$root"
export CMAKE_PREFIX_PATH=$root/.carry/nlohmann ONEBIT_LLAMA_SOURCE=$root/.carry/engine-src.tar.xz
export ONEBIT_CACHE_DIR=${ONEBIT_CACHE_DIR:-/tmp/onebit-cache}
bin=$root/build/bin
stage=${1:?usage: gpu_session.sh build|kernels|e2e}

case $stage in
  build)
    { time JOBS=$(nproc) make build CUDA=1; } >"$out/build.log" 2>&1 || { tail -n 30 "$out/build.log"; exit 1; }
    tail -n 3 "$out/build.log"
    ;;
  kernels)
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$out/gpu.txt" 2>&1 || true
    "$bin/gdn_prefill_driver" --bench-mode --reps 10 >"$out/gdn-prefill.log" 2>&1 || true
    "$bin/gemv_q4_0_driver" --bench-mode --reps 5 >"$out/gemv-q4_0.log" 2>&1 || true
    (cd build && ctest -L cuda --output-on-failure) >"$out/ctest-cuda.log" 2>&1 || true
    grep -hE '^(SNR|allclose):' "$out/gdn-prefill.log" "$out/gemv-q4_0.log"
    grep -hE '^(case_ms|engine_ms):' "$out/gdn-prefill.log" | head -40
    tail -n 8 "$out/ctest-cuda.log"
    ;;
  e2e)
    hybrid=/tmp/qwen35-9b-q4_0.gguf llama=/tmp/llama3-8b-q4_0.gguf
    [ -f "$hybrid" ] || "$bin/1bit" synth --like qwen35-9b --type q4_0 --vocab-dir .carry/vocab -o "$hybrid" >/dev/null
    [ -f "$llama" ] || "$bin/1bit" synth --like llama3-8b --type q4_0 --vocab-dir .carry/vocab -o "$llama" >/dev/null
    for switch in "" ONEBIT_GDN_PREFILL=1 ONEBIT_GDN_PREFILL=2; do
      echo "== ${switch:-no switch}: pp2048 on the hybrid"
      env $switch "$bin/llama-bench" -m "$hybrid" -p 2048 -n 0 -r 3 -fa 1 -o md
    done >"$out/e2e-gdn.md" 2>&1
    for switch in "" ONEBIT_GEMV_Q4_0=1; do
      echo "== ${switch:-no switch}: tg128 on Llama 3 8B Q4_0"
      env $switch "$bin/llama-bench" -m "$llama" -p 0 -n 128 -r 3 -fa 1 -o md
    done >"$out/e2e-gemv.md" 2>&1
    cat "$out/e2e-gdn.md" "$out/e2e-gemv.md" | grep -E '^==|\| (pp|tg)'
    ;;
  *)
    echo "usage: gpu_session.sh build|kernels|e2e" >&2
    exit 2
    ;;
esac
