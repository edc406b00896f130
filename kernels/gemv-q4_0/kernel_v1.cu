// Version 1 of the GEMV (the starting point of the campaign, see program.md): one warp per weight row; the
// lanes walk the row's 32-value blocks in steps of 32 (consecutive lanes, consecutive blocks: the
// warp's weight loads are contiguous), each lane keeping one partial sum per column, so every
// weight block is read once whatever the column count. Per block and column the dot product is
// exact in integers: the nibbles are unpacked, 8 subtracted bytewise (__vsubss4), and signed
// dp4a accumulates (q_w - 8) * q_a; one float multiply by d_w * d_a adds it in. A warp
// reduction per column ends the row.
#include <cuda_fp16.h>

#include "device.cuh"
#include "kernel.cuh"

namespace gemv {
namespace {

// A Q4_0 block is 18 bytes, so its quants are only 2-byte aligned: read them as halves.
__device__ __forceinline__ int load_q4(const uint8_t* qs, int i) {
  const uint16_t* p = reinterpret_cast<const uint16_t*>(qs) + 2 * i;
  return static_cast<int>(p[0] | (static_cast<uint32_t>(p[1]) << 16));
}

template <int kCols>
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

  for (int64_t b = lane; b < nb; b += 32) {
    const BlockQ4_0 wb = wr[b];
    const float dw = __half2float(__ushort_as_half(wb.d));
    int lo[4], hi[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int v = load_q4(wb.qs, i);
      lo[i] = __vsubss4(v & 0x0F0F0F0F, 0x08080808);         // elements 4i..4i+3, minus 8
      hi[i] = __vsubss4((v >> 4) & 0x0F0F0F0F, 0x08080808);  // elements 16+4i.., minus 8
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
      acc[c] += dw * __half2float(__ushort_as_half(xb->d)) * static_cast<float>(sumi);
    }
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    float v = acc[c];
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0) out[c * rows + row] = v;
  }
}

template <int kCols>
void launch(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
            cudaStream_t stream) {
  const dim3 block(32, 4);
  const dim3 grid(static_cast<unsigned>((rows + 3) / 4));
  LAUNCH(gemv_kernel<kCols>, grid, block, 0, stream, w, x, x_stride, out, rows, k / kBlock);
}

}  // namespace

cudaError_t gemv_v1(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                    int cols, cudaStream_t stream) {
  if (k % kBlock != 0 || cols < 1 || cols > 8 || rows < 1) return cudaErrorInvalidValue;
  switch (cols) {
    case 1: launch<1>(w, x, x_stride, out, rows, k, stream); break;
    case 2: launch<2>(w, x, x_stride, out, rows, k, stream); break;
    case 3: launch<3>(w, x, x_stride, out, rows, k, stream); break;
    case 4: launch<4>(w, x, x_stride, out, rows, k, stream); break;
    case 5: launch<5>(w, x, x_stride, out, rows, k, stream); break;
    case 6: launch<6>(w, x, x_stride, out, rows, k, stream); break;
    case 7: launch<7>(w, x, x_stride, out, rows, k, stream); break;
    default: launch<8>(w, x, x_stride, out, rows, k, stream); break;
  }
  return cudaGetLastError();
}

}  // namespace gemv
