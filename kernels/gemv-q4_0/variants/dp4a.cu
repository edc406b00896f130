// v1, v1-batch4: dp4a, a warp per row. Lost to MMVQ: 21.8 / 71.5 and 24.6 / 102.4 us against 17.4 / 36.1.
// (H200, 4096 x 14336, 1 / 8 columns, 2026-11-30.) Its cost grows with the column count: each
// column re-reads activations per row and the lanes hold 8 partial sums (program.md).
//
// The first form of the GEMV: one warp per weight row; the lanes walk the row's 32-value blocks
// in steps of 32 (consecutive lanes, consecutive blocks: the warp's weight loads are contiguous),
// each lane keeping one partial sum per column, so every weight block is read once whatever the
// column count. Per block and column the dot product is exact in integers: the nibbles are
// unpacked, 8 subtracted bytewise (q4_device.cuh), and signed dp4a accumulates (q_w - 8) * q_a;
// one float multiply by d_w * d_a adds it in. A warp reduction per column ends the row.
#include <cuda_fp16.h>

#include "../kernel.cuh"
#include "../q4_device.cuh"
#include "device.cuh"
#include "variants.h"

namespace gemv {
namespace {

// One block of a row against every column: the exact integer dot product, then one multiply-add.
template <int kCols>
__device__ __forceinline__ void add_block(float (&acc)[kCols], const BlockQ4_0& wb, const BlockQ8_1* x,
                                          int64_t x_stride, int64_t b) {
  const float dw = half_bits(wb.d);
  int lo[4], hi[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int v = quants_at(wb.qs, i);
    lo[i] = low_minus_8(v);   // elements 4i..4i+3
    hi[i] = high_minus_8(v);  // elements 16+4i..
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    const BlockQ8_1* xb = x + c * x_stride + b;
    const int* xq = reinterpret_cast<const int*>(xb->qs);
    int sumi = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      sumi = __dp4a(lo[i], xq[i], sumi);
      sumi = __dp4a(hi[i], xq[4 + i], sumi);
    }
    acc[c] += dw * half_bits(xb->d) * static_cast<float>(sumi);
  }
}

// kBatch blocks a lane are loaded before any is used, so that many loads are in flight per lane
// (v1: one; v1-batch4: four).
template <int kCols, int kBatch>
__global__ void __launch_bounds__(128) gemv_kernel(const BlockQ4_0* __restrict__ w, const BlockQ8_1* __restrict__ x,
                                                   int64_t x_stride, float* __restrict__ out, int64_t rows,
                                                   int64_t nb) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * 4 + threadIdx.y;
  if (row >= rows) return;
  const int lane = threadIdx.x;
  const BlockQ4_0* wr = w + row * nb;
  float acc[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) acc[c] = 0.0f;

  for (int64_t b0 = lane; b0 < nb; b0 += 32 * kBatch) {
    BlockQ4_0 batch[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i)
      if (b0 + 32 * i < nb) batch[i] = wr[b0 + 32 * i];
#pragma unroll
    for (int i = 0; i < kBatch; ++i)
      if (b0 + 32 * i < nb) add_block<kCols>(acc, batch[i], x, x_stride, b0 + 32 * i);
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    float v = acc[c];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0) out[c * rows + row] = v;
  }
}

template <int kBatch>
cudaError_t run(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                int cols, cudaStream_t stream) {
  if (k % kBlock != 0 || cols < 1 || cols > 8 || rows < 1) return cudaErrorInvalidValue;
  const dim3 block(32, 4);
  const dim3 grid(static_cast<unsigned>((rows + 3) / 4));
  const int64_t nb = k / kBlock;
  using Kernel = void (*)(const BlockQ4_0*, const BlockQ8_1*, int64_t, float*, int64_t, int64_t);
  static constexpr Kernel kernels[8] = {gemv_kernel<1, kBatch>, gemv_kernel<2, kBatch>, gemv_kernel<3, kBatch>,
                                        gemv_kernel<4, kBatch>, gemv_kernel<5, kBatch>, gemv_kernel<6, kBatch>,
                                        gemv_kernel<7, kBatch>, gemv_kernel<8, kBatch>};
  const Kernel kernel = kernels[cols - 1];
  LAUNCH(kernel, grid, block, 0, stream, w, x, x_stride, out, rows, nb);
  return cudaGetLastError();
}

}  // namespace

cudaError_t gemv_v1(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                    int cols, cudaStream_t stream) {
  return run<1>(w, x, x_stride, out, rows, k, cols, stream);
}

cudaError_t gemv_v1_batch4(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                           int64_t k, int cols, cudaStream_t stream) {
  return run<4>(w, x, x_stride, out, rows, k, cols, stream);
}

}  // namespace gemv
