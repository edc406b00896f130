#!/usr/bin/env bash
# Hadamard-rotated Q4_0 at real size with this checkout's build (the engine on the CPU, or on CUDA
# where it was built so): for each shape, an F16 synthetic source from `1bit synth`, `1bit rotate`
# of it under /usr/bin/time (its time and peak memory), `1bit rotate --plain` of the same source,
# and llama-bench of the rotated file against the plain one, alternating (ROUNDS times, default 2)
# in one run: what the rotation of the activations costs in prompt and decode speed; on CUDA also
# the rotated file with the rotation as its own kernel (ONEBIT_Q4_0_ROT_FUSED=0, patch 0010's
# switch back). Files made by an earlier run in WORK are used again.
#
#   dev/rotate_measure.sh OUT_DIR [SHAPE...]     (default shapes: llama3-8b qwen35-9b)
#
# CUDA_UNFUSED=1 adds the unfused rotated runs. BENCH sets llama-bench's tests (default "-p 512 -n 128 -r 5"; on two cores "-p 64 -n 16 -r 3"
# keeps an 8B under a few minutes); WORK is where the models go (default /tmp/onebit-rotate: about
# 16 GB for an 8B's F16 source while it is rotated, then 2 x 4.3 GB).
set -euo pipefail
out=${1:?usage: rotate_measure.sh OUT_DIR [SHAPE...]}
shift
[ $# -gt 0 ] || set -- llama3-8b qwen35-9b
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/bin work=${WORK:-/tmp/onebit-rotate}
read -r -a bench <<<"${BENCH:--p 512 -n 128 -r 5}"
vocab=${VOCAB_DIR:+--vocab-dir $VOCAB_DIR}
mkdir -p "$out" "$work"
for shape in "$@"; do
  src=$work/$shape-f16.gguf rot=$work/$shape-h32.gguf plain=$work/$shape-q4_0.gguf
  if [ ! -f "$rot" ] || [ ! -f "$plain" ]; then
    # shellcheck disable=SC2086
    "$bin/1bit" synth --like "$shape" --type f16 $vocab -o "$src" >/dev/null
    /usr/bin/time -v "$bin/1bit" rotate "$src" "$rot" >"$out/rotate-$shape.txt" 2>&1
    "$bin/1bit" rotate --plain "$src" "$plain" >>"$out/rotate-$shape.txt" 2>&1
    rm -f "$src"
  fi
  grep -hE "rotated and quantized|Elapsed|Maximum resident" "$out/rotate-$shape.txt" 2>/dev/null || true
  for round in $(seq "${ROUNDS:-2}"); do
    for which in plain rotated ${CUDA_UNFUSED:+rotated-unfused}; do
      file=$rot switch=
      [ $which = plain ] && file=$plain
      [ $which = rotated-unfused ] && switch=ONEBIT_Q4_0_ROT_FUSED=0
      echo "== $which, round $round: $shape"
      env $switch "$bin/llama-bench" -m "$file" "${bench[@]}" -o md || echo "llama-bench failed"
    done
  done >"$out/bench-$shape.md" 2>&1
  grep -E "^==| (pp|tg)[0-9]+ |failed" "$out/bench-$shape.md"
done
