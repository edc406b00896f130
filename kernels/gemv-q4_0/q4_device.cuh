// Device helpers the GEMV variants share: reading a Q4_0 block's 2-byte-aligned quants and f16
// scales, and turning nibbles into the signed bytes the integer dot products take.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "blocks.h"
#include "device.cuh"

namespace gemv {

// Bytes 4i..4i+3 of a block's quants. A Q4_0 block is 18 bytes, so they are only 2-byte aligned:
// two halves.
__device__ __forceinline__ int quants_at(const uint8_t* qs, int i) {
  const uint16_t* p = reinterpret_cast<const uint16_t*>(qs) + 2 * i;
  return static_cast<int>(p[0] | (static_cast<uint32_t>(p[1]) << 16));
}

__device__ __forceinline__ float half_bits(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }

// Four bytes 0..15 minus 8, as signed bytes: adding 0x78 cannot carry out of a byte, and the
// xor with 0x80 turns 0x78..0x87 into -8..7. Two instructions; __vsubss4, which saturates, is a
// dozen on sm_90.
__device__ __forceinline__ int nibbles_minus_8(int v) {
  return static_cast<int>((static_cast<uint32_t>(v) + 0x78787878u) ^ 0x80808080u);
}
// Low and high nibbles of four quant bytes (elements 4i.. and 16+4i..), minus 8.
__device__ __forceinline__ int low_minus_8(int v) { return nibbles_minus_8(v & 0x0F0F0F0F); }
__device__ __forceinline__ int high_minus_8(int v) { return nibbles_minus_8((v >> 4) & 0x0F0F0F0F); }

// One Q4_0 block of a 16-row tile times 8 activation columns on one int8 mma.m16n8k32, whose
// int32 result is exact, then one float multiply-add per (row, column) with the two scales. In
// the PTX fragment layout (g = lane / 4, t = lane % 4): wq_top and wq_bottom are this lane's quant
// bytes 4t..4t+3 of rows g and g + 8, dw_* their scales; xq the activation fragment of column g,
// xd0 and xd1 the scales of columns 2t and 2t + 1. acc holds (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1).
__device__ __forceinline__ void add_block_mma(float (&acc)[4], int wq_top, int wq_bottom, float dw_top, float dw_bottom,
                                              const int (&xq)[2], float xd0, float xd1) {
  const int zero[4] = {0, 0, 0, 0};
  int c[4];
  mma_s8_m16n8k32(c, low_minus_8(wq_top), low_minus_8(wq_bottom), high_minus_8(wq_top), high_minus_8(wq_bottom),
                  xq[0], xq[1], zero);
  acc[0] += static_cast<float>(c[0]) * (dw_top * xd0);
  acc[1] += static_cast<float>(c[1]) * (dw_top * xd1);
  acc[2] += static_cast<float>(c[2]) * (dw_bottom * xd0);
  acc[3] += static_cast<float>(c[3]) * (dw_bottom * xd1);
}

// Ends a CTA whose kWarps warps each summed part of k for the same 16 * kTiles rows from row0:
// the warps' tiles (add_block_mma's layout) are added up in shared memory and written as
// out[c * rows + row] for the rows that exist and c < cols.
template <int kWarps, int kTiles>
__device__ __forceinline__ void store_warp_sums(const float (&acc)[kTiles][4], int64_t row0, int64_t rows, int cols,
                                                float* out) {
  constexpr int kRows = 16 * kTiles;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  __shared__ float partial[kWarps][kRows][8];
#pragma unroll
  for (int m = 0; m < kTiles; ++m) {
    partial[warp][16 * m + g][2 * t] = acc[m][0];
    partial[warp][16 * m + g][2 * t + 1] = acc[m][1];
    partial[warp][16 * m + g + 8][2 * t] = acc[m][2];
    partial[warp][16 * m + g + 8][2 * t + 1] = acc[m][3];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kRows * 8; i += kWarps * 32) {
    const int r = i / 8, c = i % 8;
    float sum = 0;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) sum += partial[v][r][c];
    if (row0 + r < rows && c < cols) out[c * rows + row0 + r] = sum;
  }
}

}  // namespace gemv
