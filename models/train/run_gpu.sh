#!/usr/bin/env bash
# One stage of 1bit-tiny's training, as run on the GPU machine (each stage fits one 10-minute
# call; what a later stage needs from an earlier one comes back through $OUT and is carried in).
#
#   run_gpu.sh smoke    a minute-long run on a sliver of the data: checks the whole path
#   run_gpu.sh target   tokenizer, the 32M target model, its GGUF and the reference data
#   run_gpu.sh draft    the 6M drafter with the target's tokenizer, and its GGUF
#
# Inputs (carried): CARRY/data.tar.xz from prepare_data.py, CARRY/gguf-py (the engine's), and
# for "draft" CARRY/tokenizer.json from the "target" stage. Outputs go to $OUT; a GGUF over
# 15 MiB comes back in pieces (NAME.gguf.part00, ...), joined with cat.
set -euo pipefail
stage=${1:?stage: smoke, target or draft}
here=$(cd "$(dirname "$0")" && pwd)
carry=${CARRY:-$here/../../.carry}
out=${OUT:?OUT must name the output directory}
work=/tmp/1bit-tiny-$stage
export PYTHONUNBUFFERED=1 PYTHONPATH=$here:$carry/gguf-py TOKENIZERS_PARALLELISM=true

rm -rf "$work" && mkdir -p "$work/data" "$work/out"
tar -xJf "$carry/data.tar.xz" -C "$work/data"
python3 -c 'import torch, tokenizers, numpy, yaml; print("torch", torch.__version__, "tokenizers", tokenizers.__version__, torch.cuda.get_device_name())'

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
    python3 "$here/train.py" --config target --data "$work/data" --tokenizer "$work/tokenizer.json" \
      --ckpt "$work/target.pt" --budget 0.3
    python3 "$here/train.py" --config target --data "$work/data" --tokenizer "$work/tokenizer.json" \
      --ckpt "$work/target.pt" --budget 0.5
    python3 "$here/export.py" "$work/target.pt" "$work/tokenizer.json" "$work/data" "$work/out" smoke --reference
    ls -la "$work/out"
    ;;
  target)
    python3 "$here/train_tokenizer.py" "$work/data" "$work/tokenizer.json"
    python3 "$here/train.py" --config target --data "$work/data" --tokenizer "$work/tokenizer.json" \
      --ckpt "$work/target.pt" --budget "${TARGET_MINUTES:-5.5}" 2>&1 | tee "$out/train-target.log"
    python3 "$here/export.py" "$work/target.pt" "$work/tokenizer.json" "$work/data" "$work/out" \
      1bit-tiny-32m-q8_0 --reference
    cp "$work/tokenizer.json" "$out/"
    pieces "$work/out/1bit-tiny-32m-q8_0.gguf"
    pieces "$work/out/reference.json.gz"
    ;;
  draft)
    python3 "$here/train.py" --config draft --data "$work/data" --tokenizer "$carry/tokenizer.json" \
      --ckpt "$work/draft.pt" --budget "${DRAFT_MINUTES:-2.5}" 2>&1 | tee "$out/train-draft.log"
    python3 "$here/export.py" "$work/draft.pt" "$carry/tokenizer.json" "$work/data" "$work/out" 1bit-tiny-draft-6m-q8_0
    pieces "$work/out/1bit-tiny-draft-6m-q8_0.gguf"
    ;;
  *) echo "run_gpu.sh: unknown stage $stage" >&2; exit 1 ;;
esac
