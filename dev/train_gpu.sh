#!/usr/bin/env bash
# One stage of a 1bit family's training (models/train/), on a GPU machine that has no package
# registry and runs one command for at most 10 minutes: each stage fits one command; what a later
# stage needs from an earlier one stays on the machine (/tmp) or comes back through $OUT.
#
# 1bit-tiny (FAMILY=tiny, the default):
#   dev/train_gpu.sh smoke    a minute-long run on a sliver of the data: checks the whole path
#   dev/train_gpu.sh target   tokenizer, the 32M target model, its GGUF and the reference data
#   dev/train_gpu.sh draft    the 6M drafter with the target's tokenizer (CARRY/tokenizer.json)
# 1bit-small (FAMILY=small):
#   dev/train_gpu.sh corpus   the tiny corpus plus the Python packages of this machine's image
#                             (package_corpus.py), the 32k tokenizer; returns the held-out split,
#                             the package list with licenses, and the tokenizer
#   dev/train_gpu.sh target   the 145M target (Q4_0 GGUF) and the reference data
#   dev/train_gpu.sh draft    the 19M drafter (Q8_0 GGUF)
#   dev/train_gpu.sh dflash-data
#                             the corpus stage's data without a new tokenizer (the shipped one's
#                             token ids): what dflash trains on; made by dflash when absent
#   dev/train_gpu.sh dflash-smoke
#                             20 s of DFlash training on the shipped held-out split, its export
#                             and the simulation of 2 prompts: checks the path without the corpus
#   dev/train_gpu.sh dflash   the DFlash drafter of the shipped target (TARGET: its GGUF, default
#                             CARRY/1bit-small-145m-q4_0.gguf), its Q8_0 GGUF and the simulated
#                             acceptance (export_dflash.py)
#   dev/train_gpu.sh send     only returns what earlier stages left to send
#
# Inputs (copied in): CARRY/data.tar.xz from prepare_data.sh and CARRY/gguf-py (the engine's);
# CARRY defaults to the checkout's .carry/. Outputs go to $OUT. Files to return wait in an outbox
# (/tmp/1bit-outbox) and each command sends what fits the machine's return limit (60 MiB of
# pieces: a file over 15 MiB goes in pieces NAME.part00, ..., joined with cat); what does not fit
# goes with the next command, of any stage ("send" sends only).
#
# A stage's work directory (/tmp/1bit-FAMILY-STAGE) stays between commands: with CHUNK_MINUTES
# set, a command trains that long and stops, and the same command run again continues from the
# checkpoint until the stage's training time is spent, then exports. FRESH=1 starts the stage
# over, and so do inputs other than the ones the work directory was made from.
set -euo pipefail
stage=${1:?stage: smoke, corpus, target, draft or send}
family=${FAMILY:-tiny}
root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/models/train
carry=${CARRY:-$root/.carry}
out=${OUT:?OUT must name the output directory}
outbox=/tmp/1bit-outbox
work=/tmp/1bit-$family-$stage
corpus=/tmp/1bit-$family-data  # the corpus stage's result: data/ and tokenizer.json
export PYTHONUNBUFFERED=1 PYTHONPATH=$here:$carry/gguf-py TOKENIZERS_PARALLELISM=true
mkdir -p "$outbox"

# send: moves files from the outbox to $OUT, oldest first, while the total stays under the limit.
send() {
  local limit=$((60 * 1024 * 1024)) used f size
  used=$(du -sb "$out" | cut -f1)
  for f in $(ls -tr "$outbox"); do
    size=$(stat -c %s "$outbox/$f")
    [ $((used + size)) -le $limit ] || continue
    mv "$outbox/$f" "$out/"
    used=$((used + size))
  done
  local left
  left=$(ls "$outbox" | wc -l)
  [ "$left" -eq 0 ] || echo "train_gpu.sh: $left files wait in the outbox: the next command sends them ($(ls "$outbox" | tr '\n' ' '))" >&2
}
trap send EXIT

pieces() {  # pieces FILE: into the outbox, split when large
  local f=$1 name
  name=$(basename "$f")
  if [ "$(stat -c %s "$f")" -gt $((15 * 1024 * 1024)) ]; then split -b 15M -d "$f" "$outbox/$name.part"; else cp "$f" "$outbox/"; fi
  sha256sum "$f" | tee -a "$outbox/sha256-$name.txt"
}

[ "$stage" = send ] && exit 0

# The data: tiny trains on the carried corpus, small on the corpus stage's; the DFlash drafter on
# the same documents with the shipped tokenizer and target.
if [ "$family" = small ] && [ "${stage#dflash}" != "$stage" ]; then
  data=$corpus/data tokenizer=$here/small/tokenizer.json target=${TARGET:-$carry/1bit-small-145m-q4_0.gguf}
  inputs=("$tokenizer")
  [ "$stage" = dflash-data ] || inputs+=("$target")
elif [ "$family" = small ] && [ "$stage" != corpus ]; then
  [ -f "$corpus/tokenizer.json" ] || { echo "train_gpu.sh: run FAMILY=small dev/train_gpu.sh corpus first" >&2; exit 1; }
  data=$corpus/data tokenizer=$corpus/tokenizer.json
  inputs=("$tokenizer")
else
  data=$work/data tokenizer=$work/tokenizer.json
  inputs=("$carry/data.tar.xz")
  [ "$stage" = draft ] && tokenizer=$carry/tokenizer.json && inputs+=("$tokenizer")
fi
sums=$(sha256sum "${inputs[@]}" | cut -d' ' -f1 | tr '\n' ' ')
if [ "${FRESH:-0}" = 1 ] || [ "$stage" = smoke ] || [ "$(cat "$work/inputs.sha256" 2>/dev/null)" != "$sums" ]; then
  rm -rf "$work"
fi
mkdir -p "$work/out"
if [ "$data" = "$work/data" ] && [ ! -f "$data/.complete" ]; then
  rm -rf "$data"
  mkdir -p "$data"
  tar -xJf "$carry/data.tar.xz" -C "$data"
fi
echo "$sums" >"$work/inputs.sha256"
python3 -c 'import torch, tokenizers, numpy; print("torch", torch.__version__, "tokenizers", tokenizers.__version__, torch.cuda.get_device_name())'

# train CONFIG CKPT MINUTES LOG: one command's share of the training time; returns 1 when the
# time is not spent yet (train.py's status 75), after saying so.
train() {
  local rc=0
  python3 "$here/train.py" --family "$family" --config "$1" --data "$data" --tokenizer "$tokenizer" --ckpt "$2" \
    --budget "$3" --chunk "${CHUNK_MINUTES:-1e9}" 2>&1 | tee -a "$4" || rc=${PIPESTATUS[0]}
  cp "$4" "$outbox/"
  [ "$rc" -eq 0 ] && return 0
  [ "$rc" -eq 75 ] && { echo "train_gpu.sh: $family $stage: the training time is not spent yet; run the same command again to go on" >&2; return 1; }
  exit "$rc"
}

case $family:$stage in
  tiny:smoke)
    for f in "$data"/*.jsonl; do head -n 300 "$f" > "$f.small" && mv "$f.small" "$f"; done
    touch "$data/.complete"
    python3 "$here/train_tokenizer.py" "$data" "$tokenizer"
    # 30 s of training in runs of at most 18 s: the first stops, the second finishes.
    calls=1
    until CHUNK_MINUTES=0.3 train target "$work/target.pt" 0.5 "$work/train-smoke.log"; do
      calls=$((calls + 1))
      [ $calls -le 3 ] || { echo "train_gpu.sh: smoke: the training time was not spent in 3 runs" >&2; exit 1; }
    done
    [ $calls -eq 2 ] || { echo "train_gpu.sh: smoke: $calls runs instead of 2" >&2; exit 1; }
    python3 "$here/export.py" "$work/target.pt" "$tokenizer" "$data" "$work/out" smoke --reference
    ls -la "$work/out"
    ;;
  tiny:target)
    touch "$data/.complete"
    [ -f "$tokenizer" ] || python3 "$here/train_tokenizer.py" "$data" "$tokenizer"
    train target "$work/target.pt" "${TARGET_MINUTES:-5.5}" "$work/train-target.log" || exit 0
    python3 "$here/export.py" "$work/target.pt" "$tokenizer" "$data" "$work/out" 1bit-tiny-32m-q8_0 --reference
    cp "$tokenizer" "$outbox/"
    pieces "$work/out/1bit-tiny-32m-q8_0.gguf"
    pieces "$work/out/reference.json.gz"
    ;;
  tiny:draft)
    touch "$data/.complete"
    train draft "$work/draft.pt" "${DRAFT_MINUTES:-2.5}" "$work/train-draft.log" || exit 0
    python3 "$here/export.py" "$work/draft.pt" "$tokenizer" "$data" "$work/out" 1bit-tiny-draft-6m-q8_0
    pieces "$work/out/1bit-tiny-draft-6m-q8_0.gguf"
    ;;
  small:corpus)
    if [ ! -f "$data/.complete" ]; then
      python3 "$here/package_corpus.py" "$data" 2>&1 | tee "$work/corpus.log"
      touch "$data/.complete"
    fi
    [ -f "$work/tokenizer.json" ] ||
      python3 "$here/train_tokenizer.py" "$data" "$work/tokenizer.json" --family small --sample-mb "${SAMPLE_MB:-200}" 2>&1 |
        tee -a "$work/corpus.log"
    rm -rf "$corpus" && mkdir -p "$corpus" && mv "$data" "$work/tokenizer.json" "$corpus/"
    python3 -m pip list --format=freeze >"$corpus/data/pip-freeze.txt" 2>/dev/null || true
    tar -cJf "$work/out/heldout.tar.xz" -C "$corpus/data" pretrain_test.jsonl chat_test.jsonl stats.json \
      packages.json package-licenses.txt pip-freeze.txt
    cp "$corpus/tokenizer.json" "$work/corpus.log" "$outbox/"
    pieces "$work/out/heldout.tar.xz"
    ;;
  small:target)
    train target "$work/target.pt" "${TARGET_MINUTES:-14}" "$work/train-target.log" || exit 0
    python3 "$here/export.py" "$work/target.pt" "$tokenizer" "$data" "$work/out" 1bit-small-145m-q4_0 --reference
    pieces "$work/out/1bit-small-145m-q4_0.gguf"
    pieces "$work/out/reference.json.gz"
    ;;
  small:draft)
    train draft "$work/draft.pt" "${DRAFT_MINUTES:-4}" "$work/train-draft.log" || exit 0
    python3 "$here/export.py" "$work/draft.pt" "$tokenizer" "$data" "$work/out" 1bit-small-draft-19m-q8_0
    pieces "$work/out/1bit-small-draft-19m-q8_0.gguf"
    ;;
  small:dflash-smoke)
    data=$work/data
    mkdir -p "$data" && tar -xJf "$here/small/heldout.tar.xz" -C "$data"
    for kind in pretrain chat; do cp "$data/${kind}_test.jsonl" "$data/${kind}_train.jsonl"; done
    python3 "$here/train_dflash.py" --family small --target "$target" --data "$data" --tokenizer "$tokenizer" \
      --ckpt "$work/dflash.pt" --budget 0.33 2>&1 | tee "$work/train-dflash-smoke.log"
    python3 "$here/export_dflash.py" "$work/dflash.pt" "$target" "$tokenizer" "$data" "$work/out" smoke --prompts 2 2>&1 |
      tee -a "$work/train-dflash-smoke.log"
    cp "$work/train-dflash-smoke.log" "$out/"
    ;;
  small:dflash-data | small:dflash)
    if [ ! -f "$data/.complete" ]; then
      rm -rf "$data" && mkdir -p "$data"
      tar -xJf "$carry/data.tar.xz" -C "$data"
      python3 "$here/package_corpus.py" "$data" 2>&1 | tee "$work/corpus.log"
      touch "$data/.complete"
    fi
    python3 -c 'import sys, train; [train.tokenized_split(sys.argv[1], sys.argv[2], s) for s in ("train", "test")]' \
      "$tokenizer" "$data"
    [ "$stage" = dflash ] || exit 0
    rc=0
    python3 "$here/train_dflash.py" --family small --target "$target" --data "$data" --tokenizer "$tokenizer" \
      --ckpt "$work/dflash.pt" --budget "${DFLASH_MINUTES:-6}" --chunk "${CHUNK_MINUTES:-1e9}" 2>&1 |
      tee -a "$work/train-dflash.log" || rc=${PIPESTATUS[0]}
    cp "$work/train-dflash.log" "$outbox/"
    [ "$rc" -eq 75 ] && { echo "train_gpu.sh: small dflash: the training time is not spent yet; run the same command again" >&2; exit 0; }
    [ "$rc" -eq 0 ] || exit "$rc"
    python3 "$here/export_dflash.py" "$work/dflash.pt" "$target" "$tokenizer" "$data" "$work/out" \
      1bit-small-dflash-25m-q8_0 2>&1 | tee -a "$work/train-dflash.log"
    cp "$work/train-dflash.log" "$work/out/dflash-reference.json" "$outbox/"
    pieces "$work/out/1bit-small-dflash-25m-q8_0.gguf"
    ;;
  *) echo "train_gpu.sh: unknown stage $stage for family $family" >&2; exit 1 ;;
esac
