#!/usr/bin/env bash
# The GPU measurements, in stages for a GPU machine that has no package registry and runs one
# command for at most 10 minutes: each stage fits one command, and a later stage finds what an
# earlier one left on the machine. Run from the checkout on that machine, after dev/gpu_carry.sh
# filled .carry/ on a machine with a registry; logs go to $OUT (default ./gpu-out).
#
#   dev/gpu_measure.sh --help        this list
#   dev/gpu_measure.sh build         the engine and 1bit with CUDA (about 6 minutes with 16 cores)
#   dev/gpu_measure.sh build-bg      the same in the background (it outlives the command while
#                                    the machine stays up); `wait-build` waits for it
#   dev/gpu_measure.sh queue "STAGE [ARGS]"...
#                                    the stages named, one after another in the background (they
#                                    outlive the command while the machine stays up), each with
#                                    its logs in /tmp/onebit-queue; `wait-queue SECONDS` waits for
#                                    them that long and packs what they wrote so far into
#                                    $OUT/queue.tar.xz at every stage's end, so a command cut off
#                                    still brings back every finished stage
#   dev/gpu_measure.sh quick         the drivers built here without the engine
#                                    (kernels/common/standalone_driver.sh into .gpu/, carried)
#   dev/gpu_measure.sh checks REGEX  ctest's tests whose names match REGEX (the cuda-labelled checks
#                                    of the engine's ops), in ctest-checks.log
#   dev/gpu_measure.sh gemv-one-col  the one-column GEMVs on the real shapes (cold L2): v7, v7-r16,
#                                    v7-r32, v7-w2, v7-r16-l2 (a row a lane, through a ring) and v7-direct,
#                                    v7-r32-direct (no ring) against v5, v5-narrow and the read floor, and
#                                    against MMVQ where the engine is built (else the driver in
#                                    .gpu/, built without it), in gemv-one-col.log
#   dev/gpu_measure.sh one-col       patch 0022: tg128 with each ONEBIT_GEMV_ONE_COL setting
#                                    alternated against MMVQ (and with ONEBIT_Q8_1_SHARED=1), in
#                                    one-col.md; its checks: `checks one_col`
#   dev/gpu_measure.sh one-col-bench 1bit bench, MMVQ against v7, with the answers
#   dev/gpu_measure.sh one-col-checks  test-backend-ops' MUL_MAT, MUL_MAT_VEC_FUSION and
#                                    MUL_MAT_Q4_0_SHARED with v7 and v7-l2 (ONE_COL_MODES: others;
#                                    ctest's one_col checks, for an engine built elsewhere)
#   dev/gpu_measure.sh prebuilt      unpacks .carry/prebuilt.tar.xz (dev/pack_prebuilt.sh: an engine
#                                    built on another machine) into /tmp/onebit-prebuilt; stages run
#                                    on it with ONEBIT_GPU_BIN=/tmp/onebit-prebuilt
#   dev/gpu_measure.sh one-col-timeline  every kernel of llama-bench's decode graph (dev/timeline) with
#                                    MMVQ and with v7, with and without PDL, in one-col-timeline.md
#   dev/gpu_measure.sh prompt-tax    1bit bench's prompt speed and time to first token with the
#                                    server's tax patches that switch back (0011, 0014) on and off,
#                                    and llama-bench pp512, in prompt-tax.txt
#   dev/gpu_measure.sh ab [VARIANT...]
#                                    every gdn driver in .gpu (gdn_prefill_driver, and the
#                                    gdn_prefill_driver_NAME builds of other branches, which may be
#                                    xz-compressed), one after another in one command: oracle lines
#                                    and the main cases' times; every case's log in ab-logs.tar.xz;
#                                    for each VARIANT named (v3, v9, ...) its kernels' own times
#                                    and instructions under Nsight Compute (32 x d128 x 1024)
#   dev/gpu_measure.sh probe         kernels/gdn-prefill/probes/chain_product.cu: the scan's chain
#                                    product with mma.sync and with wgmma, checked and timed (with
#                                    its machine code); kernels/common/probes/cluster_check.cu:
#                                    the emulator's cluster model against the GPU
#   dev/gpu_measure.sh profile       each kernel's own time and HBM / SM throughput under Nsight
#                                    Compute (cold caches), from the drivers built here, and their
#                                    machine code (cuobjdump, compressed) to study here
#   dev/gpu_measure.sh stalls        Nsight Compute's occupancy, scheduler, warp-state and memory
#                                    sections for one launch of each main kernel (why it waits)
#   dev/gpu_measure.sh kernels       both kernel drivers with --bench-mode, and ctest -L cuda
#                                    (the drivers' checks and the engine's test-backend-ops); the
#                                    gemv driver again with ONEBIT_GEMV_Q4_0=auto and =v5, whose
#                                    engine_ms lines are then our kernels inside the engine
#   dev/gpu_measure.sh e2e [gdn|gemv]
#                                    llama-bench with the engine switches off and on, on
#                                    synthetic real-size models: pp2048 on the Qwen3.5-style 9B and
#                                    2B hybrids (gdn-prefill v3, v4, auto), pp4-pp8 and tg128 on
#                                    Llama 3 8B Q4_0 (gemv-q4_0 auto); both, or the one named
#   dev/gpu_measure.sh tune          1bit tune on Llama 3 8B Q4_0 with three candidates of its own
#                                    (flash attention off, larger ubatches) and llama-bench on the
#                                    same file
#   dev/gpu_measure.sh tune-hybrid   1bit tune on the 9B hybrid (the gdn-prefill switch, =2 and =3)
#   dev/gpu_measure.sh tune-hybrid-small
#                                    1bit tune on the 16-head 2B hybrid (=4 and =auto against the
#                                    built-in recipe's =3)
#   dev/gpu_measure.sh search [llama|hybrid] [chat|prompt|balanced] [BUDGET]
#                                    1bit tune's own search over its space on Llama 3 8B Q4_0 or the
#                                    9B hybrid from the default launch (default: llama, chat, 8m);
#                                    the winners go to that goal's recipe store,
#                                    $OUT/config-GOAL/1bit
#   dev/gpu_measure.sh confirm [llama|hybrid] [GOAL]
#                                    1bit bench of the recipes that goal's search stored (default
#                                    chat) against --no-recipes, in one run
#   dev/gpu_measure.sh spec-kinds [llama|hybrid] [tiny]
#                                    the step cost of every drafter kind at draft lengths 2, 4, 7
#                                    and 16 (dflash: 15), each through 1bit serve's own option in
#                                    one bench run with the plain target first: on Llama 3 8B Q4_0
#                                    a 1B draft model, eagle3 and dflash drafters (random weights:
#                                    every draft rejected) and the target drafting for itself
#                                    (every draft accepted), n-gram speculation, and the 1B's own
#                                    plain decode; on the 9B hybrid its MTP layer, the layer as a
#                                    separate head and a dflash drafter. `tiny`: the test-size
#                                    shapes, to check the stage on any machine (their dflash blocks
#                                    are 4 and 8 tokens: the engine drafts at most 3 and 7 there)
#   dev/gpu_measure.sh small-pair [small|tiny]
#                                    1bit-small (or 1bit-tiny) with each of its trained drafters
#                                    against none, in one bench run: the draft model at draft
#                                    lengths 2, 3, 4 and 7, the DFlash drafter (small) at 3, 7 and
#                                    15, n-gram speculation; the GGUFs from $MODELS (default
#                                    /tmp/1bit-models: they are more than one command can carry)
#   dev/gpu_measure.sh decode        tg128 with the gemv switch off and auto, with and without the
#                                    engine's CUDA graphs, and every kernel's time over a few
#                                    decode steps under Nsight Compute
#   dev/gpu_measure.sh verify-cols [spec]
#                                    the verification products of 9-16 columns (a step with 8-15
#                                    drafted tokens): v5 inside the engine against MMVQ and MMQ at
#                                    1-16 columns (the gemv driver, unset and =v5), llama-bench
#                                    pp1-pp16 on Llama 3 8B Q4_0 unset, =auto and =v5 alternating,
#                                    every kernel of a 16-token batch under Nsight Compute (unset
#                                    and =v5), and the step costs of dflash and eagle3 through
#                                    1bit serve unset, =auto, =v5 (with spec: only these)
#   dev/gpu_measure.sh step-profile [kv]
#                                    where a decode step's time goes on Llama 3 8B Q4_0: 1bit bench with
#                                    the engine's step profile (ONEBIT_STEP_PROFILE, patch 0007) for
#                                    the plain target, dflash at 3, 7 and 15 drafted, eagle3 at 7 and
#                                    15 and the 1B draft model at 7 (every draft rejected), the 8B
#                                    drafting for itself at 7 (drafts accepted), those two again
#                                    decoding each verified batch again (ONEBIT_DRAFT_REEVAL, patch
#                                    0008's switch back to the engine's way), dflash-15 with the
#                                    target sampling on the GPU (-bs) and with the drafter sampling on
#                                    the CPU; the plain target, dflash-15 and eagle3-7 again without
#                                    the profile (what its synchronization costs); llama-bench tg128
#                                    on the same file before and after (step-tg128.md); the engines'
#                                    logs in step-logs/, their profile lines in step-profile.txt;
#                                    with kv only the plain target (also with the engine's full
#                                    candidate sampling, ONEBIT_SAMPLING_FULL) and the draft
#                                    models at 7, kept and decoded again
#   dev/gpu_measure.sh rotate [SHAPE...]
#                                    Hadamard-rotated Q4_0 on CUDA: dev/rotate_measure.sh on Llama 3
#                                    8B and the 9B hybrid, or the shapes named (rotate time and
#                                    memory, llama-bench rotated against plain Q4_0 and rotated
#                                    with the rotation unfused), the shipped 1bit-tiny's perplexity
#                                    and KLD rotated and plain (tests/engine_rotate_test.sh; the
#                                    GGUF from $MODELS, default /tmp/1bit-models, where a command
#                                    before copied it: `dev/stow_models.sh out --keep
#                                    1bit-tiny-32m-q8_0.gguf`, then without .carry `mkdir -p
#                                    /tmp/1bit-models && cp models/*.gguf /tmp/1bit-models/`), and
#                                    ctest's rotated products against the CPU (engine_ops_q4_0_rot)
#   dev/gpu_measure.sh vulkan        the engine's Vulkan backend against its CUDA backend: tg128 and
#                                    pp512 on Llama 3 8B Q4_0 (-fa 1, -ngl 99, -r 5), CUDA
#                                    ($bin/llama-bench: `build` first) and each carried Vulkan
#                                    llama-bench (.carry/vulkan/llama-bench-vulkan*.tar.xz, built
#                                    elsewhere: no glslc here) alternating, twice each, in
#                                    vulkan.md; Debian's Vulkan loader and libglvnd from .gl/*.deb
#                                    (the NVIDIA driver's ICD needs libglvnd); device lists and
#                                    errors in vulkan.err
#   dev/gpu_measure.sh rpc           what RPC workers cost (dev/rpc_measure.sh, two `1bit rpc-worker
#                                    --device cpu` on loopback): 1bit bench of Llama 3 8B Q4_0 on the
#                                    GPU alone, with a CPU worker beside it (layers split by free
#                                    memory) and with the worker given 1/8 of them (-ts 7,1); then the
#                                    Llama 3.2 1B on the local CPU against the same on the two workers
#   dev/gpu_measure.sh shared        patch 0012 (a plain input quantized once for all its Q4_0
#                                    readers) on Llama 3 8B Q4_0: ctest's whole-graph cases
#                                    (engine_ops_q4_0_shared), llama-bench tg128 and pp1-pp16 (the
#                                    verification batches, gemv auto) with ONEBIT_Q8_1_SHARED=0 and
#                                    =1 alternating twice
#   dev/gpu_measure.sh shared-bench  1bit bench of the plain target and of dflash at 15 drafted, with
#                                    ONEBIT_Q8_1_SHARED=0 and =1 (the step cost)
#   dev/gpu_measure.sh timeline      the GPU's timeline of decode steps (dev/timeline: every kernel,
#                                    copy and CUDA runtime call under CUPTI) on Llama 3 8B Q4_0, for
#                                    llama-bench's tg and for llama-server answering requests as
#                                    1bit serve starts it, with ONEBIT_Q8_1_SHARED=0 and =1 (llama-bench
#                                    also with GGML_CUDA_PDL=0, the server also with dflash at 15);
#                                    summaries in timeline.md, two CSVs and the logs compressed
#   dev/gpu_measure.sh spec-timeline the same timeline of llama-server on Llama 3 8B Q4_0 plain, with
#                                    dflash at 15 (as 1bit serve's recipes run it, and with
#                                    --batch-invariant) and dflash at 7: every kind of graph in a
#                                    speculative step with its kernels, and the copies by size, in
#                                    spec-timeline.md
#   dev/gpu_measure.sh parity        greedy answers with a drafter against the plain target's on
#                                    Llama 3 8B Q4_0 (1B draft model at 7 with 1bit's GEMV, the
#                                    recipe, and without it; dflash at 7); and
#                                    on the trained 1bit-tiny pair (its GGUFs from $MODELS); which
#                                    configurations answer as the plain target does, in parity.md
#   dev/gpu_measure.sh mmvq-pdl      patch 0017 on Llama 3 8B Q4_0: llama-bench tg128 with
#                                    ONEBIT_MMVQ_PDL=0-3 alternating twice, pp1-pp8 with 0 and 3,
#                                    1bit bench with 0 and 3 (speeds, and whether the greedy answers
#                                    are the same), then ctest's checks with 3 (test-backend-ops
#                                    MUL_MAT and the shared whole graphs)
#   dev/gpu_measure.sh tax [ROUNDS [VARIANT...]]
#                                    the server's tax on decode, without a tracer
#                                    (dev/server_tax.sh): llama-bench tg128 and the server as 1bit
#                                    serve starts it, greedy, default sampling and streamed, as it
#                                    is, with streamed tokens paced at 16 ms (patch 0016),
#                                    sampling on the GPU (-bs) and through 1bit serve itself, or
#                                    the server_tax.sh variants named, alternating ROUNDS times
#                                    (default 3) on Llama 3 8B Q4_0, in tax.md
#   dev/gpu_measure.sh top-k         patch 0018 (TOP_K for small k in one read): ctest's checks
#                                    against the CPU with it and without it (engine_ops_top_k*),
#                                    test-backend-ops perf of TOP_K on rows of 128256 and 200000
#                                    with ONEBIT_TOP_K_SMALL=0 and =1 alternating twice
#                                    (top-k.md), then 1bit bench on Llama 3 8B
#                                    Q4_0 of the plain target and of dflash at 7 and 15 drafted, each
#                                    with =0 and =1, 15 also with 1bit's GEMV (=auto), under the
#                                    step profile (the profile lines in top-k-profile.txt) and with
#                                    the target sampling on the GPU (-bs, profiled), and the
#                                    plain target under the step profile (where the server's step
#                                    goes beside the decode)
#   dev/gpu_measure.sh top-k-tax [ROUNDS]
#                                    the server's tax (dev/server_tax.sh, default 2 rounds) as it is
#                                    and with sampling on the GPU (-bs), whose top 40 is the op
#                                    above, with ONEBIT_TOP_K_SMALL=0 and =1, in top-k-tax.md
#   dev/gpu_measure.sh invariance    which products give column 0 of a batch of 2-16 columns the
#                                    bits of a one-column call (test-backend-ops COL0_INVARIANT:
#                                    Q4_0, Q8_0 and F16 products, gate/up with SwiGLU, a product
#                                    with a residual; flash attention of 2-16 queries against the
#                                    first alone, also with the batch's KV 256 cells longer), as
#                                    the engine runs them and batch-invariant
#                                    (ONEBIT_BATCH_INVARIANT=1, patch 0021), with INVARIANCE_MORE
#                                    set also with 1bit's GEMV (=auto) and with the engine's
#                                    fusions off, in invariance.md
#   dev/gpu_measure.sh batch-invariant [checks]
#                                    patch 0021 on Llama 3 8B Q4_0: 1bit bench of the plain
#                                    target and of dflash at 15 as the recipes run them and with
#                                    ONEBIT_BATCH_INVARIANT=1, and with it the 1B draft model and
#                                    dflash at 7 (every draft rejected), whose greedy
#                                    answers are held against the plain target's in the same mode;
#                                    llama-bench tg128 and pp1-pp16 without and with it; then
#                                    ctest's checks with it (COL0_INVARIANT for what it covers,
#                                    MUL_MAT and FLASH_ATTN_EXT against the CPU), in
#                                    batch-invariant.md; with checks, llama-bench (twice each) and
#                                    ctest only
#   dev/gpu_measure.sh parity-kinds  greedy answers of the other drafter kinds, batch-invariant
#                                    (ONEBIT_BATCH_INVARIANT=1), against the plain target's in the
#                                    same mode: eagle3 at 7 and 15 and n-gram speculation on Llama 3
#                                    8B Q4_0; the 9B hybrid's MTP layer at 3 (also as the engine runs
#                                    it) and 7 and a dflash drafter at 7; in parity-kinds.md
#   dev/gpu_measure.sh spec          speculative decoding through 1bit serve on Llama 3 8B Q4_0 with
#                                    a Llama 3.2 1B drafter (random weights: acceptance is noise,
#                                    every step verifies 8 tokens), 1bit bench with the gemv
#                                    switch off, auto and v5, and without a drafter
set -euo pipefail
stages="build|build-bg|wait-build|queue|wait-queue|quick|ab|probe|profile|stalls|kernels|e2e|tune|tune-hybrid|tune-hybrid-small|search|confirm|spec|spec-kinds|verify-cols|step-profile|small-pair|decode|rotate|rpc|vulkan|shared|shared-bench|timeline|parity|tax|mmvq-pdl|top-k|top-k-tax|invariance|batch-invariant|parity-kinds|spec-timeline|gemv-one-col|checks|one-col|one-col-bench|one-col-checks|one-col-timeline|prompt-tax|prebuilt"
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
case ${1:-} in
  -h | --help) usage; exit 0 ;;
  "") echo "usage: gpu_measure.sh $stages (--help lists them)" >&2; exit 2 ;;
esac
stage=$1
case "|$stages|" in
  *"|$stage|"*) ;;
  *) echo "gpu_measure.sh: unknown stage $stage; the stages: $stages" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
cd "$root"
export CMAKE_PREFIX_PATH=$root/.carry/nlohmann ONEBIT_LLAMA_SOURCE=$root/.carry/engine-src.tar.xz
export ONEBIT_CACHE_DIR=${ONEBIT_CACHE_DIR:-/tmp/onebit-cache}
# ONEBIT_GPU_BIN: the binaries and shared libraries of an engine built elsewhere (the prebuilt stage)
bin=${ONEBIT_GPU_BIN:-$root/build/bin}
if [ -n "${ONEBIT_GPU_BIN:-}" ]; then  # its libraries, then CUDA's and NCCL's (the one PyTorch brings, if that is all there is)
  nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
  export LD_LIBRARY_PATH=$bin:/usr/local/cuda/lib64:/usr/local/cuda/lib${nccl:+:$nccl}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
hybrid=/tmp/qwen35-9b-q4_0.gguf hybrid_small=/tmp/qwen35-2b-q4_0.gguf llama=/tmp/llama3-8b-q4_0.gguf draft=/tmp/llama3.2-1b-q4_0.gguf
llama_dflash=/tmp/llama3-8b-dflash-q4_0.gguf
bench_opts=(--rounds 3 --prompt-reps 3 --decode-reps 1 --decode-tokens 64)  # tune's, for both models
try_opts=(--knobs none --goal prompt)  # the stages that judge candidates of their own on prompt speed
synth_models() {  # synth_models [SHAPE:FILE ...] (default: the hybrid and Llama 3 8B)
  local vocab=/tmp/onebit-vocab
  [ -d $vocab ] || { mkdir -p $vocab && tar -C $vocab -xJf .carry/vocab.tar.xz; }
  # Written under another name first: a command cut short must not leave a half file to reuse.
  local like file
  [ $# -gt 0 ] || set -- qwen35-9b:$hybrid llama3-8b:$llama
  for like in "$@"; do
    file=${like#*:}
    [ -f "$file" ] && continue
    "$bin/1bit" synth --like "${like%%:*}" --type q4_0 --vocab-dir $vocab -o "${file%.gguf}.part.gguf" >/dev/null
    mv "${file%.gguf}.part.gguf" "$file"
  done
}

# answers_md BENCH_JSON...: a table of which configurations answered each prompt as "plain" did,
# those named *-inv as "plain-inv" did (the files named NAME-MODEL.json; MODEL names the rows).
answers_md() {
  python3 - "$@" <<'PY'
import json, sys
print("| model | config | prompt | same as plain | first difference at character |")
print("| --- | --- | --- | --- | ---: |")
for path in sys.argv[1:]:
    answers = {}
    for a in json.load(open(path))["answers"]:
        answers.setdefault(a["config"], {})[a["prompt"]] = a["text"]
    model = path.rsplit("/", 1)[-1].split("-", 1)[1].removesuffix(".json")
    for config, by_prompt in answers.items():
        if config in ("plain", "plain-inv"):
            continue
        base = answers.get("plain-inv" if config.endswith("-inv") else "plain", {})
        for prompt, text in by_prompt.items():
            ref = base.get(prompt, "")
            at = next((i for i, (x, y) in enumerate(zip(text, ref)) if x != y), min(len(text), len(ref)))
            same = text == ref
            print(f"| {model} | {config} | {prompt} | {'yes' if same else 'no'} | {'' if same else at} |")
PY
}

# timeline_lib: dev/timeline's CUPTI recorder built into $tl (a fresh directory).
timeline_lib() {
  tl=/tmp/onebit-timeline
  rm -rf $tl && mkdir -p $tl
  local cupti
  cupti=$(find /usr/local/cuda* /opt -name 'libcupti.so*' 2>/dev/null | head -n 1)
  [ -n "$cupti" ] || { echo "timeline: no libcupti on this machine" >&2; exit 1; }
  g++ -O2 -shared -fPIC -o $tl/libtimeline.so dev/timeline/timeline.cc -I/usr/local/cuda/include \
    "$cupti" -Wl,-rpath,"$(dirname "$cupti")"
}
# timeline_server NAME EXTRA MD [SUMMARY_OPTS...]: llama-server as 1bit serve starts it for
# Llama 3 8B Q4_0 (EXTRA: serve's options, or VAR=VALUE words for the engine), recorded while it
# answers three greedy requests of 128 tokens; the summary is added to MD.
timeline_server() {
  local name=$1 extra=$2 md=$3 envs= serve_args= cmd port pid
  shift 3
  case $extra in --*) serve_args=$extra ;; *) envs=$extra ;; esac
  cmd=$("$bin/1bit" serve -m "$llama" $serve_args --dry-run 2>/dev/null | tail -n 1)
  port=$(echo "$cmd" | sed -n 's/.*--port \([0-9]*\).*/\1/p')
  eval "exec env LD_PRELOAD=$tl/libtimeline.so ONEBIT_TIMELINE_OUT=$tl/$name.csv $envs $cmd" >$tl/$name.log 2>&1 &
  pid=$!
  python3 dev/greedy_requests.py "$port" 128 3 >>$tl/$name.log 2>&1 || echo "timeline: $name did not answer"
  kill -INT $pid 2>/dev/null; wait $pid 2>/dev/null || true
  grep -E '^server (greedy|sampled):|ONEBIT_Q8_1_SHARED:' $tl/$name.log >>"$md" || true
  python3 dev/timeline/summary.py $tl/$name.csv --label "llama-server, ${extra:-as 1bit serve starts it}" "$@" >>"$md" 2>&1 || true
}

case $stage in
  build)
    { time JOBS=$(nproc) make build CUDA=1; } >"$out/build.log" 2>&1 || { tail -n 30 "$out/build.log"; exit 1; }
    tail -n 3 "$out/build.log"
    ;;
  build-bg)
    rm -f /tmp/onebit-build.done
    touch /tmp/onebit-build.started
    # Its own OUT: this command's $OUT may be emptied before the next command.
    OUT=/tmp/onebit-bg setsid nohup bash -c "\"$root/dev/gpu_measure.sh\" build >/tmp/onebit-build.out 2>&1; echo \$? >/tmp/onebit-build.done" \
      >/dev/null 2>&1 &
    echo "build started in the background"
    ;;
  wait-build)
    [ -f /tmp/onebit-build.started ] || { echo "wait-build: no build-bg ran on this machine" >&2; exit 1; }
    for _ in $(seq 450); do [ -f /tmp/onebit-build.done ] && break; sleep 2; done
    [ -f /tmp/onebit-build.done ] || { echo "wait-build: the build is still running after 15 minutes" >&2; exit 1; }
    cp /tmp/onebit-bg/build.log "$out/" 2>/dev/null || true
    tail -n 3 /tmp/onebit-build.out
    exit "$(cat /tmp/onebit-build.done)"
    ;;
  queue)
    shift
    [ $# -gt 0 ] || { echo "usage: gpu_measure.sh queue \"STAGE [ARGS]\"..." >&2; exit 2; }
    q=/tmp/onebit-queue
    if [ -f $q/stages ] && [ ! -f $q/done ]; then echo "queue: a queue is still running here (wait-queue)" >&2; exit 1; fi
    rm -rf $q && mkdir -p $q/out
    printf '%s\n' "$@" >$q/stages
    # Each stage's own OUT: this command's $OUT may be emptied before the next command. The list
    # is read on its own descriptor, so that no stage can read the rest of it as its input.
    OUT=$q/out setsid nohup bash -c "while read -r s <&3; do echo \"== \$s\" >>$q/log; \"$root/dev/gpu_measure.sh\" \$s >>$q/log 2>&1 </dev/null; echo \"== \$s: exit \$?\" >>$q/log; done 3<$q/stages; touch $q/done" \
      >/dev/null 2>&1 &
    echo "queued $# stages"
    ;;
  wait-queue)
    q=/tmp/onebit-queue
    [ -f $q/stages ] || { echo "wait-queue: no queue ran on this machine" >&2; exit 1; }
    end=$((SECONDS + ${2:-540})) packed=-1
    # A stage still running may write while tar reads (its exit 1): the archive is kept anyway.
    pack() {
      cp $q/log $q/out/queue.log 2>/dev/null || true
      tar --warning=no-file-changed -C $q/out -cJf "$out/queue.tar.xz.part" . || [ $? -eq 1 ]
      mv "$out/queue.tar.xz.part" "$out/queue.tar.xz"
    }
    while :; do
      ended=$(grep -c '^== .*: exit ' $q/log 2>/dev/null || true)
      if [ "$ended" != "$packed" ] && pack; then packed=$ended; fi
      [ -f $q/done ] || [ $SECONDS -ge $end ] && break
      sleep 5
    done
    pack  # what the last stage wrote between the count and the end
    grep -E '^== |^1bit tune: goal|^  [a-z-]+: (kept|took)|^  best:' $q/log | tail -n 40 || true
    [ -f $q/done ] && echo "queue: done" || echo "queue: still running"
    ;;
  quick)
    for d in gdn_prefill_driver gemv_q4_0_driver; do
      .gpu/$d --bench-mode --reps 10 >"$out/$d-quick.log" 2>&1 || true
      grep -hE '^(SNR|allclose):' "$out/$d-quick.log" || echo "$d: no SNR line (see $d-quick.log)"
    done
    grep -hE '^case_ms:' "$out/gdn_prefill_driver-quick.log" | grep -E 't1024-K1|t4096-K8' || true
    grep -hE '^case_ms:' "$out/gemv_q4_0_driver-quick.log" | grep -E '4096x14336' || true
    ;;
  checks)
    (cd build && ctest -R "${2:?usage: gpu_measure.sh checks REGEX}" --output-on-failure) >"$out/ctest-checks.log" 2>&1 || true
    tail -n 8 "$out/ctest-checks.log"
    ;;
  gemv-one-col)
    # The engine's driver where `build` ran (then MMVQ itself, engine_ms, in the same run), else the
    # standalone one carried in .gpu/ (kernels/common/standalone_driver.sh).
    d=$bin/gemv_q4_0_driver
    [ -x "$d" ] || d=.gpu/gemv_q4_0_driver
    "$d" --bench-mode --reps 10 --variant v5,v5-narrow,v7,v7-r16,v7-r32,v7-w2,v7-r16-l2,v7-direct,v7-r32-direct --filter /normal/ >"$out/gemv-one-col.log" 2>&1 || true
    grep -hE '^(SNR|allclose|copy bandwidth|floor_ms):|^engine_ms: .*/n1 |^case_ms: .*/n1 ' "$out/gemv-one-col.log" || true
    ;;
  one-col)
    # Patch 0022: v7 in MMVQ's place at one column (ONEBIT_GEMV_ONE_COL): tg128 with each setting
    # alternated; one-col-bench: 1bit bench with the answers against MMVQ's.
    synth_models llama3-8b:$llama
    md=$out/one-col.md
    : >"$md"
    for round in 1 2; do
      for sw in "" ONEBIT_GEMV_ONE_COL=head ONEBIT_GEMV_ONE_COL=v7 ONEBIT_GEMV_ONE_COL=v7-l2 \
        "ONEBIT_GEMV_ONE_COL=v7 ONEBIT_Q8_1_SHARED=1" ONEBIT_Q8_1_SHARED=1; do
        echo "${sw:-MMVQ}, round $round" >>"$md"
        env $sw "$bin/llama-bench" -m "$llama" -p 0 -n 128 -r 5 -fa 1 -o md 2>&1 | grep -E 'tg128|error' >>"$md" || true
      done
    done
    cat "$md"
    ;;
  one-col-checks)
    # ctest's one_col checks where the engine was built elsewhere: MUL_MAT, MUL_MAT_VEC_FUSION and
    # the shared-input graphs against the CPU with each setting.
    for sw in ${ONE_COL_MODES:-v7 v7-l2}; do
      for op in MUL_MAT MUL_MAT_VEC_FUSION MUL_MAT_Q4_0_SHARED; do
        echo "ONEBIT_GEMV_ONE_COL=$sw ONEBIT_Q8_1_SHARED=1 -o $op: $(env ONEBIT_GEMV_ONE_COL=$sw ONEBIT_Q8_1_SHARED=1 \
          "$bin/engine-test-backend-ops" test -o $op -b CUDA0 2>&1 | grep -E 'FAIL|tests passed' | tail -n 3 | tr '\n' ' ')"
      done
    done | tee "$out/one-col-checks.txt"
    ;;
  prebuilt)
    # An engine built on another machine (dev/pack_prebuilt.sh): unpacked into /tmp/onebit-prebuilt;
    # the stages then use it with ONEBIT_GPU_BIN=/tmp/onebit-prebuilt.
    rm -rf /tmp/onebit-prebuilt && mkdir -p /tmp/onebit-prebuilt
    tar -C /tmp/onebit-prebuilt -xJf .carry/prebuilt.tar.xz
    ls /tmp/onebit-prebuilt
    ;;
  one-col-bench)
    synth_models llama3-8b:$llama
    md=$out/one-col-bench.md
    : >"$md"
    "$bin/1bit" bench -m "$llama" --config plain= --config v7=ONEBIT_GEMV_ONE_COL=v7 --rounds 2 --prompt-reps 1 \
      --decode-reps 1 --decode-tokens 64 --json "$out/one-col-8b.json" >"$out/one-col-bench.txt" 2>"$out/one-col-bench.err" || true
    answers_md "$out/one-col-8b.json" >>"$md"
    cat "$md" "$out/one-col-bench.txt"
    tail -n 2 "$out/one-col-bench.err"
    ;;
  one-col-timeline)
    # Each kernel of llama-bench's decode graph with MMVQ and with v7 (patch 0022), without the
    # engine's programmatic dependent launch (each kernel's own time) and with it.
    synth_models llama3-8b:$llama
    timeline_lib
    md=$out/one-col-timeline.md
    : >"$md"
    for cfg in "mmvq-no-pdl=GGML_CUDA_PDL=0" "v7-no-pdl=GGML_CUDA_PDL=0 ONEBIT_GEMV_ONE_COL=v7" "mmvq=GGML_CUDA_PDL=1" \
      "v7=ONEBIT_GEMV_ONE_COL=v7"; do
      name=bench-${cfg%%=*}
      env LD_PRELOAD=$tl/libtimeline.so ONEBIT_TIMELINE_OUT=$tl/$name.csv ${cfg#*=} \
        "$bin/llama-bench" -m "$llama" -p 0 -n 64 -r 1 -fa 1 >$tl/$name.log 2>&1 || tail -n 5 $tl/$name.log
      python3 dev/timeline/summary.py $tl/$name.csv --label "llama-bench tg, ${cfg#*=}" >>"$md" 2>&1 || true
    done
    cat "$md"
    ;;
  prompt-tax)
    # Part of the server's tax work that can be switched back (patches 0011 and 0014; 0013 cannot):
    # prompt speed and time to first token through 1bit serve with the engine's way and with 1bit's.
    synth_models llama3-8b:$llama
    "$bin/1bit" bench -m "$llama" --config plain= --config "engine-way=ONEBIT_YIELD_EAGER=1 ONEBIT_SAMPLING_FULL=1" \
      --rounds 3 --prompt-reps 2 --decode-reps 1 --decode-tokens 64 --json "$out/prompt-tax.json" \
      >"$out/prompt-tax.txt" 2>"$out/prompt-tax.err" || true
    "$bin/llama-bench" -m "$llama" -p 512 -n 0 -r 5 -fa 1 -o md 2>&1 | grep -E 'pp512|error' >>"$out/prompt-tax.txt" || true
    cat "$out/prompt-tax.txt"
    ;;
  ab)
    # Other branches' drivers may come xz-compressed (what is copied to the machine is at most 64 MiB).
    for z in .gpu/gdn_prefill_driver_*.xz; do [ -f "$z" ] && xz -dkf "$z" && chmod +x "${z%.xz}"; done
    for d in .gpu/gdn_prefill_driver .gpu/gdn_prefill_driver_*; do
      [ -x "$d" ] && [ "${d%.xz}" = "$d" ] || continue
      name=${d##*/}
      # A driver takes about 25 s; a kernel that hangs on the GPU must not take the whole command.
      timeout 180 "$d" --bench-mode --reps 20 >"$out/$name.log" 2>&1 || echo "== $name: exit $?"
      echo "== $name: $(grep -hE '^(SNR|allclose):' "$out/$name.log" | tr '\n' ' ')"
      grep -hE '^case_ms: v([3-9]|1[0-9])/d128-h(32-t1024-K[18]|32-t4096-K8|48k16-t1024-K1)-harsh ' "$out/$name.log" || true
      for v in "${@:2}"; do
        echo "-- $name $v alone:"
        timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum,smsp__inst_executed.sum -k regex:gdn_ "$d" \
          --no-engine --reps 1 --filter d128-h32-t1024-K1-harsh --variant "$v" 2>&1 |
          grep -E '^  void|gpu__time_duration|smsp__inst_executed' | sed 's/(GdnArgs.*//' || true
      done
    done
    # One archive: a command brings back at most 8 files.
    (cd "$out" && tar -cJf ab-logs.tar.xz gdn_prefill_driver*.log && rm -f gdn_prefill_driver*.log)
    ;;
  probe)
    mkdir -p .gpu
    nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I kernels/common -o .gpu/chain_product \
      kernels/gdn-prefill/probes/chain_product.cu
    { .gpu/chain_product 1000 || true; } | tee "$out/chain_product.log"
    nvcc -std=c++17 -O2 -arch=sm_90 -I kernels/common -o .gpu/cluster_check kernels/common/probes/cluster_check.cu
    { .gpu/cluster_check || true; } | tee "$out/cluster_check.log"
    cuobjdump -sass .gpu/chain_product | xz -6 >"$out/chain_product.sass.xz" || true
    ;;
  profile)
    metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed
    ncu --clock-control none --metrics $metrics --csv -k regex:gdn_ .gpu/gdn_prefill_driver --no-engine \
      --filter d128-h32-t1024-K1-harsh >"$out/ncu-gdn.csv" 2>"$out/ncu-gdn.err" || true
    ncu --clock-control none --metrics $metrics --csv -k regex:gemv .gpu/gemv_q4_0_driver --no-engine \
      --filter 4096x14336/normal >"$out/ncu-gemv.csv" 2>"$out/ncu-gemv.err" || true
    grep -c gpu__time_duration "$out/ncu-gdn.csv" "$out/ncu-gemv.csv" || tail -n 5 "$out/ncu-gdn.err"
    for d in gdn_prefill_driver gemv_q4_0_driver; do cuobjdump -sass ".gpu/$d" | xz -6 >"$out/$d.sass.xz" || true; done
    ;;
  stalls)
    sections=(--section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats
              --section WarpStateStats --section MemoryWorkloadAnalysis)
    # Launch order in the drivers' checks: gdn v1 prep, scan, v2 prep, scan, v3 prep, scan; gemv
    # v1 n1..n8, v1-batch4, v2, v2-wide (8 each), then v3 n1..n8.
    ncu --clock-control none "${sections[@]}" -k regex:gdn_ --launch-skip 2 --launch-count 4 \
      .gpu/gdn_prefill_driver --no-engine --filter d128-h32-t1024-K1-harsh >"$out/stalls-gdn.txt" 2>&1 || true
    for skip in 0 32 39; do
      ncu --clock-control none "${sections[@]}" -k regex:gemv --launch-skip $skip --launch-count 1 \
        .gpu/gemv_q4_0_driver --no-engine --filter 4096x14336/normal
    done >"$out/stalls-gemv.txt" 2>&1 || true
    grep -hE '^  [a-z_]+<|Duration|Achieved Occupancy|No Eligible|Issued Warp|Stall' "$out/stalls-gdn.txt" "$out/stalls-gemv.txt" | head -60 || true
    ;;
  kernels)
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$out/gpu.txt" 2>&1 || true
    "$bin/gdn_prefill_driver" --bench-mode --reps 10 >"$out/gdn-prefill.log" 2>&1 || true
    "$bin/gemv_q4_0_driver" --bench-mode --reps 5 >"$out/gemv-q4_0.log" 2>&1 || true
    # The engine's MUL_MAT with the switch set: our kernels inside the engine, its activation
    # quantization included, for the engine_ms lines to set beside the run above.
    for v in auto v5; do
      ONEBIT_GEMV_Q4_0=$v "$bin/gemv_q4_0_driver" --bench-mode --reps 5 --variant v5 --filter /normal/ \
        >"$out/gemv-q4_0-engine-$v.log" 2>&1 || true
    done
    (cd build && ctest -L cuda --output-on-failure) >"$out/ctest-cuda.log" 2>&1 || true
    grep -hE '^(SNR|allclose):' "$out/gdn-prefill.log" "$out/gemv-q4_0.log" || echo "no SNR lines"
    grep -hE '^(case_ms|engine_ms):' "$out/gdn-prefill.log" | head -40 || true
    tail -n 8 "$out/ctest-cuda.log"
    ;;
  e2e)
    part=${2:-all}
    case $part in all | gdn | gemv) ;; *) echo "usage: gpu_measure.sh e2e [gdn|gemv]" >&2; exit 2 ;; esac
    logs=()
    if [ "$part" != gemv ]; then
      synth_models qwen35-9b:$hybrid qwen35-2b:$hybrid_small
      for model in "$hybrid" "$hybrid_small"; do
        for switch in "" ONEBIT_GDN_PREFILL=3 ONEBIT_GDN_PREFILL=4 ONEBIT_GDN_PREFILL=auto; do
          echo "== ${switch:-no switch}: pp2048 on ${model##*/}"
          env $switch "$bin/llama-bench" -m "$model" -p 2048 -n 0 -r 3 -fa 1 -o md || echo "llama-bench failed"
        done
      done >"$out/e2e-gdn.md" 2>&1
      logs+=("$out/e2e-gdn.md")
    fi
    if [ "$part" != gdn ]; then
      synth_models llama3-8b:$llama
      # 1 column (tg128) and the 4-8 columns of a speculative step's verification (pp4..pp8: a
      # batch of up to 8 tokens takes the MMVQ path).
      # Alternating twice: pp4-pp8 move by a few percent between runs.
      for switch in "" ONEBIT_GEMV_Q4_0=auto "" ONEBIT_GEMV_Q4_0=auto; do
        echo "== ${switch:-no switch}: pp4-pp8 and tg128 on Llama 3 8B Q4_0"
        env $switch "$bin/llama-bench" -m "$llama" -p 4,5,6,7,8 -n 128 -r 10 -fa 1 -o md || echo "llama-bench failed"
      done >"$out/e2e-gemv.md" 2>&1
      logs+=("$out/e2e-gemv.md")
    fi
    cat "${logs[@]}" | grep -E '^==| (pp|tg)[0-9]+ |failed' || true
    ;;
  tune)
    synth_models
    "$bin/1bit" tune -m "$llama" --try "-fa off" --try "-ub 1024" --try "-ub 2048" "${try_opts[@]}" "${bench_opts[@]}" \
      --json "$out/tune-llama.json" --html "$out/tune-llama.html" >"$out/tune-llama.txt" 2>"$out/tune-llama.err" || true
    "$bin/llama-bench" -m "$llama" -p 1800 -n 128 -ub 512,1024,2048 -fa 0,1 -r 3 -o md >"$out/llama-bench.md" 2>&1 || true
    cat "$out/tune-llama.txt"
    tail -n 2 "$out/tune-llama.err"
    grep -E '^\|' "$out/llama-bench.md" || true
    ;;
  tune-hybrid)
    synth_models
    "$bin/1bit" tune -m "$hybrid" --try "ONEBIT_GDN_PREFILL=2" --try "ONEBIT_GDN_PREFILL=3" "${try_opts[@]}" "${bench_opts[@]}" \
      --json "$out/tune-hybrid.json" >"$out/tune-hybrid.txt" 2>"$out/tune-hybrid.err" || true
    cat "$out/tune-hybrid.txt"
    ;;
  tune-hybrid-small)
    synth_models qwen35-2b:$hybrid_small
    "$bin/1bit" tune -m "$hybrid_small" --try "ONEBIT_GDN_PREFILL=4" --try "ONEBIT_GDN_PREFILL=auto" "${try_opts[@]}" \
      "${bench_opts[@]}" --json "$out/tune-hybrid-small.json" >"$out/tune-hybrid-small.txt" 2>"$out/tune-hybrid-small.err" || true
    cat "$out/tune-hybrid-small.txt"
    tail -n 2 "$out/tune-hybrid-small.err"
    ;;
  search | confirm)
    which=${2:-llama}
    case $which in llama) model=$llama like=llama3-8b ;; hybrid) model=$hybrid like=qwen35-9b ;;
      *) echo "usage: gpu_measure.sh $stage [llama|hybrid] ..." >&2; exit 2 ;; esac
    synth_models $like:$model
    # Each goal's store lives in $OUT, so that it comes back with the command's files, and apart,
    # so that each goal's search starts from the default launch.
    goal=${3:-chat}
    export XDG_CONFIG_HOME=$out/config-$goal
    if [ $stage = search ]; then
      budget=${4:-8m}
      "$bin/1bit" tune -m "$model" --goal "$goal" --budget "$budget" --json "$out/search-$which-$goal.json" \
        --html "$out/search-$which-$goal.html" >"$out/search-$which-$goal.txt" 2>"$out/search-$which-$goal.err" || true
      cat "$out/search-$which-$goal.txt"
      grep -v '^1bit tune: \[' "$out/search-$which-$goal.err" | tail -n 5
    else
      "$bin/1bit" bench -m "$model" --config stored= --config none=--no-recipes "${bench_opts[@]}" \
        --json "$out/confirm-$which-$goal.json" >"$out/confirm-$which-$goal.txt" 2>"$out/confirm-$which-$goal.err" || true
      cat "$out/confirm-$which-$goal.txt"
      tail -n 2 "$out/confirm-$which-$goal.err"
    fi
    ;;
  shared)
    synth_models llama3-8b:$llama
    (cd build && ctest -j 4 -R 'engine_ops_q4_0_(rot_)?shared' --output-on-failure) >"$out/ctest-shared.log" 2>&1 || true
    tail -n 12 "$out/ctest-shared.log"
    md=$out/shared.md
    : >"$md"
    for round in 1 2; do
      for s in 0 1; do
        echo "ONEBIT_Q8_1_SHARED=$s, round $round" >>"$md"
        env ONEBIT_Q8_1_SHARED=$s "$bin/llama-bench" -m "$llama" -p 0 -n 128 -r 5 -fa 1 -o md 2>&1 | grep -E 'tg128|error' >>"$md" || true
        env ONEBIT_Q8_1_SHARED=$s ONEBIT_GEMV_Q4_0=auto "$bin/llama-bench" -m "$llama" -p 1,2,4,8,16 -n 0 -r 10 -fa 1 -o md 2>&1 |
          grep -E ' pp[0-9]|error' >>"$md" || true
      done
    done
    cat "$md"
    ;;
  shared-bench)
    dflash=$llama_dflash
    synth_models llama3-8b:$llama llama3-8b-dflash:$dflash
    "$bin/1bit" bench -m "$llama" --config plain-unshared=ONEBIT_Q8_1_SHARED=0 --config plain=ONEBIT_Q8_1_SHARED=1 \
      --config "dflash-15-unshared=ONEBIT_Q8_1_SHARED=0 --dflash $dflash --draft-max 15" --config "dflash-15=ONEBIT_Q8_1_SHARED=1 --dflash $dflash --draft-max 15" \
      --rounds 2 --prompt-reps 1 --decode-reps 1 --decode-tokens 64 --json "$out/shared-bench.json" >"$out/shared-bench.txt" 2>"$out/shared-bench.err" || true
    cat "$out/shared-bench.txt"
    tail -n 2 "$out/shared-bench.err"
    ;;
  timeline)
    dflash=$llama_dflash
    synth_models llama3-8b:$llama llama3-8b-dflash:$dflash
    timeline_lib
    md=$out/timeline.md
    : >"$md"
    # llama-bench's tg: the engine's decode alone, with patch 0012 and without, and without the
    # engine's programmatic dependent launch.
    for cfg in "shared=ONEBIT_Q8_1_SHARED=1" "unshared=ONEBIT_Q8_1_SHARED=0" "no-pdl=GGML_CUDA_PDL=0"; do
      name=bench-${cfg%%=*}
      env LD_PRELOAD=$tl/libtimeline.so ONEBIT_TIMELINE_OUT=$tl/$name.csv ${cfg#*=} \
        "$bin/llama-bench" -m "$llama" -p 0 -n 64 -r 1 -fa 1 >$tl/$name.log 2>&1 || tail -n 5 $tl/$name.log
      python3 dev/timeline/summary.py $tl/$name.csv --label "llama-bench tg, ${cfg#*=}" >>"$md" 2>&1 || true
    done
    for cfg in "shared=ONEBIT_Q8_1_SHARED=1" "unshared=ONEBIT_Q8_1_SHARED=0" "dflash-15=--dflash $dflash --draft-max 15"; do
      timeline_server "server-${cfg%%=*}" "${cfg#*=}" "$md"
    done
    # Two of the CSVs (a few MB compressed) and every log come back; the rest stay on the machine.
    tar -C $tl -cJf "$out/timeline-csv.tar.xz" bench-shared.csv server-shared.csv ./*.log || true
    cat "$md"
    ;;
  spec-timeline)
    dflash=$llama_dflash
    synth_models llama3-8b:$llama llama3-8b-dflash:$dflash
    timeline_lib
    md=$out/spec-timeline.md
    : >"$md"
    for cfg in "plain=" "dflash-15=--dflash $dflash --draft-max 15" "dflash-15-inv=--batch-invariant --dflash $dflash --draft-max 15" \
      "dflash-7=--dflash $dflash --draft-max 7"; do
      timeline_server "spec-${cfg%%=*}" "${cfg#*=}" "$md" --every-kind
    done
    tar -C $tl -cJf "$out/spec-timeline-logs.tar.xz" ./*.log || true
    grep -E '^### |^\| [0-9]+ \| [0-9]+ \||^Kernels of' "$md" || true
    ;;
  mmvq-pdl)
    synth_models llama3-8b:$llama
    md=$out/mmvq-pdl.md
    : >"$md"
    for round in 1 2; do
      for m in 0 1 2 3; do
        echo "ONEBIT_MMVQ_PDL=$m, round $round" >>"$md"
        env ONEBIT_MMVQ_PDL=$m "$bin/llama-bench" -m "$llama" -p 0 -n 128 -r 5 -fa 1 -o md 2>&1 | grep -E 'tg128|error' >>"$md" || true
      done
    done
    for m in 0 3 0 3; do
      echo "ONEBIT_MMVQ_PDL=$m, a verification's columns" >>"$md"
      env ONEBIT_MMVQ_PDL=$m "$bin/llama-bench" -m "$llama" -p 1,2,4,8 -n 0 -r 5 -fa 1 -o md 2>&1 | grep -E ' pp[0-9]|error' >>"$md" || true
    done
    "$bin/1bit" bench -m "$llama" --config plain= --config pdl-3=ONEBIT_MMVQ_PDL=3 --rounds 2 --prompt-reps 1 --decode-reps 1 \
      --decode-tokens 64 --json "$out/pdl-8b.json" >"$out/mmvq-pdl-bench.txt" 2>"$out/mmvq-pdl-bench.err" || true
    answers_md "$out/pdl-8b.json" >>"$md"
    cat "$md" "$out/mmvq-pdl-bench.txt"
    (cd build && ctest -R 'mmvq_pdl' --output-on-failure) >"$out/ctest-mmvq-pdl.log" 2>&1 || true
    tail -n 6 "$out/ctest-mmvq-pdl.log"
    ;;
  top-k)
    dflash=$llama_dflash
    synth_models llama3-8b:$llama llama3-8b-dflash:$dflash
    (cd build && ctest -R 'engine_ops_top_k' --output-on-failure) >"$out/ctest-top-k.log" 2>&1 || true
    tail -n 6 "$out/ctest-top-k.log"
    md=$out/top-k.md
    : >"$md"
    for s in 0 1 0 1; do
      echo "ONEBIT_TOP_K_SMALL=$s" >>"$md"
      env ONEBIT_TOP_K_SMALL=$s "$bin/engine-test-backend-ops" perf -o TOP_K -b CUDA0 -p 'ne=\[(128256|200000),' 2>/dev/null | grep -E 'us/run' >>"$md" || true
    done
    p=ONEBIT_STEP_PROFILE=1 d="--dflash $dflash"
    rm -rf "$out/top-k-logs" && mkdir -p "$out/top-k-logs"
    "$bin/1bit" bench -m "$llama" --config plain= --config "plain-profiled=$p" \
      --config "dflash-7-sort=ONEBIT_TOP_K_SMALL=0 $d --draft-max 7" --config "dflash-7=$d --draft-max 7" \
      --config "dflash-15-sort=ONEBIT_TOP_K_SMALL=0 $d --draft-max 15" --config "dflash-15=$d --draft-max 15" \
      --config "dflash-15-gemv-sort=ONEBIT_TOP_K_SMALL=0 ONEBIT_GEMV_Q4_0=auto $d --draft-max 15" \
      --config "dflash-15-gemv=ONEBIT_GEMV_Q4_0=auto $d --draft-max 15" \
      --config "dflash-15-gemv-profiled-sort=$p ONEBIT_TOP_K_SMALL=0 ONEBIT_GEMV_Q4_0=auto $d --draft-max 15" \
      --config "dflash-15-gemv-profiled=$p ONEBIT_GEMV_Q4_0=auto $d --draft-max 15" \
      --config "dflash-15-gemv-bs-profiled-sort=$p ONEBIT_TOP_K_SMALL=0 ONEBIT_GEMV_Q4_0=auto $d --draft-max 15 -- -bs" \
      --config "dflash-15-gemv-bs-profiled=$p ONEBIT_GEMV_Q4_0=auto $d --draft-max 15 -- -bs" \
      --rounds 2 --prompt-reps 1 --decode-reps 1 --decode-tokens 64 --log-dir "$out/top-k-logs" \
      --json "$out/top-k-8b.json" >"$out/top-k-bench.txt" 2>"$out/top-k-bench.err" || true
    (cd "$out/top-k-logs" && grep -H 'onebit step profile' ./*.log | sed 's/^\.\///; s/:.*onebit step profile: / /') >"$out/top-k-profile.txt" || true
    tar -C "$out" -cJf "$out/top-k-logs.tar.xz" top-k-logs && rm -rf "$out/top-k-logs"
    answers_md "$out/top-k-8b.json" >>"$md"
    cat "$md" "$out/top-k-bench.txt"
    tail -n 2 "$out/top-k-bench.err"
    ;;
  invariance)
    md=$out/invariance.md
    : >"$md"
    for sw in "" ONEBIT_BATCH_INVARIANT=1 ${INVARIANCE_MORE:+ONEBIT_GEMV_Q4_0=auto GGML_CUDA_DISABLE_FUSION=1}; do
      echo "== ${sw:-as the engine runs them}" >>"$md"
      env $sw "$bin/engine-test-backend-ops" test -o COL0_INVARIANT -b CUDA0 2>/dev/null | grep -E 'COL0_INVARIANT|tests passed' >>"$md" || true
    done
    grep -E '^==|tests passed' "$md"
    ;;
  batch-invariant)
    dflash=$llama_dflash md=$out/batch-invariant.md
    synth_models llama3-8b:$llama llama3.2-1b:$draft llama3-8b-dflash:$dflash
    inv=ONEBIT_BATCH_INVARIANT=1
    : >"$md"
    [ "${2:-}" = checks ] || {
    "$bin/1bit" bench -m "$llama" --config plain= --config "plain-inv=$inv" \
      --config "dflash-15=--dflash $dflash --draft-max 15" --config "dflash-15-inv=$inv --dflash $dflash --draft-max 15" \
      --config "draft-7-inv=$inv --draft $draft --draft-max 7" --config "dflash-7-inv=$inv --dflash $dflash --draft-max 7" \
      --rounds 1 --prompt-reps 1 --decode-reps 1 --decode-tokens 64 \
      --json "$out/invariant-8b.json" >"$out/batch-invariant-bench.txt" 2>"$out/batch-invariant-bench.err" || true
    answers_md "$out/invariant-8b.json" >"$md"
    cat "$md" "$out/batch-invariant-bench.txt"
    tail -n 2 "$out/batch-invariant-bench.err"
    }
    for sw in "" $inv "" $inv; do
      echo "== ${sw:-as the engine runs}" >>"$md"
      env $sw "$bin/llama-bench" -m "$llama" -p 1,2,8,16 -n 128 -r 5 -fa 1 -o md 2>&1 | grep -E ' (pp|tg)[0-9]+ |error' >>"$md" || true
    done
    grep -E '^==| (pp|tg)[0-9]+ ' "$md" || true
    (cd build && ctest -R 'col0_invariant|batch_invariant' --output-on-failure) >"$out/ctest-batch-invariant.log" 2>&1 || true
    tail -n 8 "$out/ctest-batch-invariant.log"
    ;;
  parity-kinds)
    # Every draft is rejected (random weights), so every token is column 0 of a verification batch.
    inv=ONEBIT_BATCH_INVARIANT=1 eagle3=/tmp/llama3-8b-eagle3-q4_0.gguf
    hybrid_mtp=/tmp/qwen35-9b-mtp-q4_0.gguf hybrid_dflash=/tmp/qwen35-9b-dflash-q4_0.gguf
    synth_models llama3-8b:$llama llama3-8b-eagle3:$eagle3 qwen35-9b-mtp:$hybrid_mtp qwen35-9b-dflash:$hybrid_dflash
    opts=(--rounds 1 --prompt-reps 1 --decode-reps 1 --decode-tokens 64)
    "$bin/1bit" bench -m "$llama" --config "plain-inv=$inv" \
      --config "eagle3-7-inv=$inv --eagle3 $eagle3 --draft-max 7" --config "eagle3-15-inv=$inv --eagle3 $eagle3 --draft-max 15" \
      --config "ngram-inv=$inv -- --spec-type ngram-mod" \
      "${opts[@]}" --json "$out/kinds-8b.json" >"$out/kinds-8b.txt" 2>"$out/kinds-8b.err" || true
    "$bin/1bit" bench -m "$hybrid_mtp" --config plain= --config "plain-inv=$inv" \
      --config "mtp-3=--mtp --draft-max 3" --config "mtp-3-inv=$inv --mtp --draft-max 3" \
      --config "mtp-7-inv=$inv --mtp --draft-max 7" --config "dflash-7-inv=$inv --dflash $hybrid_dflash --draft-max 7" \
      "${opts[@]}" --json "$out/kinds-9b.json" >"$out/kinds-9b.txt" 2>"$out/kinds-9b.err" || true
    answers_md "$out"/kinds-*.json >"$out/parity-kinds.md"
    cat "$out/parity-kinds.md" "$out/kinds-8b.txt" "$out/kinds-9b.txt"
    tail -n 2 "$out/kinds-8b.err" "$out/kinds-9b.err"
    ;;
  top-k-tax)
    synth_models llama3-8b:$llama
    dev/server_tax.sh "$llama" "${2:-2}" server: bs-sort:LLAMA_ARG_BACKEND_SAMPLING=1,ONEBIT_TOP_K_SMALL=0 \
      bs:LLAMA_ARG_BACKEND_SAMPLING=1 >"$out/top-k-tax.md" 2>&1 || true
    cat "$out/top-k-tax.md"
    ;;
  tax)
    synth_models llama3-8b:$llama
    variants=("${@:3}")
    [ ${#variants[@]} -gt 0 ] || variants=(server: pace16:ONEBIT_STREAM_PACE_MS=16 bs:LLAMA_ARG_BACKEND_SAMPLING=1 serve@serve:)
    dev/server_tax.sh "$llama" "${2:-3}" "${variants[@]}" >"$out/tax.md" 2>&1 || true
    cat "$out/tax.md"
    ;;
  parity)
    dflash=$llama_dflash m=${MODELS:-/tmp/1bit-models}
    synth_models llama3-8b:$llama llama3.2-1b:$draft llama3-8b-dflash:$dflash
    "$bin/1bit" bench -m "$llama" --config plain= \
      --config "draft-7=--draft $draft --draft-max 7" --config "draft-7-mmvq=ONEBIT_GEMV_Q4_0= --draft $draft --draft-max 7" \
      --config "dflash-7=--dflash $dflash --draft-max 7" \
      --rounds 1 --prompt-reps 1 --decode-reps 1 --decode-tokens 64 --json "$out/parity-8b.json" >"$out/parity-8b.txt" 2>"$out/parity-8b.err" || true
    if [ -f $m/1bit-tiny-32m-q8_0.gguf ]; then
      "$bin/1bit" bench -m $m/1bit-tiny-32m-q8_0.gguf --config plain= \
        --config "draft-4=--draft $m/1bit-tiny-draft-6m-q8_0.gguf --draft-max 4" \
        --rounds 1 --prompt-reps 1 --decode-reps 1 --decode-tokens 256 --json "$out/parity-tiny.json" >"$out/parity-tiny.txt" 2>"$out/parity-tiny.err" || true
    fi
    answers_md "$out"/parity-*.json >"$out/parity.md"
    cat "$out/parity.md"
    ;;
  spec)
    synth_models llama3-8b:$llama llama3.2-1b:$draft
    spec="--draft $draft --draft-max 7 --no-recipes"
    "$bin/1bit" bench -m "$llama" --config mmvq="$spec" --config auto="ONEBIT_GEMV_Q4_0=auto $spec" \
      --config v5="ONEBIT_GEMV_Q4_0=v5 $spec" --config no-draft="--no-recipes" "${bench_opts[@]}" \
      --json "$out/spec.json" >"$out/spec.txt" 2>"$out/spec.err" || true
    cat "$out/spec.txt"
    tail -n 2 "$out/spec.err"
    ;;
  spec-kinds)
    which=${2:-llama} size=${3:-real}
    case $which-$size in llama-real | hybrid-real | llama-tiny | hybrid-tiny) ;;
      *) echo "usage: gpu_measure.sh spec-kinds [llama|hybrid] [tiny]" >&2; exit 2 ;; esac
    t=/tmp/onebit-tiny
    if [ "$which" = llama ]; then
      if [ "$size" = tiny ]; then
        target=$t-llama.gguf eagle3=$t-llama-eagle3.gguf dflash=$t-llama-dflash.gguf draft=$target
        synth_models tiny-llama:$target tiny-llama-eagle3:$eagle3 tiny-llama-dflash:$dflash
      else
        target=$llama eagle3=/tmp/llama3-8b-eagle3-q4_0.gguf dflash=$llama_dflash
        synth_models llama3-8b:$target llama3.2-1b:$draft llama3-8b-eagle3:$eagle3 llama3-8b-dflash:$dflash
      fi
      configs=(--config plain=)
      for n in 2 4 7 16; do
        configs+=(--config "draft-$n=--draft $draft --draft-max $n" --config "itself-$n=--draft $target --draft-max $n"
                  --config "eagle3-$n=--eagle3 $eagle3 --draft-max $n" --config "dflash-$n=--dflash $dflash --draft-max $((n < 16 ? n : 15))")
      done
      configs+=(--config "ngram=-- --spec-type ngram-mod")
    else
      if [ "$size" = tiny ]; then
        target=$t-qwen35-mtp.gguf head=$t-qwen35-mtp-head.gguf dflash=$t-qwen35-dflash.gguf
        synth_models tiny-qwen35-mtp:$target tiny-qwen35-mtp-head:$head tiny-qwen35-dflash:$dflash
      else
        target=/tmp/qwen35-9b-mtp-q4_0.gguf head=/tmp/qwen35-9b-mtp-head-q4_0.gguf dflash=/tmp/qwen35-9b-dflash-q4_0.gguf
        synth_models qwen35-9b-mtp:$target qwen35-9b-mtp-head:$head qwen35-9b-dflash:$dflash
      fi
      configs=(--config plain=)
      for n in 2 4 7 16; do
        configs+=(--config "mtp-$n=--mtp --draft-max $n" --config "head-$n=--mtp $head --draft-max $n"
                  --config "dflash-$n=--dflash $dflash --draft-max $((n < 16 ? n : 15))")
      done
    fi
    spec_opts=(--rounds 1 --prompt-reps 1 --decode-reps 1 --decode-tokens 64)
    "$bin/1bit" bench -m "$target" "${configs[@]}" "${spec_opts[@]}" --json "$out/spec-$which.json" \
      >"$out/spec-$which.txt" 2>"$out/spec-$which.err" || true
    # What a draft model's step is held against: its own plain decode step.
    [ "$which" = llama ] && { "$bin/1bit" bench -m "$draft" --config plain= "${spec_opts[@]}" \
      --json "$out/spec-draft-plain.json" >"$out/spec-draft-plain.txt" 2>"$out/spec-draft-plain.err" || true; }
    cat "$out/spec-$which.txt"
    [ "$which" = llama ] && cat "$out/spec-draft-plain.txt"
    tail -n 2 "$out/spec-$which.err"
    ;;
  verify-cols)
    eagle3=/tmp/llama3-8b-eagle3-q4_0.gguf dflash=$llama_dflash
    synth_models llama3-8b:$llama llama3-8b-eagle3:$eagle3 llama3-8b-dflash:$dflash
    [ "${2:-}" = spec ] || {
    for v in unset v5; do
      sw=; [ $v = v5 ] && sw=ONEBIT_GEMV_Q4_0=v5
      env $sw "$bin/gemv_q4_0_driver" --bench-mode --reps 5 --variant v5 \
        --filter /normal/ >"$out/gemv-cols-$v.log" 2>&1 || true
    done
    # A verification batch of n tokens is ppN; alternating twice: small batches move by a few percent.
    for switch in "" ONEBIT_GEMV_Q4_0=auto ONEBIT_GEMV_Q4_0=v5 "" ONEBIT_GEMV_Q4_0=auto ONEBIT_GEMV_Q4_0=v5; do
      echo "== ${switch:-no switch}: pp1-pp16 on Llama 3 8B Q4_0"
      env $switch "$bin/llama-bench" -m "$llama" -p 1,2,4,8,9,10,12,14,16 -n 0 -r 10 -fa 1 -o md || echo "llama-bench failed"
    done >"$out/verify-cols.md" 2>&1
    # Every kernel of llama-bench's two 16-token batches (its warm-up and one timed run).
    for switch in "" ONEBIT_GEMV_Q4_0=v5; do
      name=${switch:+v5}
      env $switch ncu --clock-control none --metrics gpu__time_duration.sum --csv \
        "$bin/llama-bench" -m "$llama" -p 16 -n 0 -r 1 -fa 1 >"$out/ncu-pp16-${name:-unset}.csv" 2>"$out/ncu-pp16-${name:-unset}.err" || true
    done
    grep -hE '^engine_ms:.*n(1|8|9|12|16) ' "$out/gemv-cols-unset.log" | head -30 || true
    grep -hE '^case_ms:.*n(9|12|16) ' "$out/gemv-cols-unset.log" | head -20 || true
    grep -E '^==| pp[0-9]+ |failed' "$out/verify-cols.md" || true
    }
    spec_opts=(--rounds 2 --prompt-reps 1 --decode-reps 1 --decode-tokens 64)
    "$bin/1bit" bench -m "$llama" --config plain= \
      --config "dflash-7=--dflash $dflash --draft-max 7" --config "dflash-7-auto=ONEBIT_GEMV_Q4_0=auto --dflash $dflash --draft-max 7" \
      --config "dflash-15=--dflash $dflash --draft-max 15" --config "dflash-15-v5=ONEBIT_GEMV_Q4_0=v5 --dflash $dflash --draft-max 15" \
      --config "eagle3-7=--eagle3 $eagle3 --draft-max 7" --config "eagle3-7-auto=ONEBIT_GEMV_Q4_0=auto --eagle3 $eagle3 --draft-max 7" \
      --config "eagle3-15=--eagle3 $eagle3 --draft-max 15" --config "eagle3-15-v5=ONEBIT_GEMV_Q4_0=v5 --eagle3 $eagle3 --draft-max 15" \
      "${spec_opts[@]}" --json "$out/verify-spec.json" >"$out/verify-spec.txt" 2>"$out/verify-spec.err" || true
    cat "$out/verify-spec.txt"
    tail -n 2 "$out/verify-spec.err"
    ;;
  step-profile)
    eagle3=/tmp/llama3-8b-eagle3-q4_0.gguf dflash=$llama_dflash
    p=ONEBIT_STEP_PROFILE=1 rounds=1
    configs=(--config plain= --config "plain-profiled=$p")
    if [ "${2:-}" = kv ]; then
      synth_models llama3-8b:$llama llama3.2-1b:$draft
      rounds=2
      configs+=(--config "plain-full-sampling-unprofiled=ONEBIT_SAMPLING_FULL=1")
      configs+=(--config "draft-7=$p --draft $draft --draft-max 7" --config "itself-7=$p --draft $llama --draft-max 7"
                --config "draft-7-decoded-again=$p ONEBIT_DRAFT_REEVAL=1 --draft $draft --draft-max 7"
                --config "itself-7-decoded-again=$p ONEBIT_DRAFT_REEVAL=1 --draft $llama --draft-max 7"
                --config "plain-full-sampling=$p ONEBIT_SAMPLING_FULL=1")
    else
      synth_models llama3-8b:$llama llama3.2-1b:$draft llama3-8b-eagle3:$eagle3 llama3-8b-dflash:$dflash
      for n in 3 7 15; do configs+=(--config "dflash-$n=$p --dflash $dflash --draft-max $n"); done
      configs+=(--config "eagle3-7=$p --eagle3 $eagle3 --draft-max 7" --config "eagle3-15=$p --eagle3 $eagle3 --draft-max 15"
              --config "draft-7=$p --draft $draft --draft-max 7" --config "itself-7=$p --draft $llama --draft-max 7"
              --config "draft-7-decoded-again=$p ONEBIT_DRAFT_REEVAL=1 --draft $draft --draft-max 7"
              --config "itself-7-decoded-again=$p ONEBIT_DRAFT_REEVAL=1 --draft $llama --draft-max 7"
              --config "dflash-15-bs=$p --dflash $dflash --draft-max 15 -- -bs"
              --config "dflash-15-cpu-draft-sampling=$p --dflash $dflash --draft-max 15 -- --no-spec-draft-backend-sampling"
              --config "dflash-15-unprofiled=--dflash $dflash --draft-max 15" --config "eagle3-7-unprofiled=--eagle3 $eagle3 --draft-max 7")
    fi
    rm -rf "$out/step-logs" && mkdir -p "$out/step-logs"
    # The engine's own decode on the same file, before and after: what the server adds to a step.
    tg() { "$bin/llama-bench" -m "$llama" -p 0 -n 128 -r 5 -fa 1 -o md 2>&1 | grep -E 'tg128|error' || echo "llama-bench failed"; }
    tg >"$out/step-tg128.md"
    "$bin/1bit" bench -m "$llama" "${configs[@]}" --rounds $rounds --prompt-reps 1 --decode-reps 1 --decode-tokens 64 \
      --log-dir "$out/step-logs" --json "$out/step-profile.json" >"$out/step-profile-bench.txt" 2>"$out/step-profile.err" || true
    tg >>"$out/step-tg128.md"
    (cd "$out/step-logs" && grep -H 'onebit step profile' ./*.log | sed 's/^\.\///; s/:.*onebit step profile: / /') >"$out/step-profile.txt" || true
    cat "$out/step-tg128.md" "$out/step-profile-bench.txt" "$out/step-profile.txt"
    tail -n 2 "$out/step-profile.err"
    ;;
  rotate)
    vocab=/tmp/onebit-vocab m=${MODELS:-/tmp/1bit-models}
    [ -d $vocab ] || { mkdir -p $vocab && tar -C $vocab -xJf .carry/vocab.tar.xz; }
    shift
    [ $# -gt 0 ] || set -- llama3-8b qwen35-9b
    (cd build && ctest -R engine_ops_q4_0_rot --output-on-failure) >"$out/ctest-rotate.log" 2>&1 || true
    tail -n 12 "$out/ctest-rotate.log"
    CUDA_UNFUSED=1 VOCAB_DIR=$vocab WORK=/tmp/onebit-rotate dev/rotate_measure.sh "$out" "$@" || true
    if [ -f $m/1bit-tiny-32m-q8_0.gguf ]; then
      prefix=$(dirname "$(dirname "$(readlink -f "$bin/llama-server")")")
      bash tests/engine_rotate_test.sh "$bin/1bit" "$prefix" $m/1bit-tiny-32m-q8_0.gguf models/licenses/Python-3.11.txt >"$out/rotate-quality.txt" 2>&1 || true
      cat "$out/rotate-quality.txt"
    fi
    ;;
  small-pair)
    which=${2:-small} m=${MODELS:-/tmp/1bit-models}
    case $which in
      small) target=$m/1bit-small-145m-q4_0.gguf draft=$m/1bit-small-draft-19m-q8_0.gguf dflash=$m/1bit-small-dflash-25m-q8_0.gguf ;;
      tiny) target=$m/1bit-tiny-32m-q8_0.gguf draft=$m/1bit-tiny-draft-6m-q8_0.gguf dflash= ;;
      *) echo "usage: gpu_measure.sh small-pair [small|tiny]" >&2; exit 2 ;;
    esac
    configs=(--config plain=)
    for n in 2 3 4 7; do configs+=(--config "draft-$n=--draft $draft --draft-max $n"); done
    if [ -n "$dflash" ]; then
      for n in 3 7 15; do configs+=(--config "dflash-$n=--dflash $dflash --draft-max $n"); done
    fi
    configs+=(--config "ngram=-- --spec-type ngram-mod")
    "$bin/1bit" bench -m "$target" "${configs[@]}" --rounds 2 --prompt-reps 1 --decode-reps 1 --decode-tokens 256 \
      --json "$out/pair-$which.json" --html "$out/pair-$which.html" >"$out/pair-$which.txt" 2>"$out/pair-$which.err" || true
    cat "$out/pair-$which.txt"
    tail -n 2 "$out/pair-$which.err"
    ;;
  rpc)
    synth_models llama3-8b:$llama llama3.2-1b:$draft
    ROUNDS=1 dev/rpc_measure.sh "$out/rpc-gpu" "$llama" "gpu=" "gpu-and-cpu-worker=--rpc @W1" \
      "gpu-and-cpu-worker-1-8=--rpc @W1 -ts 7,1" || echo "rpc: the GPU run failed"
    ROUNDS=1 dev/rpc_measure.sh "$out/rpc-cpu" "$draft" "cpu=--device cpu" "cpu-two-workers=--device cpu --rpc @W1,@W2" ||
      echo "rpc: the CPU run failed"
    ;;
  vulkan)
    synth_models llama3-8b:$llama
    md=$out/vulkan.md err=$out/vulkan.err vk=/tmp/onebit-vk
    : >"$md"
    : >"$err"
    # The loader and libglvnd (Debian 12's libvulkan1, libglvnd0, libgl1, ... carried in .gl/):
    # the NVIDIA driver's Vulkan ICD is its libGLX_nvidia, which needs libglvnd's dispatch
    # library; with the loader alone the engine lists no Vulkan device.
    for f in .gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done
    ldconfig
    ldconfig -p | grep libvulkan >/dev/null || echo "vulkan: no libvulkan on this machine, and none in .gl/" >>"$err"
    # Each carried build, unpacked to $vk/NAME/{bin,lib}: llama-bench-vulkan (Debian 12's glslc
    # and headers: no cooperative matrices, no integer dot product) and, where carried,
    # llama-bench-vulkan-full (Debian 13's glslc and headers: coopmat, NV coopmat2, integer dot; no bf16).
    vks=()
    for t in .carry/vulkan/llama-bench-vulkan*.tar.xz; do
      [ -f "$t" ] || continue
      name=$(basename "$t" .tar.xz)
      rm -rf "${vk:?}/$name" && mkdir -p "$vk/$name"
      if tar -C "$vk/$name" -xJf "$t" && [ -x "$vk/$name/bin/llama-bench" ]; then
        vks+=("$name")
        cat "$vk/$name/BUILD.txt" >>"$err" 2>/dev/null || true
      else
        echo "vulkan: $t did not unpack to bin/llama-bench" >>"$err"
      fi
    done
    [ ${#vks[@]} -gt 0 ] || echo "vulkan: no Vulkan llama-bench in .carry/vulkan/" >>"$err"
    # vkrun SECONDS NAME ARGS...: one carried build, with the libgomp it brought, under a timeout.
    vkrun() {
      local t=$1 d=$vk/$2
      shift 2
      LD_LIBRARY_PATH=$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout "$t" "$d/bin/llama-bench" "$@"
    }
    # The devices the builds see; with none, the NVIDIA driver's ICD file named outright.
    list_devices() {
      local name
      for name in "${vks[@]}"; do
        echo "== $name --list-devices${VK_DRIVER_FILES:+ (VK_DRIVER_FILES=$VK_DRIVER_FILES)}"
        vkrun 120 "$name" --list-devices 2>&1 || echo "vulkan: $name --list-devices: exit $?"
      done
    }
    if [ ${#vks[@]} -gt 0 ]; then
      devs=$(list_devices)
      echo "$devs" >>"$err"
      if ! grep -q 'Vulkan[0-9]' <<<"$devs"; then
        for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
                   /etc/vulkan/icd.d/nvidia_icd.json; do
          [ -f "$icd" ] && { export VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd; break; }
        done
        if [ -n "${VK_DRIVER_FILES:-}" ]; then
          devs=$(list_devices)
          echo "$devs" >>"$err"
        else
          echo "vulkan: no Vulkan device, and no nvidia_icd.json to name" >>"$err"
        fi
      fi
      # Why no device, if none: the ICD files and the driver's Vulkan libraries.
      ls -l /usr/local/nvidia/share/vulkan/icd.d /usr/share/vulkan/icd.d /etc/vulkan/icd.d >>"$err" 2>&1 || true
      ldconfig -p | grep -E 'libvulkan|libGLX_nvidia|libnvidia-(glvkspirv|gpucomp|glcore)' >>"$err" 2>&1 || true
    fi
    # Only the builds that see a GPU: with no Vulkan device, llama-bench runs on the CPU and still
    # names the backend Vulkan.
    run_vks=()
    for name in "${vks[@]}"; do
      if vkrun 120 "$name" --list-devices 2>/dev/null | grep '^ *Vulkan0:' >/dev/null; then
        run_vks+=("$name")
      else
        echo "vulkan: $name sees no Vulkan device: not run" | tee -a "$err" >>"$md"
      fi
    done
    [ -x "$bin/llama-bench" ] || echo "vulkan: no CUDA llama-bench in $bin (run the build stage first)" >>"$err"
    # CUDA and each Vulkan build alternating, twice: runs move by a few percent between rounds.
    # A Vulkan run that fails or hangs (the first also compiles the driver's pipelines) is
    # recorded, and the rest go on.
    # One device each (-dev), so that a machine with several GPUs measures one of them.
    opts=(-m "$llama" -p 512 -n 128 -r 5 -fa 1 -ngl 99 -o md)
    for round in 1 2; do
      if [ -x "$bin/llama-bench" ]; then
        echo "== round $round: CUDA" | tee -a "$err" >>"$md"
        timeout 240 "$bin/llama-bench" "${opts[@]}" -dev CUDA0 >>"$md" 2>>"$err" || echo "llama-bench failed (exit $?)" | tee -a "$err" >>"$md"
      fi
      for name in "${run_vks[@]}"; do
        echo "== round $round: Vulkan ($name)" | tee -a "$err" >>"$md"
        vkrun 300 "$name" "${opts[@]}" -dev Vulkan0 >>"$md" 2>>"$err" || echo "llama-bench failed (exit $?)" | tee -a "$err" >>"$md"
      done
    done
    grep -E '^ *Vulkan[0-9]:|^vulkan:' "$err" | sort -u || true
    grep -m 2 -E '^ggml_vulkan: [0-9]' "$err" || true
    grep -E '^==| (pp|tg)[0-9]+ |failed' "$md" || true
    ;;
  decode)
    synth_models llama3-8b:$llama
    # Plain decode with the gemv switch off and auto, alternating, with the engine's CUDA graphs
    # and without them (a kernel that breaks graph capture shows as a gap only in the first).
    for graphs in "" GGML_CUDA_DISABLE_GRAPHS=1; do
      for switch in "" ONEBIT_GEMV_Q4_0=auto "" ONEBIT_GEMV_Q4_0=auto; do
        echo "== ${graphs:-graphs on}, ${switch:-no switch}: tg128 on Llama 3 8B Q4_0"
        env $graphs $switch "$bin/llama-bench" -m "$llama" -p 0 -n 128 -r 10 -fa 1 -o md || echo "llama-bench failed"
      done
    done >"$out/decode.md" 2>&1
    # Every kernel of a few decode steps, after llama-bench's warm-up (cold-L2 replays).
    for switch in "" ONEBIT_GEMV_Q4_0=auto; do
      name=${switch:+auto}
      env $switch ncu --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 3000 --launch-count 1500 \
        "$bin/llama-bench" -m "$llama" -p 0 -n 32 -r 1 -fa 1 >"$out/ncu-decode-${name:-none}.csv" 2>"$out/ncu-decode-${name:-none}.err" || true
    done
    grep -E '^==| tg128 |failed' "$out/decode.md" || true
    wc -l "$out"/ncu-decode-*.csv
    ;;
  *)
    echo "gpu_measure.sh: unknown stage $stage" >&2
    exit 2
    ;;
esac
