#!/usr/bin/env bash
# The server's tax on decode: the engine's llama-bench tg128 against llama-server started exactly
# as `1bit serve` starts it (its --dry-run command), greedy, with the server's default sampling and
# greedy streamed (as chat clients ask), in ROUNDS interleaved rounds so that a machine that drifts
# drifts for all. Each VARIANT (NAME:VAR=VALUE,...) is the server again with that environment, in
# the same rounds; without one the server runs as it is. A NAME ending in @serve runs `1bit serve`
# itself with that environment and asks it, so that its proxy is on the way. Prints the launch
# command (directories stripped), each round's lines and the medians with their ratios to
# llama-bench.
#
#   dev/server_tax.sh MODEL [ROUNDS] [VARIANT...]     (from the checkout, after make build)
#   dev/server_tax.sh models/1bit-tiny-32m-q8_0.gguf 5 lazy: eager:ONEBIT_YIELD_EAGER=1
#   dev/server_tax.sh models/1bit-tiny-32m-q8_0.gguf 8 engine: proxy@serve:
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$root/build/bin
model=${1:?usage: server_tax.sh MODEL [ROUNDS] [NAME:VAR=VALUE,...]...}
rounds=${2:-3}
shift $(( $# < 2 ? $# : 2 ))
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=("server:")
[ -f "$model" ] || { echo "server_tax: no model at $model" >&2; exit 1; }
for v in "${variants[@]}"; do
  case $v in *:*) ;; *) echo "server_tax: a variant is NAME:VAR=VALUE,... (got '$v')" >&2; exit 2 ;; esac
done

cmd=$("$bin/1bit" serve -m "$model" --dry-run 2>/dev/null | tail -n 1)
cmd_env=$(echo "$cmd" | grep -oE '^([A-Za-z_][A-Za-z0-9_]*=[^ ]* )+' || true)
cmd_rest=${cmd#"$cmd_env"}
port=$(echo "$cmd" | sed -n 's/.*--port \([0-9]*\).*/\1/p')
[ -n "$port" ] || { echo "server_tax: 1bit serve --dry-run gave no engine command" >&2; exit 1; }
serve_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# llama-bench gets the server's device and thread settings, so both decode the same way.
ngl=$(echo "$cmd" | sed -n 's/.* -ngl \([0-9]*\).*/\1/p')
threads=$(echo "$cmd" | sed -n 's/.* -t \([0-9]*\).*/\1/p')
fa=$(echo "$cmd" | sed -n 's/.* -fa \([a-z0-9]*\).*/\1/p')
bench_args=(-m "$model" -p 0 -n 128 -r 3 -o md -ngl "${ngl:-0}")
[ -n "$threads" ] && bench_args+=(-t "$threads")
case $fa in on | 1) bench_args+=(-fa 1) ;; off | 0) bench_args+=(-fa 0) ;; esac
echo "server: $cmd" | sed 's#/[^ ]*/##g'
echo "llama-bench: ${bench_args[*]}" | sed 's#/[^ ]*/##g'

log=$(mktemp /tmp/onebit-tax-XXXXXX.log)
pid=
cleanup() { [ -n "$pid" ] && kill -INT "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -f "$log"; }
trap cleanup EXIT

declare -A speeds  # "NAME greedy" / "NAME sampled" / "NAME streamed" -> the speeds that count
bench=()
for round in $(seq "$rounds"); do
  line=$("$bin/llama-bench" "${bench_args[@]}" 2>&1 | grep -E 'tg128' || true)
  [ -n "$line" ] || { echo "server_tax: llama-bench gave no tg128 line" >&2; exit 1; }
  tps=$(echo "$line" | awk -F'|' '{ print $(NF-1) }' | awk '{ print $1 }')
  bench+=("$tps")
  echo "round $round: llama-bench tg128 $tps tok/s"
  for v in "${variants[@]}"; do
    name=${v%%:*} envs=${v#*:}
    # exec: the signal below reaches the server itself, not a shell around it.
    # The variant's variables after the recipes' (the command's leading VAR=VALUE words), so
    # that a variant can override a recipe.
    ask=$port
    case $name in
      *@serve)
        ask=$serve_port
        eval "exec env ${envs//,/ } \"$bin/1bit\" serve -m \"$model\" --port $serve_port" >"$log" 2>&1 & ;;
      *) eval "exec env $cmd_env ${envs//,/ } $cmd_rest" >"$log" 2>&1 & ;;
    esac
    pid=$!
    for kind in greedy sampled streamed; do
      flag=; [ $kind = sampled ] && flag=--sampled; [ $kind = streamed ] && flag=--stream
      # A one-word prompt: the server decodes at the depths llama-bench's tg128 does (0-127), not
      # after a prompt whose attention each step would pay for.
      out=$(python3 "$root/dev/greedy_requests.py" "$ask" 128 4 $flag --prompt=The) || { echo "server_tax: $name did not answer" >&2; tail -n 5 "$log" >&2; exit 1; }
      echo "$out" | sed "s/^/round $round: $name: /"
      # The first request of each kind warms the server's caches; the other three count.
      speeds["$name $kind"]+=" $(echo "$out" | tail -n 3 | awk '{ print $(NF-1) }' | tr '\n' ' ')"
    done
    kill -INT "$pid"; wait "$pid" 2>/dev/null || true; pid=
  done
done

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
mb=$(median "${bench[@]}")
echo "median: llama-bench tg128 $mb tok/s"
for v in "${variants[@]}"; do
  name=${v%%:*}
  # shellcheck disable=SC2086
  mg=$(median ${speeds["$name greedy"]}) ms=$(median ${speeds["$name sampled"]}) mt=$(median ${speeds["$name streamed"]})
  awk -v n="$name" -v b="$mb" -v g="$mg" -v s="$ms" -v t="$mt" 'BEGIN {
    printf "median: %s greedy %.1f (%.1f%% of llama-bench), sampled %.1f (%.1f%%), greedy streamed %.1f (%.1f%%) tok/s\n",
      n, g, 100 * g / b, s, 100 * s / b, t, 100 * t / b }'
done
