#!/usr/bin/env bash
# Writes the engine patch that carries a kernel package into llama.cpp's CUDA backend: the
# package's kernel sources under ggml/src/ggml-cuda/onebit-<package>/, one .cu beside them that
# compiles the .cu files among them, and the package's hand-written dispatch (engine_dispatch.diff, against the pinned
# source with the earlier patches of the queue applied). Run it after changing a kernel;
# make test checks that the patch in the queue carries the kernel files as they are in the package.
#
#   kernels/common/engine_patch.sh PACKAGE_DIR PATCH_NAME FILE...
#   e.g. kernels/common/engine_patch.sh kernels/gdn-prefill 0002-cuda-gdn-prefill-chunked.patch \
#            ../common/device.cuh kernel.cuh kernel_config.h kernel.cu
set -euo pipefail
usage="usage: engine_patch.sh PACKAGE_DIR PATCH_NAME FILE..."
package=$(cd "${1:?$usage}" && pwd)
name=${2:?$usage}
shift 2
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
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
