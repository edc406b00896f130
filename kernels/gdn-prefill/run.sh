#!/usr/bin/env bash
# One campaign step for gdn-prefill (see program.md): kernels/gdn-prefill/run.sh BUILD_DIR
exec "$(dirname "$0")/../common/campaign.sh" "$(dirname "$0")" gdn_prefill_driver "${1:?usage: run.sh BUILD_DIR}"
