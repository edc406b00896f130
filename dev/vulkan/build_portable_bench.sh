#!/usr/bin/env bash
# A Vulkan llama-bench to carry to a machine that cannot build one (no glslc there): the pinned,
# patched engine with GGML_NATIVE=OFF (that machine's CPU is unknown), libstdc++ and libgcc
# static, and arc4random.c linked in so that it needs glibc 2.35 at most. Packs
# .carry/vulkan/llama-bench-vulkan.tar.xz (bin/llama-bench, lib/libgomp.so.1, BUILD.txt), which
# `dev/gpu_measure.sh vulkan` runs beside the CUDA build, and fetches Debian's Vulkan loader and
# libglvnd into .gl/ for a machine without them.
#
#   dev/vulkan/build_portable_bench.sh          Debian 12's glslc and Vulkan headers (setup.sh
#                                               --with-vulkan): no cooperative-matrix or
#                                               integer-dot shaders
#   dev/vulkan/build_portable_bench.sh --full   Debian 13's glslc and headers, downloaded with
#                                               apt-get download and unpacked under WORK (nothing
#                                               is installed): those shaders too, as
#                                               llama-bench-vulkan-full.tar.xz
#
# WORK: scratch space (default $TMPDIR/onebit-vk-build). JOBS: build jobs (default: all cores).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${WORK:-${TMPDIR:-/tmp}/onebit-vk-build} full=0
[ "${1:-}" = --full ] && full=1
src=$work/src name=llama-bench-vulkan
mkdir -p "$work" "$root/.carry/vulkan" "$root/.gl"
[ -d "$src" ] || "$root/scripts/engine.sh" --prepare "$src"
cc -O2 -c "$root/dev/vulkan/arc4random.c" -o "$work/arc4random.o"
extra=()
if [ $full = 1 ]; then
  name=llama-bench-vulkan-full build=$work/build-full trixie=$work/trixie
  if [ ! -x "$trixie/glslc" ]; then
    mkdir -p "$trixie/lists/partial" "$trixie/cache/archives/partial" "$trixie/root"
    echo "deb http://deb.debian.org/debian trixie main" >"$trixie/sources.list"
    o=(-o Dir::Etc::SourceList="$trixie/sources.list" -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists="$trixie/lists"
       -o Dir::Cache="$trixie/cache" -o APT::Architecture=amd64)
    apt-get "${o[@]}" update >/dev/null
    (cd "$trixie" && apt-get "${o[@]}" download glslc libshaderc1 libc6 libstdc++6 libgcc-s1 libvulkan-dev >/dev/null)
    for f in "$trixie"/*.deb; do dpkg -x "$f" "$trixie/root"; done
    # Debian 13's glslc runs through its own loader and libc.
    lib=$(dirname "$(find "$trixie/root/usr/lib" -name 'ld-linux-*.so.2' | head -n1)")
    printf '#!/bin/sh\nexec %s --library-path %s %s "$@"\n' "$(find "$lib" -maxdepth 1 -name 'ld-linux-*.so.2' | head -n1)" \
      "$lib" "$trixie/root/usr/bin/glslc" >"$trixie/glslc"
    chmod +x "$trixie/glslc"
  fi
  extra=(-DVulkan_INCLUDE_DIR="$trixie/root/usr/include" -DVulkan_GLSLC_EXECUTABLE="$trixie/glslc"
         -DVulkan_LIBRARY="$(ldconfig -p | awk '/libvulkan.so.1 .*x86-64/ {print $NF; exit}')")
else
  build=$work/build
fi
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_RPC=OFF -DGGML_NATIVE=OFF \
  -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DGGML_VULKAN=ON "-DCMAKE_EXE_LINKER_FLAGS=-static-libstdc++ -static-libgcc $work/arc4random.o" \
  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache "${extra[@]}" >"$work/configure-$name.log"
grep -E 'GL_(KHR|NV|EXT)_[a-z_0-9]*' "$work/configure-$name.log" || true
cmake --build "$build" --target llama-bench -j "${JOBS:-$(nproc)}" >"$work/build-$name.log"
pack=$work/pack-$name
rm -rf "$pack" && mkdir -p "$pack/bin" "$pack/lib"
strip -o "$pack/bin/llama-bench" "$build/bin/llama-bench"
cp "$(ldconfig -p | awk '/libgomp.so.1 .*x86-64/ {print $NF; exit}')" "$pack/lib/"
printf 'llama.cpp %s with 1bit patches: %s\nVulkan, GGML_NATIVE=OFF, %s\n' "$(git -C "$src" rev-parse --short HEAD)" \
  "$(ls "$root"/patches/llama.cpp/*.patch | xargs -n1 basename | tr '\n' ' ')" \
  "$([ $full = 1 ] && echo "Debian 13 glslc and headers" || echo "Debian 12 glslc and headers")" >"$pack/BUILD.txt"
tar -C "$pack" -cJf "$root/.carry/vulkan/$name.tar.xz" .
# The NVIDIA driver's Vulkan ICD (libGLX_nvidia) needs libglvnd's libraries beside the loader.
(cd "$root/.gl" && apt-get download libvulkan1 libglvnd0 libgl1 libglx0 libegl1 libopengl0 libgles2 >/dev/null)
echo "$(du -h "$root/.carry/vulkan/$name.tar.xz" | cut -f1) .carry/vulkan/$name.tar.xz; the loader in .gl/"
