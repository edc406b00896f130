#!/usr/bin/env bash
# Checks that an engine patch carries a kernel package's files exactly as they are in the package,
# so the kernel the engine dispatches is the one the package checks. On a mismatch, regenerate
# the patch with engine_patch.sh.
#
#   kernels/common/check_engine_patch.sh PACKAGE_DIR PATCH_FILE FILE...
set -euo pipefail
usage="usage: check_engine_patch.sh PACKAGE_DIR PATCH_FILE FILE..."
package=$(cd "${1:?$usage}" && pwd)
patch=${2:?$usage}
shift 2
dir=onebit-$(basename "$package")
status=0
for f in "$@"; do
  path=ggml/src/ggml-cuda/$dir/$(basename "$f")
  # A new file's hunk: every line after "+++ b/PATH" and its "@@" header starts with "+".
  if ! awk -v want="+++ b/$path" '
      $0 == want { on = 1; next }
      on && /^diff --git / { exit }
      on && /^@@/ { next }
      on && /^\+/ { print substr($0, 2) }
    ' "$patch" | cmp -s - "$package/$f"; then
    echo "check_engine_patch: $(basename "$patch") carries another $path than $package/$f;" \
         "run kernels/common/engine_patch.sh $package" >&2
    status=1
  fi
done
[ $status = 0 ] && echo "check_engine_patch: $(basename "$patch") carries $# files of $(basename "$package") as they are"
exit $status
