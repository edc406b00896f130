#!/usr/bin/env bash
# The engine's repacked CPU weights (AMX on CPUs that have it, the AVX repacks elsewhere) compute
# what the plain CPU path computes: perplexity of the shipped model on a fixed text (a license
# the repository ships), with repacking on and off, must both finish and agree to 1%. On an AMX
# machine with the engine built by GCC 12 the repacked run crashed in ldtilecfg until
# patches/llama.cpp/0005.
#
#   engine_cpu_repack_test.sh ENGINE_PREFIX MODEL TEXT
set -euo pipefail
prefix=${1:?engine prefix} model=${2:?model} text=${3:?text}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

ppl() {  # ppl --repack|--no-repack: prints the final perplexity estimate
  local rc=0
  "$prefix/bin/llama-perplexity" -m "$model" -f "$text" -c 256 --chunks 4 -t 2 "$1" >"$work/log$1" 2>&1 || rc=$?
  [ $rc = 0 ] || { tail -n 3 "$work/log$1" >&2; fail "llama-perplexity $1 exited with $rc"; }
  sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' "$work/log$1"
}
on=$(ppl --repack)
off=$(ppl --no-repack)
[ -n "$on" ] && [ -n "$off" ] || fail "no perplexity in the engine's output"
amx=$(grep -o 'AMX_INT8 = 1' "$work/log--repack" || true)
echo "perplexity with repacking ${on}, without ${off} (${amx:-no AMX on this CPU})"
awk -v a="$on" -v b="$off" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01 * b) }' ||
  fail "repacked and plain CPU weights disagree: perplexity $on against $off"
