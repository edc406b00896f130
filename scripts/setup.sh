#!/usr/bin/env bash
# Installs the Debian packages that building (and with --with-tests, testing; with --with-vulkan,
# building the engine with Vulkan) 1bit needs, and only those that are missing. When everything is present it prints nothing and exits at once.
# Each entry is "package" or "package:probe"; a probe starting with / is a file, else a command,
# so tools that came from elsewhere (a node from another source, say) count as present.
set -euo pipefail

build=(build-essential:c++ cmake:cmake git:git ccache:ccache pkg-config:pkg-config
       nlohmann-json3-dev:/usr/include/nlohmann/json.hpp nodejs:node npm:npm)
tests=(clang:clang++ libclang-rt-14-dev:/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a
       googletest:/usr/src/googletest libgtest-dev:/usr/include/gtest/gtest.h
       libcpp-httplib-dev:/usr/include/httplib.h chromium:/usr/bin/chromium)
# The loader and headers, the shader compiler, and Mesa's drivers (lavapipe: a Vulkan device on
# the CPU, which the vulkan tests run on where no GPU is).
vulkan=(libvulkan-dev:/usr/include/vulkan/vulkan.h glslc:glslc spirv-headers:/usr/include/spirv
        mesa-vulkan-drivers:/usr/share/vulkan/icd.d/lvp_icd.x86_64.json)

want=("${build[@]}")
for a in "$@"; do
  case $a in
    --with-tests) want+=("${tests[@]}") ;;
    --with-vulkan) want+=("${vulkan[@]}") ;;
    *) echo "setup: unknown option $a" >&2; exit 2 ;;
  esac
done

present() {
  local pkg=${1%%:*} probe=${1#*:}
  if [ "$probe" != "$1" ]; then
    case $probe in /*) [ -e "$probe" ] ;; *) command -v "$probe" >/dev/null 2>&1 ;; esac
  else
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'
  fi
}

missing=()
for e in "${want[@]}"; do present "$e" || missing+=("${e%%:*}"); done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: no apt-get here; missing: ${missing[*]}; going on with what is here" >&2
  exit 0
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# A machine whose package registry is out of reach (the GPU box) goes on with what it has: the
# build then names anything that is really missing.
if ! { "${sudo[@]}" apt-get update -q && "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; } >/dev/null 2>&1; then
  echo "setup: could not install ${missing[*]}; going on with what is here" >&2
fi
