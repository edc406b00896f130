#!/usr/bin/env bash
# Fills .carry/ (ignored by git) with what a GPU machine without a package registry needs to build
# and measure 1bit with CUDA: the engine's verified, patched source (scripts/engine.sh
# --export-source), nlohmann/json's headers and CMake files, and the vocabularies `1bit synth`
# needs for llama3-8b and qwen35-9b (the models dev/gpu_measure.sh measures) and tiny-llama. Prints the build
# command for that machine. Run it on a machine with a registry; copy .carry/ along with the
# checkout.
#
#   dev/gpu_carry.sh        (after make build here, so the engine source is cached)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
carry=$root/.carry
# Only this script's own files are replaced: models/train/prepare_data.sh puts the training data
# here too.
rm -rf "$carry/engine-src.tar.xz" "$carry/nlohmann" "$carry/vocab.tar.xz"
mkdir -p "$carry/nlohmann/include" "$carry/nlohmann/share/cmake"

"$root/scripts/engine.sh" --export-source "$carry/engine-src.tar.xz"

json_header=$(echo '#include <nlohmann/json.hpp>' | c++ -x c++ -E -M - 2>/dev/null | tr ' \\' '\n\n' | awk '/nlohmann\/json\.hpp$/ && !found { print; found = 1 }')
[ -n "$json_header" ] || { echo "gpu_carry: nlohmann/json is not installed here (scripts/setup.sh installs it)" >&2; exit 1; }
cp -r "$(dirname "$json_header")" "$carry/nlohmann/include/"
for d in /usr/share/cmake/nlohmann_json /usr/lib/cmake/nlohmann_json /usr/lib/x86_64-linux-gnu/cmake/nlohmann_json; do
  [ -d "$d" ] && { cp -r "$d" "$carry/nlohmann/share/cmake/"; break; }
done
[ -d "$carry/nlohmann/share/cmake/nlohmann_json" ] || { echo "gpu_carry: nlohmann_json's CMake files not found" >&2; exit 1; }

# Compressed: what is copied to the GPU machine must stay under 64 MiB.
vocab_dir=$("$root/scripts/engine.sh")/src/models
tar -C "$vocab_dir" -cJf "$carry/vocab.tar.xz" ggml-vocab-llama-bpe.gguf ggml-vocab-qwen35.gguf ggml-vocab-llama-spm.gguf

echo "gpu_carry: $(du -sh "$carry" | cut -f1) in .carry; on the GPU machine (copy .carry, or the parts"
echo "  a command needs: what is copied must stay under 64 MiB):"
echo "  CMAKE_PREFIX_PATH=\$PWD/.carry/nlohmann ONEBIT_LLAMA_SOURCE=\$PWD/.carry/engine-src.tar.xz \\"
echo "    ONEBIT_CACHE_DIR=/tmp/c JOBS=\$(nproc) make build CUDA=1"
echo "  mkdir /tmp/vocab && tar -C /tmp/vocab -xJf .carry/vocab.tar.xz"
echo "  build/bin/1bit synth --like qwen35-9b --vocab-dir /tmp/vocab -o /tmp/q35.gguf ..."
