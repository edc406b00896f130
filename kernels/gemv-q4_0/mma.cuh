// The GEMV on int8 tensor cores (v2; in another CTA shape, variants/shapes.cu). One Q4_0 block is
// exactly the k of one mma.m16n8k32 (s8 x s8 -> s32), and its 8 columns are exactly the
// activation columns, so a block of 16 rows x 32 k x 8 columns is one instruction whose int32
// result is the exact sum of (q_w - 8) * q_a for every (row, column); one float multiply-add per
// result with d_w * d_a adds it in, as the accuracy bar asks. The column count costs nothing: 1 column and
// 8 run the same instructions, and the time is the time to read W.
//
// A CTA owns 16 x kTiles rows; its 8 warps split the row's blocks into contiguous ranges and
// each lane issues the loads of kUnroll blocks before their mma, for bytes in flight; a
// shared-memory sum over the warps ends the CTA.
//
// Fragments (PTX ISA, mma.m16n8k32 .s8): with g = lane / 4 and t = lane % 4, A's registers hold
// row g, k 4t..4t+3 / row g+8, same k / row g, k 16+4t.. / row g+8, k 16+4t..; B's hold column g,
// k 4t.. and k 16+4t..; C's hold row g, columns 2t and 2t+1, then row g+8. Q4_0 keeps element i
// in the low nibble of byte i and element 16+i in its high nibble, so one 4-byte load of a
// block's bytes 4t..4t+3 gives both of a row's A registers.
#pragma once

#include <cuda_fp16.h>

#include "device.cuh"
#include "kernel.cuh"
#include "q4_device.cuh"

namespace gemv {
namespace {

constexpr int kWarps = 8;

template <int kTiles, int kUnroll>
__global__ void __launch_bounds__(kWarps * 32) gemv_mma(const BlockQ4_0* __restrict__ w, const BlockQ8_1* __restrict__ x,
                                                        int64_t x_stride, float* __restrict__ out, int64_t rows,
                                                        int64_t nb, int cols) {
  constexpr int kRows = 16 * kTiles;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;

  const BlockQ4_0* wr[kTiles][2];
  bool row_ok[kTiles][2];
#pragma unroll
  for (int m = 0; m < kTiles; ++m)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = row0 + 16 * m + 8 * h + g;
      row_ok[m][h] = r < rows;
      wr[m][h] = w + (row_ok[m][h] ? r : 0) * nb;
    }
  const bool b_ok = g < cols, s0_ok = 2 * t < cols, s1_ok = 2 * t + 1 < cols;
  const BlockQ8_1* xb = x + (b_ok ? g : 0) * x_stride;
  const BlockQ8_1* xs0 = x + (s0_ok ? 2 * t : 0) * x_stride;
  const BlockQ8_1* xs1 = x + (s1_ok ? 2 * t + 1 : 0) * x_stride;

  const int64_t per = (nb + kWarps - 1) / kWarps;
  const int64_t first = warp * per, last = min(nb, first + per);
  float acc[kTiles][4] = {};

  for (int64_t b = first; b < last; b += kUnroll) {
    int wq[kUnroll][kTiles][2], bq[kUnroll][2];
    float dw[kUnroll][kTiles][2], da[kUnroll][2];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t bb = b + u;
      const bool in = bb < last;
#pragma unroll
      for (int m = 0; m < kTiles; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const bool ok = in && row_ok[m][h];
          wq[u][m][h] = ok ? quants_at(wr[m][h][bb].qs, t) : 0;
          dw[u][m][h] = ok ? half_bits(wr[m][h][bb].d) : 0.0f;
        }
      const int* q = reinterpret_cast<const int*>(xb[in ? bb : 0].qs);
      bq[u][0] = in && b_ok ? q[t] : 0;
      bq[u][1] = in && b_ok ? q[4 + t] : 0;
      da[u][0] = in && s0_ok ? half_bits(xs0[bb].d) : 0.0f;
      da[u][1] = in && s1_ok ? half_bits(xs1[bb].d) : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int m = 0; m < kTiles; ++m) {
        add_block_mma(acc[m], wq[u][m][0], wq[u][m][1], dw[u][m][0], dw[u][m][1], bq[u], da[u][0], da[u][1]);
      }
  }

  store_warp_sums<kWarps, kTiles>(acc, row0, rows, cols, out);
}

template <int kTiles, int kUnroll>
cudaError_t launch(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                   int cols, cudaStream_t stream) {
  if (k % kBlock != 0 || cols < 1 || cols > 8 || rows < 1) return cudaErrorInvalidValue;
  const int64_t ctas = (rows + 16 * kTiles - 1) / (16 * kTiles);
  auto* kernel = gemv_mma<kTiles, kUnroll>;
  LAUNCH(kernel, static_cast<unsigned>(ctas), kWarps * 32, 0, stream, w, x, x_stride, out, rows, k / kBlock, cols);
  return cudaGetLastError();
}

}  // namespace
}  // namespace gemv
