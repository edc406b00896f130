#!/usr/bin/env bash
# Hadamard-rotated Q4_0 through the engine: `1bit rotate` of the shipped 1bit-tiny (Q8_0) and
# `1bit rotate --plain` of the same source, the perplexity of each on a fixed text (a license the
# repository ships) and the KL divergence of their token distributions from the source's, in one
# run. The engine rotates the activations that meet a rotated weight (patches/llama.cpp/0006);
# without that the rotated file's products are noise (its perplexity that of guessing among the
# vocabulary). The bounds: the rotated file no worse than the plain one by more than 2% in
# perplexity and 25% in KLD; both within 10% of the source's perplexity.
#
#   engine_rotate_test.sh ONEBIT ENGINE_PREFIX MODEL TEXT
set -euo pipefail
onebit=${1:?1bit binary} prefix=${2:?engine prefix} model=${3:?model} text=${4:?text}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$onebit" rotate "$model" "$work/rot.gguf" --threads 2 >/dev/null 2>"$work/rotate.err" || { cat "$work/rotate.err" >&2; fail "1bit rotate failed"; }
"$onebit" rotate --plain "$model" "$work/plain.gguf" --threads 2 >/dev/null 2>>"$work/rotate.err" || { cat "$work/rotate.err" >&2; fail "1bit rotate --plain failed"; }
"$onebit" facts --json "$work/rot.gguf" | grep -q '"hadamard_q4_0": true' || fail "the rotated file is not stamped"

ppl() {  # ppl NAME FILE [ARGS...]: the engine's final perplexity (and the KLD with --kl-divergence)
  local name=$1 file=$2 rc=0
  shift 2
  "$prefix/bin/llama-perplexity" -m "$file" -f "$text" -c 256 --chunks 8 -t 2 "$@" >"$work/$name.log" 2>&1 || rc=$?
  [ $rc = 0 ] || { tail -n 3 "$work/$name.log" >&2; fail "llama-perplexity on $name exited with $rc"; }
}
ppl source "$model" --kl-divergence-base "$work/base.kld"
ppl plain "$work/plain.gguf" --kl-divergence-base "$work/base.kld" --kl-divergence
ppl rotated "$work/rot.gguf" --kl-divergence-base "$work/base.kld" --kl-divergence
final() { sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p' "$work/$1.log"; }
# The KLD run prints "Mean    KLD:   0.012345 ±   0.000123".
kld() { sed -n 's/^Mean *KLD: *\([0-9.]*\).*/\1/p' "$work/$1.log"; }
src=$(final source)
plain_ppl=$(sed -n 's/^Mean PPL(Q) *: *\([0-9.]*\).*/\1/p' "$work/plain.log")
rot_ppl=$(sed -n 's/^Mean PPL(Q) *: *\([0-9.]*\).*/\1/p' "$work/rotated.log")
plain_kld=$(kld plain) rot_kld=$(kld rotated)
[ -n "$src" ] && [ -n "$plain_ppl" ] && [ -n "$rot_ppl" ] && [ -n "$plain_kld" ] && [ -n "$rot_kld" ] ||
  fail "no perplexity or KLD in the engine's output"
echo "perplexity: source ${src}, plain Q4_0 ${plain_ppl}, rotated Q4_0 ${rot_ppl}; KLD from the source: plain ${plain_kld}, rotated ${rot_kld}"
awk -v r="$rot_ppl" -v p="$plain_ppl" 'BEGIN { exit !(r <= 1.02 * p) }' || fail "rotated perplexity $rot_ppl against plain $plain_ppl"
awk -v r="$rot_kld" -v p="$plain_kld" 'BEGIN { exit !(r <= 1.25 * p) }' || fail "rotated KLD $rot_kld against plain $plain_kld"
for q in "$plain_ppl" "$rot_ppl"; do
  awk -v q="$q" -v s="$src" 'BEGIN { exit !(q <= 1.10 * s) }' || fail "perplexity $q against the source's $src"
done
