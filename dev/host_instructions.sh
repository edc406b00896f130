#!/usr/bin/env bash
# The host's instructions per decoded token, outside the graph's compute, in llama-server and in
# llama-bench: what the server adds to a decode step on the CPU, counted by callgrind, which gives
# the same count on every run whatever else the machine does. Each program decodes N1 and then N2
# tokens greedily on one thread; the difference of the two runs, less the difference of
# ggml_graph_compute, over N2 - N1 tokens is the host's share of a token.
#
#   dev/host_instructions.sh BIN_DIR MODEL [N1 N2]
#
# BIN_DIR holds llama-server and llama-bench built without AVX-512 (valgrind 3.19 stops at its
# instructions), e.g. the engine's source (scripts/engine.sh --prepare DIR) configured with
#   cmake -S DIR -B DIR/build-avx2 -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGGML_NATIVE=OFF -DGGML_AVX=ON \
#         -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF -DLLAMA_BUILD_UI=OFF
#   cmake --build DIR/build-avx2 --target llama-server llama-bench
set -euo pipefail
bin=${1:?usage: host_instructions.sh BIN_DIR MODEL [N1 N2]} model=${2:?usage: host_instructions.sh BIN_DIR MODEL [N1 N2]}
n1=${3:-32} n2=${4:-64}
command -v valgrind >/dev/null || { echo "host_instructions: valgrind is not installed" >&2; exit 1; }
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT

# "TOTAL COMPUTE": the program's instructions and ggml_graph_compute's, inclusive.
counts() {
  callgrind_annotate --inclusive=yes "$1" 2>/dev/null | awk '
    /PROGRAM TOTALS/ { gsub(",", "", $1); t = $1 }
    /:ggml_graph_compute \[/ { gsub(",", "", $1); c = $1 }
    END { print t, c }'
}

server() {  # server N OUT
  local port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  valgrind --tool=callgrind --callgrind-out-file="$2" "$bin/llama-server" -m "$model" --host 127.0.0.1 --port "$port" \
    -ngl 0 -dev none -t 1 --no-warmup >"$work/server.log" 2>&1 &
  local pid=$!
  python3 "$(dirname "$0")/greedy_requests.py" "$port" "$1" 1 --stream >/dev/null
  kill -INT "$pid"
  wait "$pid" || true
}

bench() {  # bench N OUT
  valgrind --tool=callgrind --callgrind-out-file="$2" "$bin/llama-bench" -m "$model" -p 0 -n "$1" -r 1 -t 1 --no-warmup \
    >"$work/bench.log" 2>&1
}

for prog in server bench; do
  $prog "$n1" "$work/$prog-$n1.out"
  $prog "$n2" "$work/$prog-$n2.out"
  read -r t1 c1 < <(counts "$work/$prog-$n1.out")
  read -r t2 c2 < <(counts "$work/$prog-$n2.out")
  awk -v p="$prog" -v t1="$t1" -v c1="$c1" -v t2="$t2" -v c2="$c2" -v n=$((n2 - n1)) 'BEGIN {
    host = (t2 - t1 - (c2 - c1)) / n; compute = (c2 - c1) / n
    printf "%-6s host %8.0f instructions a token, compute %10.0f: host %.2f%% of compute\n", p, host, compute, 100 * host / compute }'
done
