#!/usr/bin/env bash
# CPU machine: installs the Debian packages the corpus comes from, builds models/train/data with
# prepare_data.py, and packs it as .carry/data.tar.xz with the engine's gguf-py beside it, ready
# to carry to the GPU machine (dev/train_gpu.sh reads both from .carry/).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
pkgs=(python3.11-doc wordnet-base bible-kjv bible-kjv-text)
missing=()
for p in "${pkgs[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=(); [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -q "${missing[@]}" >/dev/null
fi
rm -rf "$here/data"
python3 "$here/prepare_data.py" --out "$here/data"
mkdir -p "$root/.carry"
tar -cJf "$root/.carry/data.tar.xz" -C "$here/data" .
rm -rf "$root/.carry/gguf-py"
cp -r "$("$root/scripts/engine.sh")/src/gguf-py" "$root/.carry/gguf-py"
echo "prepare_data: $(du -h "$root/.carry/data.tar.xz" | cut -f1) in .carry/data.tar.xz" >&2
