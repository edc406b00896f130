#!/usr/bin/env bash
# Fetches, verifies, patches and builds the pinned engine (llama.cpp) into a cache outside the
# build tree, and prints the prefix of the finished build on stdout.
#
#   scripts/engine.sh [--cuda] [--vulkan] [--key | --prepare DIR | --export-source OUT.tar.xz]
#
#   --cuda           build with CUDA for sm_90 and the local GPU's architecture
#   --vulkan         build with Vulkan (Debian's loader, headers and glslc: scripts/setup.sh
#                    --with-vulkan installs them)
#   --key            print the cache key and exit (nothing is fetched or built)
#   --prepare DIR    only check out the verified source into DIR and apply the patch queue
#   --export-source  write the verified, patched source a build needs (no models, docs, tests or
#                    web UI assets: a few MB) as a tarball, for a machine with no registry
#
# The cache entry is keyed by the engine commit, the patch queue (names and contents), the build
# options, the web UI, the compilers, this script and, for native CPU code, the CPU's feature
# flags: any change rebuilds, and ccache keeps a rebuild short. A finished entry is reused in well under a second.
#
# Environment:
#   ONEBIT_LLAMA_SOURCE  a local engine: a git bundle, a git checkout holding the pinned commit,
#                        an unpacked node-llama-cpp package, or a tarball from --export-source;
#                        otherwise npm fetches the package
#   ONEBIT_CACHE_DIR     cache root (default ${XDG_CACHE_HOME:-~/.cache}/1bit)
#   ONEBIT_PATCH_DIR     the patch queue (default patches/llama.cpp beside this script)
#   ONEBIT_ENGINE_UI     0: build the engine without its web UI (default: with it, when npm exists)
#   JOBS                 parallel build jobs (default: all cores)
set -euo pipefail

readonly COMMIT=80fb11ac73e66d89eae2c6a91d8a77428fa733ed
readonly NPM_PACKAGE=node-llama-cpp@3.21.1
readonly TARGETS=(llama-server ggml-rpc-server llama-bench llama-perplexity ggml-base)

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${ONEBIT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/1bit}
patch_dir=${ONEBIT_PATCH_DIR:-$here/../patches/llama.cpp}

die() { echo "engine: $*" >&2; exit 1; }
log() { echo "engine: $*" >&2; }

cuda=0 vulkan=0 mode=build prepare_dir=
while [ $# -gt 0 ]; do
  case $1 in
    --cuda) cuda=1 ;;
    --vulkan) vulkan=1 ;;
    --key) mode=key ;;
    --prepare) mode=prepare; prepare_dir=${2:?--prepare needs a directory}; shift ;;
    --export-source) mode=export; prepare_dir=${2:?--export-source needs a file name}; shift ;;
    *) die "unknown option '$1'" ;;
  esac
  shift
done

# One GPU backend a build: with both, the engine would list one GPU twice (CUDA0 and Vulkan0) and
# spread a model over both.
[ $cuda = 1 ] && [ $vulkan = 1 ] && die "--cuda and --vulkan together: build the engine with one of them"

patches() { [ -d "$patch_dir" ] && find "$patch_dir" -maxdepth 1 -name '*.patch' -type f | LC_ALL=C sort; true; }

# The web UI is built from the engine's own sources with npm where npm is at hand (never
# downloaded prebuilt), once per UI source, and handed to the engine build as tools/ui/dist.
# Without npm (the GPU box has none) the engine has no UI.
want_ui() {
  [ "${ONEBIT_ENGINE_UI:-1}" != 0 ] && command -v npm >/dev/null 2>&1
}

# The UI's build tools need Node.js 20 or later; Debian 12's own nodejs is 18. Prints a directory
# with a `node` that is new enough, to go first on PATH: the system's, or else Node's official
# Linux binary from npm's registry (the node-linux-<arch> package, pinned), kept in the cache.
UI_NODE_VERSION=20.20.2
ui_node_dir() {
  if node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' 2>/dev/null; then
    dirname "$(command -v node)"
    return 0
  fi
  local arch dir tmp
  case $(uname -m) in x86_64) arch=x64 ;; aarch64) arch=arm64 ;; *) return 1 ;; esac
  dir=$cache/node/$UI_NODE_VERSION-$arch
  if [ ! -x "$dir/bin/node" ]; then
    log "fetching Node.js $UI_NODE_VERSION for the web UI's build (npm package node-linux-$arch)"
    mkdir -p "$cache/node"
    tmp=$(mktemp -d "$cache/node/fetch.XXXXXX")
    if ! (cd "$tmp" && npm pack "node-linux-$arch@$UI_NODE_VERSION" --silent && tar -xzf node-linux-*.tgz) >/dev/null 2>&1; then
      rm -rf "$tmp"
      return 1
    fi
    rm -rf "$dir"
    mv "$tmp/package" "$dir"
    rm -rf "$tmp"
  fi
  "$dir/bin/node" --version >/dev/null 2>&1 && echo "$dir/bin"
}

cmake_options() {
  local o=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_RPC=ON -DGGML_NATIVE=ON
           -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
           -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF)
  if [ $cuda = 1 ]; then
    local archs=90 cap
    if cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1); then
      cap=${cap//./}
      [ -n "$cap" ] && [ "$cap" != 90 ] && archs="90;$cap"
    fi
    o+=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$archs")
  fi
  [ $vulkan = 1 ] && o+=(-DGGML_VULKAN=ON)
  printf '%s\n' "${o[@]}"
}

cache_key() {
  {
    echo "commit $COMMIT"
    cmake_options
    want_ui && echo "web ui"
    echo "machine $(uname -m) $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | sha256sum | cut -c1-16)"
    echo "compilers $({ cc --version; c++ --version; [ $cuda = 1 ] && nvcc --version; [ $vulkan = 1 ] && glslc --version; } 2>/dev/null | sha256sum | cut -c1-16)"
    echo "script $(sha256sum "${BASH_SOURCE[0]}" | cut -c1-64)"
    local p
    while IFS= read -r p; do [ -n "$p" ] && echo "patch $(basename "$p") $(sha256sum < "$p" | cut -c1-64)"; done < <(patches)
  } | sha256sum | cut -c1-16
}

# Prints the path of a git bundle or repository that holds the pinned commit.
engine_origin() {
  local s=${ONEBIT_LLAMA_SOURCE:-}
  if [ -n "$s" ]; then
    [ -e "$s" ] || die "ONEBIT_LLAMA_SOURCE: $s does not exist"
    if [ -f "$s" ]; then echo "$s"; return; fi
    local b
    for b in "$s/gitRelease.bundle" "$s/llama/gitRelease.bundle" "$s/package/llama/gitRelease.bundle"; do
      [ -f "$b" ] && { echo "$b"; return; }
    done
    git -C "$s" rev-parse --git-dir >/dev/null 2>&1 && { echo "$s"; return; }
    die "ONEBIT_LLAMA_SOURCE: $s is neither a git bundle, a git checkout nor a node-llama-cpp package"
  fi
  local dl=$cache/downloads bundle=$cache/downloads/llama-$COMMIT.bundle
  if [ ! -f "$bundle" ]; then
    command -v npm >/dev/null 2>&1 || die "npm is needed to fetch $NPM_PACKAGE (or set ONEBIT_LLAMA_SOURCE)"
    mkdir -p "$dl"
    local tmp; tmp=$(mktemp -d "$dl/npm.XXXXXX")
    log "fetching $NPM_PACKAGE with npm"
    (cd "$tmp" && npm pack --silent "$NPM_PACKAGE" >/dev/null) || { rm -rf "$tmp"; die "npm pack $NPM_PACKAGE failed"; }
    tar -xzf "$tmp"/node-llama-cpp-*.tgz -C "$tmp" package/llama/gitRelease.bundle \
      || { rm -rf "$tmp"; die "$NPM_PACKAGE has no package/llama/gitRelease.bundle"; }
    mv "$tmp/package/llama/gitRelease.bundle" "$bundle"
    rm -rf "$tmp"
  fi
  echo "$bundle"
}

# The patch queue as the export manifest records it: one "name sha256" line each.
queue_manifest() {
  local p
  while IFS= read -r p; do [ -n "$p" ] && echo "$(basename "$p") $(sha256sum < "$p" | cut -c1-64)"; done < <(patches)
  true
}

# Unpacks an --export-source tarball into $2, checking that it holds the pinned commit with this
# very patch queue (both were verified when it was made).
unpack_export() {
  local tarball=$1 dst=$2
  rm -rf "$dst" && mkdir -p "$dst"
  tar -xJf "$tarball" -C "$dst" || die "cannot unpack $tarball"
  [ "$(cat "$dst/.onebit-commit" 2>/dev/null)" = "$COMMIT" ] || die "$tarball is not an export of llama.cpp $COMMIT"
  [ "$(cat "$dst/.onebit-patches" 2>/dev/null)" = "$(queue_manifest)" ] \
    || die "$tarball was exported with another patch queue; export it again (scripts/engine.sh --export-source)"
  log "unpacked the exported source of ${COMMIT:0:12} from $tarball"
}

# Checks out the pinned commit from the origin into $1 and applies the patch queue in order.
prepare_source() {
  local dst=$1 origin
  case ${ONEBIT_LLAMA_SOURCE:-} in
    *.tar.xz) unpack_export "$ONEBIT_LLAMA_SOURCE" "$dst"; return ;;
  esac
  origin=$(engine_origin)
  rm -rf "$dst"
  git clone -q --no-checkout "$origin" "$dst" 2>/dev/null || die "cannot clone the engine from $origin"
  git -C "$dst" cat-file -e "$COMMIT^{commit}" 2>/dev/null \
    || die "$origin does not hold the pinned commit $COMMIT (it has $(git -C "$dst" rev-parse HEAD 2>/dev/null || echo nothing))"
  git -C "$dst" -c advice.detachedHead=false checkout -q "$COMMIT"
  [ "$(git -C "$dst" rev-parse HEAD)" = "$COMMIT" ] || die "checkout of $COMMIT failed"
  local p err
  while IFS= read -r p; do
    [ -n "$p" ] || continue
    if ! err=$(git -C "$dst" apply --whitespace=nowarn "$p" 2>&1); then
      die "patch $(basename "$p") does not apply to llama.cpp $COMMIT: ${err%%$'\n'*}"
    fi
    log "applied $(basename "$p")"
  done < <(patches)
}

# Puts the built web UI into $1/tools/ui/dist, building it when this UI source is new.
provide_ui() {
  local src=$1 hash dist tmp
  hash=$(cd "$src/tools/ui" && find . -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
  dist=$cache/ui/$hash
  if [ ! -f "$dist/index.html" ]; then
    local node_dir
    if ! node_dir=$(ui_node_dir); then
      log "no Node.js 20 or later for the web UI's build; the engine is built without it"
      return 0
    fi
    log "building the web UI with npm (node $("$node_dir/node" --version))"
    mkdir -p "$cache/ui"
    tmp=$(mktemp -d "$cache/ui/build.XXXXXX")
    cp -r "$src/tools/ui/." "$tmp/"
    if ! (cd "$tmp" && export PATH="$node_dir:$PATH" && npm ci --no-audit --no-fund && npm run build) \
        >"$cache/ui/build.log" 2>&1; then
      rm -rf "$tmp"
      log "the web UI did not build (log: $cache/ui/build.log); the engine is built without it"
      return 0
    fi
    rm -rf "$dist"
    mv "$tmp/dist" "$dist"
    rm -rf "$tmp"
  fi
  cp -r "$dist" "$src/tools/ui/dist"
}

case $mode in
  key) cache_key; exit 0 ;;
  prepare) prepare_source "$prepare_dir"; exit 0 ;;
  export)
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    prepare_source "$tmp/src"
    echo "$COMMIT" >"$tmp/src/.onebit-commit"
    queue_manifest >"$tmp/src/.onebit-patches"
    out=$(cd "$(dirname "$prepare_dir")" && pwd)/$(basename "$prepare_dir")
    # What a build of llama-server, llama-bench, rpc-server and perplexity reads, plus the
    # engine's test-backend-ops (which the CUDA build of 1bit compiles to check patched kernels);
    # UI sources and assets stay behind (such a build has no web UI).
    find "$tmp/src/tests" -type f ! -name test-backend-ops.cpp -delete
    tar -cJf "$out" -C "$tmp/src" --exclude=.git --exclude=./models --exclude=./docs \
        --exclude=./examples --exclude=./pocs --exclude=./gguf-py --exclude=./media --exclude=./benches \
        --exclude=./ci --exclude=./conversion --exclude=./skills --exclude=./requirements \
        --exclude=./tools/ui/src --exclude=./tools/ui/static --exclude=./tools/ui/tests --exclude=./tools/ui/dist .
    log "exported llama.cpp ${COMMIT:0:12} with the patch queue to $out ($(du -h "$out" | cut -f1))"
    exit 0 ;;
esac

key=$(cache_key)
root=$cache/engine/$key
prefix=$root/prefix
# .complete's time says when an entry was last used.
if [ -f "$prefix/.complete" ]; then touch "$prefix/.complete"; echo "$prefix"; exit 0; fi

mkdir -p "$root"
exec 9>"$root/.lock"
flock 9
if [ -f "$prefix/.complete" ]; then echo "$prefix"; exit 0; fi

log "building llama.cpp ${COMMIT:0:12} (key $key) in $root"
prepare_source "$root/src"
want_ui && provide_ui "$root/src"

mapfile -t opts < <(cmake_options)
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  [ $cuda = 1 ] && launcher+=(-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  # Relative paths let entries of other keys (another patch set) share ccache hits.
  export CCACHE_BASEDIR=$cache/engine
fi
cmake -S "$root/src" -B "$root/build" "${opts[@]}" "${launcher[@]}" >"$root/configure.log" 2>&1 \
  || { tail -n 20 "$root/configure.log" >&2; die "cmake configure failed (log: $root/configure.log)"; }
cmake --build "$root/build" -j "${JOBS:-$(nproc)}" --target "${TARGETS[@]}" >"$root/build.log" 2>&1 \
  || { grep -m 20 -E 'error|Error' "$root/build.log" >&2; die "engine build failed (log: $root/build.log)"; }

rm -rf "$prefix"
mkdir -p "$prefix/bin" "$prefix/lib" "$prefix/include" "$prefix/share"
cp "$root/build/bin/llama-server" "$root/build/bin/ggml-rpc-server" "$root/build/bin/llama-bench" \
   "$root/build/bin/llama-perplexity" "$prefix/bin/"
find "$root/build/ggml" -name 'libggml*.a' -exec cp {} "$prefix/lib/" \;  # 1bit and the kernel drivers link these
cp "$root/src/ggml/include/"*.h "$prefix/include/"
"$prefix/bin/llama-server" --help >"$prefix/share/llama-server-help.txt" 2>/dev/null \
  || die "llama-server --help failed"
ln -sfn "$root/src" "$prefix/src"
{
  echo "{"
  echo "  \"commit\": \"$COMMIT\","
  echo "  \"key\": \"$key\","
  echo "  \"cuda\": $([ $cuda = 1 ] && echo true || echo false),"
  echo "  \"vulkan\": $([ $vulkan = 1 ] && echo true || echo false),"
  echo "  \"web_ui_wanted\": $(want_ui && echo true || echo false),"
  echo "  \"web_ui\": $([ -f "$root/src/tools/ui/dist/index.html" ] && echo true || echo false),"
  echo "  \"patches\": [$(patches | while IFS= read -r p; do [ -n "$p" ] && printf '"%s",' "$(basename "$p")"; done | sed 's/,$//')]"
  echo "}"
} >"$prefix/engine.json"
touch "$prefix/.complete"
log "engine ready in $prefix"
# Builds nobody used for 30 days go (a checkout still pointing at one rebuilds it on its next make).
find "$cache"/engine -mindepth 3 -maxdepth 3 -path '*/prefix/.complete' -mtime +30 2>/dev/null | while IFS= read -r old; do
  old=${old%/prefix/.complete}
  log "removing $old, unused for 30 days"
  rm -rf "$old"
done
echo "$prefix"
