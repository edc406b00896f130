// v3 to v5 of the GEMV: v2's int8 mma fed by a cp.async ring (staged.cuh), in the CTA shapes and
// ring depths the engine dispatches; v5 also takes 9-16 columns, on two column tiles, and
// v5-narrow is v5 in 16-row CTAs (the same sums a row: it takes v5's one-column products where
// the engine needs them bit for bit as v5's).
#include "kernel.cuh"
#include "staged.cuh"

namespace gemv {

cudaError_t gemv_v3(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                    int cols, cudaStream_t stream) {
  return staged::launch<1, 4, false>(w, x, x_stride, out, rows, k, cols, stream);
}

cudaError_t gemv_v3_wide(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                         int64_t k, int cols, cudaStream_t stream) {
  return staged::launch<2, 4, false>(w, x, x_stride, out, rows, k, cols, stream);
}

cudaError_t gemv_v3_tall(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                         int64_t k, int cols, cudaStream_t stream) {
  return staged::launch<4, 2, false>(w, x, x_stride, out, rows, k, cols, stream);
}

cudaError_t gemv_v4(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                    int cols, cudaStream_t stream) {
  return staged::launch<1, 4, true>(w, x, x_stride, out, rows, k, cols, stream);
}

cudaError_t gemv_v4_wide(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                         int64_t k, int cols, cudaStream_t stream) {
  return staged::launch<2, 4, true>(w, x, x_stride, out, rows, k, cols, stream);
}

cudaError_t gemv_v5_narrow(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                           int64_t k, int cols, cudaStream_t stream) {
  return staged::launch<1, 2, true>(w, x, x_stride, out, rows, k, cols, stream);
}

cudaError_t gemv_v5(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                    int cols, cudaStream_t stream) {
  if (cols <= 8) return staged::launch<2, 2, true>(w, x, x_stride, out, rows, k, cols, stream);
  return staged::launch<2, 2, true, 2>(w, x, x_stride, out, rows, k, cols, stream);
}

}  // namespace gemv
