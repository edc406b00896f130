// v2-wide, v5-narrow: v2 and v5 in other CTA shapes. H200, 4096 x 14336, 1 / 8 columns: 46.1 / 49.0, 17.3 / 24.8 us.
// Measured 2026-11-30. v2-wide (32 rows a CTA, activations read half as often) against v2's
// 37.3 / 45.7 us; v5-narrow (16 rows a CTA) against v5's 19.7 / 20.5, at 1 column level with the
// engine's MMVQ (17.4 us, timed with its activation quantization, which inside the engine ours
// pays too) and slower than v5 from 2 columns on.
#include "../kernel.cuh"
#include "../mma.cuh"
#include "../staged.cuh"
#include "variants.h"

namespace gemv {

cudaError_t gemv_v2_wide(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                         int64_t k, int cols, cudaStream_t stream) {
  return launch<2, 4>(w, x, x_stride, out, rows, k, cols, stream);
}

cudaError_t gemv_v5_narrow(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                           int64_t k, int cols, cudaStream_t stream) {
  return staged::launch<1, 2, true>(w, x, x_stride, out, rows, k, cols, stream);
}

}  // namespace gemv
