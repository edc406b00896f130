#!/usr/bin/env bash
# The shipped GGUFs (models/*.gguf, about 190 MB) are more than the 64 MiB of working tree that
# travels to the GPU machine. `dev/stow_models.sh out` moves them out of the checkout before a GPU
# call (a tracked file missing from the working tree does not travel); `dev/stow_models.sh in`
# puts them back; `out --keep NAME.gguf` leaves that one in the checkout (one small model and the
# tree fit). `status` says where they are. The stages that need them there (train_gpu.sh
# dflash, gpu_measure.sh small-pair) get them as pieces split under .gpu/ and carried one
# command at a time (`head -c` / `tail -c`, joined with cat on that machine).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
stow=${ONEBIT_STOW_DIR:-/tmp/1bit-stowed-models}
case ${1:-status} in
  out)
    mkdir -p "$stow"
    shopt -s nullglob
    keep=
    if [ "${2:-}" = --keep ]; then
      keep=${3:?stow_models: --keep needs a file name in models/}
      [ -f "$root/models/$keep" ] || { echo "stow_models: --keep: no models/$keep" >&2; exit 1; }
    fi
    files=()
    for f in "$root"/models/*.gguf; do [ "$(basename "$f")" = "$keep" ] || files+=("$f"); done
    [ ${#files[@]} -gt 0 ] || { echo "stow_models: no models/*.gguf in the checkout (already out?)" >&2; exit 1; }
    mv "${files[@]}" "$stow/"
    echo "stow_models: ${#files[@]} files moved to $stow; put them back with: dev/stow_models.sh in" >&2
    ;;
  in)
    shopt -s nullglob
    files=("$stow"/*.gguf)
    [ ${#files[@]} -gt 0 ] || { echo "stow_models: nothing stowed in $stow" >&2; exit 1; }
    mv "${files[@]}" "$root/models/"
    git -C "$root" diff --quiet -- 'models/*.gguf' || { echo "stow_models: a model differs from git after putting back" >&2; exit 1; }
    echo "stow_models: ${#files[@]} files back in models/" >&2
    ;;
  status)
    ls "$root"/models/*.gguf "$stow"/*.gguf 2>/dev/null || true
    ;;
  *) echo "stow_models: usage: dev/stow_models.sh out [--keep NAME.gguf]|in|status" >&2; exit 1 ;;
esac
