#!/usr/bin/env bash
# One campaign step on the GPU machine: build the driver, check every case, time them, and keep
# the best times per case (results.tsv) with the kernel's hash; every run's log goes to runs/.
#
#   kernels/gemv-q4_0/run.sh BUILD_DIR      (a build made with make build CUDA=1)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: run.sh BUILD_DIR}
cmake --build "$build" --target gemv_q4_0_driver -j "$(nproc)" >/dev/null
mkdir -p "$here/runs"
version=$(sha256sum "$here/kernel.cu" | cut -c1-12)
log=$here/runs/$(date -u +%Y%m%dT%H%M%SZ)-$version.log
"$build/kernels/gemv-q4_0/gemv_q4_0_driver" --bench-mode | tee "$log"
grep -q '^allclose: true' "$log" || { echo "run.sh: accuracy bar not met; nothing kept" >&2; exit 1; }
touch "$here/results.tsv"
# Keep, per case, the fastest median seen and the kernel that made it.
awk -v v="$version" '
  FILENAME == ARGV[1] { best[$1] = $2; who[$1] = $3; next }
  /^case_ms:/ { if (!($2 in best) || $3 < best[$2]) { best[$2] = $3; who[$2] = v } }
  END { for (c in best) print c "\t" best[c] "\t" who[c] }
' "$here/results.tsv" "$log" | sort > "$here/results.tsv.new"
mv "$here/results.tsv.new" "$here/results.tsv"
echo "run.sh: kept the best per case in results.tsv (kernel $version)"
