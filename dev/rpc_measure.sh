#!/usr/bin/env bash
# What RPC workers cost: two `1bit rpc-worker --device cpu` on loopback, then one `1bit bench` run
# of the configurations given, where @W1 and @W2 stand for the workers' addresses. Logs, the
# bench table and its JSON go to OUT.
#
#   dev/rpc_measure.sh OUT MODEL NAME=ARGS...     (BIN: the build's bin/, default build/bin)
#   e.g. dev/rpc_measure.sh out m.gguf "local=--device cpu" "two-workers=--device cpu --rpc @W1,@W2"
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,7{s/^# \{0,1\}//;p}' "$0" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${BIN:-$root/build/bin} out=$1 model=$2
shift 2
mkdir -p "$out"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true' EXIT
workers=()
for i in 1 2; do
  "$bin/1bit" rpc-worker --device cpu --port 0 >"$out/worker$i.out" 2>"$out/worker$i.err" &
  pids+=($!)
  for _ in $(seq 600); do grep -q 'listening on ' "$out/worker$i.err" && break; sleep 0.1; done
  w=$(grep -o 'listening on [^ ]*' "$out/worker$i.err" | head -n1 | cut -d' ' -f3)
  [ -n "$w" ] || { cat "$out/worker$i.err" >&2; exit 1; }
  workers+=("$w")
done
grep -h 'offering' "$out"/worker*.err
configs=()
for c in "$@"; do
  c=${c//@W1/${workers[0]}}
  configs+=(--config "${c//@W2/${workers[1]}}")
done
"$bin/1bit" bench -m "$model" "${configs[@]}" --rounds "${ROUNDS:-2}" --prompt-reps 2 --decode-reps 1 --decode-tokens 128 \
  --log-dir "$out/logs" --json "$out/rpc.json" >"$out/rpc.txt" 2>"$out/rpc.err" || { tail -n 5 "$out/rpc.err"; exit 1; }
cat "$out/rpc.txt"
