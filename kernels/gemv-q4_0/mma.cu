// v2 of the GEMV: int8 tensor cores, 16 rows a CTA, k split over its 8 warps (mma.cuh).
#include "kernel.cuh"
#include "mma.cuh"

namespace gemv {

cudaError_t gemv_v2(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                    int cols, cudaStream_t stream) {
  return launch<1, 8>(w, x, x_stride, out, rows, k, cols, stream);
}

}  // namespace gemv
