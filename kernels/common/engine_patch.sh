#!/usr/bin/env bash
# Writes the engine patch that carries a kernel package into llama.cpp's CUDA backend: the
# package's kernel sources under ggml/src/ggml-cuda/onebit-<package>/, one .cu beside them that
# compiles the .cu files among them, and the package's hand-written dispatch (engine_dispatch.diff,
# against the pinned source with the earlier patches of the queue applied). The patch's name and
# files are the package's PATCH and PATCH_FILES in its CMakeLists.txt, the list make test checks
# the patch against. Run it after changing a kernel.
#
#   kernels/common/engine_patch.sh PACKAGE_DIR        (e.g. kernels/gdn-prefill)
set -euo pipefail
package=$(cd "${1:?usage: engine_patch.sh PACKAGE_DIR}" && pwd)
source "$(dirname "$0")/package_field.sh"
name=$(package_field "$package" PATCH)
read -ra files <<<"$(package_field "$package" PATCH_FILES)"
if [ -z "$name" ] || [ ${#files[@]} -eq 0 ]; then
  echo "engine_patch.sh: $package/CMakeLists.txt names no PATCH and PATCH_FILES" >&2
  exit 2
fi
set -- "${files[@]}"
root=$(cd "$(dirname "$0")/../.." && pwd)
queue=$root/patches/llama.cpp
dir=onebit-$(basename "$package")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/queue"
for p in "$queue"/*.patch; do
  [ -e "$p" ] || continue
  [[ "$(basename "$p")" < "$name" ]] && cp "$p" "$tmp/queue/"
done
ONEBIT_PATCH_DIR=$tmp/queue "$root/scripts/engine.sh" --prepare "$tmp/src"
git -C "$tmp/src" add -A
git -C "$tmp/src" -c user.name=1bit -c user.email=1bit@localhost commit -qm "queue before $name" --allow-empty

cuda=$tmp/src/ggml/src/ggml-cuda
mkdir "$cuda/$dir"
for f in "$@"; do cp "$package/$f" "$cuda/$dir/$(basename "$f")"; done
{
  echo "// 1bit's $(basename "$package") kernel (kernels/$(basename "$package") in the 1bit tree), compiled into ggml-cuda."
  for f in "$@"; do
    case $f in *.cu) echo "#include \"$dir/$(basename "$f")\"" ;; esac
  done
} >"$cuda/$dir.cu"
git -C "$tmp/src" apply "$package/engine_dispatch.diff"
git -C "$tmp/src" add -A
git -C "$tmp/src" diff --cached >"$queue/$name"
echo "engine_patch.sh: wrote $queue/$name ($(wc -l <"$queue/$name") lines)"
