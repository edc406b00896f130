#!/usr/bin/env bash
# Builds a kernel package's driver without the engine (KERNELS_NO_ENGINE: our kernels' checks and
# times only) with nvcc alone, for quick campaign steps: build it wherever nvcc is, run it on a
# machine with the GPU, and leave the engine build (minutes) for the comparison runs. The driver links the
# CUDA runtime and the C++ library statically, so it runs on another machine's image.
#
#   kernels/common/standalone_driver.sh PACKAGE_DIR OUT_BINARY
set -euo pipefail
package=$(cd "${1:?usage: standalone_driver.sh PACKAGE_DIR OUT_BINARY}" && pwd)
out=${2:?usage: standalone_driver.sh PACKAGE_DIR OUT_BINARY}
common=$(cd "$(dirname "$0")" && pwd)
source "$common/package_field.sh"
# The package's sources, as its CMakeLists.txt lists them.
sources() { package_field "$package" "$1" | tr ' ' '\n' | sed "s|^|$package/|"; }
mapfile -t files < <(sources HOST_SOURCES; sources CUDA_SOURCES)
nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -use_fast_math -DKERNELS_NO_ENGINE -I"$common" -I"$package" \
  -Xcompiler -pthread,-static-libstdc++,-static-libgcc \
  "${files[@]}" "$common/accuracy.cc" -o "$out"
