// v2-wide: v2 in another CTA shape. H200, 4096 x 14336, 1 / 8 columns: 46.1 / 49.0 us (measured
// 2026-11-30) against v2's 37.3 / 45.7 us: 32 rows a CTA read the activations half as often, but
// the wider CTA cost more than that saved. (v5-narrow, tried in the same run, now ships in
// staged.cu: 17.3 / 24.8 us against v5's 19.7 / 20.5.)
#include "../kernel.cuh"
#include "../mma.cuh"
#include "variants.h"

namespace gemv {

cudaError_t gemv_v2_wide(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                         int64_t k, int cols, cudaStream_t stream) {
  return launch<2, 4>(w, x, x_stride, out, rows, k, cols, stream);
}

}  // namespace gemv
