// The gdn-prefill kernel: GGML_OP_GATED_DELTA_NET (scalar gate) in chunked form for sm_90. Same
// inputs, outputs and layouts as the engine op (problem.h); strides are in floats, so the engine
// can pass its tensors as they are (rows of q, k and v must be contiguous).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace gdn {

struct GdnArgs {
  const float *q, *k, *v, *g, *beta, *state;
  float* out;                     // attn [S, Hv, T, B]
  float* state_out;               // snapshot slot 0: [S, S, Hv, B]; the op's own output puts it
                                  // right after attn, the engine's cache fusion elsewhere
  int64_t slot_stride;            // floats between snapshot slots (used when K > 1)
  int S, Hv, Hk;                  // S is 64 or 128
  int64_t T;
  int B, Bqk;                     // sequences of v; of q and k (B is a multiple of Bqk)
  int K;                          // snapshot slots
  int64_t q_head, q_token, q_seq;  // strides of q in floats
  int64_t k_head, k_token, k_seq;
  int64_t v_head, v_token, v_seq;
  int64_t state_seq;              // floats between sequences of the incoming state
};

// Whether the kernel handles these arguments (head size, heads, sequences).
bool gdn_prefill_supported(const GdnArgs& a);
enum class Variant {
  kSimt,              // v1: every product in float32 SIMT arithmetic
  kTensorCores,       // v2: the matrix products on TF32 tensor cores, 3xTF32 for float accuracy
  kTensorCoresSplit,  // v3: v2 with the state and U kept split into TF32 parts, two prep CTAs per
                      // SM, snapshots on tensor cores
  kOutputApart,       // v4: v3 with the attention output computed apart from the scan, by a
                      // kernel that starts while the scan runs, and the scan on 16-column tiles
  kWgmma,             // v5: v4 with the scan's products on wgmma (sm_90a builds only: elsewhere
                      // its scan traps)
  kPrepAlongside,     // v6: v3 with prep running beside the scan (one CTA per SM, in the shared
                      // memory the scan leaves), handing over chunk by chunk through ready flags
  kLookAhead,         // v7: v4's split with a look-ahead scan: each chunk's U computed a step early
                      // from the state and U before the update (program.md, idea 1)
  kPairChains,        // v8: v3 with the scan's 32 columns as two chains of 16 on two warp groups
                      // with barriers of their own (program.md, idea 8)
  kPairChainsStaggered,  // v9: v8 with the second group started a phase after the first
  kFolded,            // v10: v3 with prep folding its transform into P and the state update's
                      // operand, so that it writes neither W nor U' and the scan reads K and V
};
constexpr Variant kVariants[] = {Variant::kSimt,          Variant::kTensorCores, Variant::kTensorCoresSplit,
                                 Variant::kOutputApart,   Variant::kWgmma,       Variant::kPrepAlongside,
                                 Variant::kLookAhead,     Variant::kPairChains,
                                 Variant::kPairChainsStaggered, Variant::kFolded};
inline const char* variant_name(Variant v) {
  switch (v) {
    case Variant::kSimt: return "v1";
    case Variant::kTensorCores: return "v2";
    case Variant::kTensorCoresSplit: return "v3";
    case Variant::kOutputApart: return "v4";
    case Variant::kWgmma: return "v5";
    case Variant::kPrepAlongside: return "v6";
    case Variant::kLookAhead: return "v7";
    case Variant::kPairChains: return "v8";
    case Variant::kPairChainsStaggered: return "v9";
    case Variant::kFolded: return "v10";
  }
  return "?";
}

// The variant ONEBIT_GDN_PREFILL=auto runs on a GPU of sm_count SMs: v4 where v3's scan (a CTA for
// every 32 value columns of each head and sequence, one an SM) would leave half of the SMs or more
// without one, v3 elsewhere. v4's scan CTAs take 16 columns, two an SM, and its output kernel
// runs beside them: with SMs to spare that wins; with the SMs full, v3's single pass does. On the
// H200 (132 SMs) at 1024 tokens (program.md, fifteenth session): v4 faster with 16, 32 and 64 v3
// CTAs (4, 8, 16 heads at d128; 32 heads at d64), v3 with 96 and more (24, 32, 48 heads at d128).
inline Variant auto_variant(const GdnArgs& a, int sm_count) {
  const int64_t v3_ctas = int64_t{a.B} * a.Hv * (a.S / 32);
  return 2 * v3_ctas <= sm_count ? Variant::kOutputApart : Variant::kTensorCoresSplit;
}

// Device scratch a variant needs for these arguments (per-chunk W, U', P and log-gates; v4, v5 and
// v7 also each chunk's starting state; v6 a ready flag per chunk; v7 each chunk's M).
size_t gdn_prefill_scratch_bytes(const GdnArgs& a, Variant v);

// Runs the op on `stream`; `scratch` holds gdn_prefill_scratch_bytes(a, v) bytes,
// 16-byte aligned (cudaMalloc's and ggml's pools are).
cudaError_t gdn_prefill(const GdnArgs& a, void* scratch, cudaStream_t stream, Variant v = Variant::kSimt);

}  // namespace gdn
