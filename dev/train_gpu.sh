#!/usr/bin/env bash
# One stage of 1bit-tiny's training (models/train/), on a GPU machine that has no package
# registry and runs one command for at most 10 minutes: each stage fits one command; what a later
# stage needs from an earlier one comes back through $OUT and is copied in again.
#
#   dev/train_gpu.sh smoke    a minute-long run on a sliver of the data: checks the whole path
#   dev/train_gpu.sh target   tokenizer, the 32M target model, its GGUF and the reference data
#   dev/train_gpu.sh draft    the 6M drafter with the target's tokenizer, and its GGUF
#
# Inputs (copied in): CARRY/data.tar.xz from prepare_data.py, CARRY/gguf-py (the engine's), and
# for "draft" CARRY/tokenizer.json from the "target" stage (CARRY defaults to the checkout's
# .carry/). Outputs go to $OUT; a GGUF over 15 MiB comes back in pieces (NAME.gguf.part00, ...),
# joined with cat.
#
# A stage's work directory (/tmp/1bit-tiny-STAGE) stays between commands: with CHUNK_MINUTES set,
# a command trains that long and stops, and the same command run again continues from the
# checkpoint until the stage's training time is spent, then exports. FRESH=1 starts the stage
# over.
set -euo pipefail
stage=${1:?stage: smoke, target or draft}
root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/models/train
carry=${CARRY:-$root/.carry}
out=${OUT:?OUT must name the output directory}
work=/tmp/1bit-tiny-$stage
export PYTHONUNBUFFERED=1 PYTHONPATH=$here:$carry/gguf-py TOKENIZERS_PARALLELISM=true

# Inputs that differ from the ones the work directory was made from start the stage over.
inputs=("$carry/data.tar.xz")
[ "$stage" = draft ] && inputs+=("$carry/tokenizer.json")
sums=$(sha256sum "${inputs[@]}" | cut -d' ' -f1 | tr '\n' ' ')
if [ "${FRESH:-0}" = 1 ] || [ "$stage" = smoke ] || [ "$(cat "$work/inputs.sha256" 2>/dev/null)" != "$sums" ]; then
  rm -rf "$work"
fi
if [ ! -f "$work/data/.complete" ]; then
  rm -rf "$work"
  mkdir -p "$work/data"
  tar -xJf "$carry/data.tar.xz" -C "$work/data"
  touch "$work/data/.complete"
  echo "$sums" >"$work/inputs.sha256"
fi
mkdir -p "$work/out"
python3 -c 'import torch, tokenizers, numpy, yaml; print("torch", torch.__version__, "tokenizers", tokenizers.__version__, torch.cuda.get_device_name())'

# train CONFIG TOKENIZER CKPT MINUTES LOG: one command's share of the training time; returns 1
# when the time is not spent yet (train.py's status 75), after saying so.
train() {
  local rc=0
  python3 "$here/train.py" --config "$1" --data "$work/data" --tokenizer "$2" --ckpt "$3" --budget "$4" \
    --chunk "${CHUNK_MINUTES:-1e9}" 2>&1 | tee -a "$5" || rc=${PIPESTATUS[0]}
  cp "$5" "$out/"
  [ "$rc" -eq 0 ] && return 0
  [ "$rc" -eq 75 ] && { echo "train_gpu.sh: $stage: the training time is not spent yet; run the same command again to go on" >&2; return 1; }
  exit "$rc"
}

pieces() {  # pieces FILE: copy to $OUT, split when large
  local f=$1 name
  name=$(basename "$f")
  if [ "$(stat -c %s "$f")" -gt $((15 * 1024 * 1024)) ]; then split -b 15M -d "$f" "$out/$name.part"; else cp "$f" "$out/"; fi
  sha256sum "$f" | tee -a "$out/sha256.txt"
}

case $stage in
  smoke)
    for f in "$work"/data/*.jsonl; do head -n 300 "$f" > "$f.small" && mv "$f.small" "$f"; done
    python3 "$here/train_tokenizer.py" "$work/data" "$work/tokenizer.json"
    # 30 s of training in runs of at most 18 s: the first stops, the second finishes.
    calls=1
    until CHUNK_MINUTES=0.3 train target "$work/tokenizer.json" "$work/target.pt" 0.5 "$work/train-smoke.log"; do
      calls=$((calls + 1))
      [ $calls -le 3 ] || { echo "train_gpu.sh: smoke: the training time was not spent in 3 runs" >&2; exit 1; }
    done
    [ $calls -eq 2 ] || { echo "train_gpu.sh: smoke: $calls runs instead of 2" >&2; exit 1; }
    python3 "$here/export.py" "$work/target.pt" "$work/tokenizer.json" "$work/data" "$work/out" smoke --reference
    ls -la "$work/out"
    ;;
  target)
    [ -f "$work/tokenizer.json" ] || python3 "$here/train_tokenizer.py" "$work/data" "$work/tokenizer.json"
    train target "$work/tokenizer.json" "$work/target.pt" "${TARGET_MINUTES:-5.5}" "$work/train-target.log" || exit 0
    python3 "$here/export.py" "$work/target.pt" "$work/tokenizer.json" "$work/data" "$work/out" \
      1bit-tiny-32m-q8_0 --reference
    cp "$work/tokenizer.json" "$out/"
    pieces "$work/out/1bit-tiny-32m-q8_0.gguf"
    pieces "$work/out/reference.json.gz"
    ;;
  draft)
    train draft "$carry/tokenizer.json" "$work/draft.pt" "${DRAFT_MINUTES:-2.5}" "$work/train-draft.log" || exit 0
    python3 "$here/export.py" "$work/draft.pt" "$carry/tokenizer.json" "$work/data" "$work/out" 1bit-tiny-draft-6m-q8_0
    pieces "$work/out/1bit-tiny-draft-6m-q8_0.gguf"
    ;;
  *) echo "train_gpu.sh: unknown stage $stage" >&2; exit 1 ;;
esac
