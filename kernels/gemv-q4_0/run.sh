#!/usr/bin/env bash
# One campaign step for gemv-q4_0 (see program.md): kernels/gemv-q4_0/run.sh BUILD_DIR
exec "$(dirname "$0")/../common/campaign.sh" "$(dirname "$0")" gemv_q4_0_driver "${1:?usage: run.sh BUILD_DIR}"
