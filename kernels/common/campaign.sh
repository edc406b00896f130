#!/usr/bin/env bash
# One campaign step of a kernel package on a machine with its GPU: build its driver, check every
# case, time them, and keep the best median per case (results.tsv) with the hash of the kernel
# sources; every run's log goes to the package's runs/.
#
#   kernels/common/campaign.sh PACKAGE_DIR DRIVER_TARGET BUILD_DIR   (a build made with make build CUDA=1)
set -euo pipefail
package=$(cd "${1:?usage: campaign.sh PACKAGE_DIR DRIVER_TARGET BUILD_DIR}" && pwd)
target=${2:?usage: campaign.sh PACKAGE_DIR DRIVER_TARGET BUILD_DIR}
build=${3:?usage: campaign.sh PACKAGE_DIR DRIVER_TARGET BUILD_DIR}
cmake --build "$build" --target "$target" -j "$(nproc)" >/dev/null
mkdir -p "$package/runs"
version=$(cat "$package"/*.cu "$package"/*.cuh "$package"/*.h "$package"/variants/* "$package"/../common/device.cuh \
  2>/dev/null | sha256sum | cut -c1-12)
log=$package/runs/$(date -u +%Y%m%dT%H%M%SZ)-$version.log
"$build/bin/$target" --bench-mode | tee "$log"
grep -q '^allclose: true' "$log" || { echo "campaign.sh: accuracy bar not met; nothing kept" >&2; exit 1; }
touch "$package/results.tsv"
# Keep, per case, the fastest median seen and the kernel that made it.
awk -v v="$version" '
  FILENAME == ARGV[1] { best[$1] = $2; who[$1] = $3; next }
  /^case_ms:/ { if (!($2 in best) || $3 < best[$2]) { best[$2] = $3; who[$2] = v } }
  END { for (c in best) print c "\t" best[c] "\t" who[c] }
' "$package/results.tsv" "$log" | sort > "$package/results.tsv.new"
mv "$package/results.tsv.new" "$package/results.tsv"
echo "campaign.sh: kept the best per case in results.tsv (kernel $version)"
