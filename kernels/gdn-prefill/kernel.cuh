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

// The variants, as ONEBIT_GDN_PREFILL=1 to 4 name them in the engine.
enum class Variant {
  kSimt,              // v1: every product in float32 SIMT arithmetic
  kTensorCores,       // v2: the matrix products on TF32 tensor cores, 3xTF32 for float accuracy
  kTensorCoresSplit,  // v3: v2 with the state and U kept split into TF32 parts, two prep CTAs per
                      // SM, snapshots on tensor cores
  kOutputApart,       // v4: v3 with the attention output computed apart from the scan, by a
                      // kernel that starts while the scan runs, and the scan on 16-column tiles
};
inline const char* variant_name(Variant v) {
  switch (v) {
    case Variant::kSimt: return "v1";
    case Variant::kTensorCores: return "v2";
    case Variant::kTensorCoresSplit: return "v3";
    case Variant::kOutputApart: return "v4";
  }
  return "?";
}

// The variant ONEBIT_GDN_PREFILL=auto runs on a GPU of sm_count SMs: v4 where v3's scan (a CTA for
// every 32 value columns of each head and sequence, one an SM) would leave half of the SMs or more
// without one, v3 elsewhere. v4's scan CTAs take 16 columns, two an SM, and its output kernel
// runs beside them: with SMs to spare that wins; with the SMs full, v3's single pass does. On the
// H200 (132 SMs) at 1024 tokens (program.md, measured 2026-12-01): v4 faster with 16, 32 and 64
// v3 CTAs (4, 8, 16 heads at d128; 32 heads at d64), v3 with 96 and more (24, 32, 48 heads at d128).
inline Variant auto_variant(const GdnArgs& a, int sm_count) {
  const int64_t v3_ctas = int64_t{a.B} * a.Hv * (a.S / 32);
  return 2 * v3_ctas <= sm_count ? Variant::kOutputApart : Variant::kTensorCoresSplit;
}

// Device scratch a variant needs for these arguments (per-chunk W, U', P and log-gates; v4 also
// each chunk's starting state and ready counters).
size_t gdn_prefill_scratch_bytes(const GdnArgs& a, Variant v);

// Runs the op on `stream`; `scratch` holds gdn_prefill_scratch_bytes(a, v) bytes,
// 16-byte aligned (cudaMalloc's and ggml's pools are).
cudaError_t gdn_prefill(const GdnArgs& a, void* scratch, cudaStream_t stream, Variant v = Variant::kSimt);

}  // namespace gdn
