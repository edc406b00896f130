// The GEMV kernels' contract: out[c * rows + r] = sum over k of W[r, k] * X[k, c] for c < cols,
// with W in Q4_0 blocks (row-major, k/32 blocks a row) and X in Q8_1 blocks (column after column,
// x_stride blocks apart: k/32, or more where the engine pads its quantized activations), k a
// multiple of 32, 1 <= cols <= 8 (v5: 16), any rows. Runs on `stream`, returns launch errors.
//
// These are the variants the engine dispatches (ONEBIT_GEMV_Q4_0 names them; v7, one column
// only, with the fused epilogues, is row_lanes.cuh, by ONEBIT_GEMV_ONE_COL); variants/ holds
// those that lost, which the driver and the emulator check also run.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "blocks.h"

namespace gemv {

constexpr int kMaxCols = 16;  // the most columns a variant takes (v5); the others take 8

using GemvFn = cudaError_t (*)(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                               int64_t k, int cols, cudaStream_t stream);

// v2: int8 tensor cores (mma m16n8k32), k split over a CTA's 8 warps, 16 rows a CTA (mma.cu).
// v3: v2's arithmetic fed through a cp.async ring of 16-byte copies, 16 rows a CTA; v3-wide: 32
// rows; v3-tall: 64 rows with a shallower ring. v4, v4-wide: v3, v3-wide with each warp meeting
// only itself per stage (its ring is its own). v5: v4-wide with a 2-stage ring, two CTAs an SM,
// and up to 16 columns on two column tiles (staged.cu). v5-narrow: v5 with 16 rows a CTA, whose
// every row is summed as v5 sums it, bit for bit, at any column count (H200, 4096 x 14336: 17.3
// us at one column against v5's 19.7).
cudaError_t gemv_v2(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                    int cols, cudaStream_t stream);

cudaError_t gemv_v3(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                    int cols, cudaStream_t stream);
cudaError_t gemv_v3_wide(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                         int64_t k, int cols, cudaStream_t stream);
cudaError_t gemv_v3_tall(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                         int64_t k, int cols, cudaStream_t stream);
cudaError_t gemv_v4(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                    int cols, cudaStream_t stream);
cudaError_t gemv_v4_wide(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                         int64_t k, int cols, cudaStream_t stream);
cudaError_t gemv_v5_narrow(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                           int64_t k, int cols, cudaStream_t stream);
cudaError_t gemv_v5(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                    int cols, cudaStream_t stream);

// Whether v5 beats the engine's MMVQ (MMQ at 9-16 columns) on a product, from the H200 measurements inside the engine
// (docs/results.md, 2026-11-30: both sides timed through ggml, activation quantization
// included): at every column count on an output head (151936 rows); from 5 columns on shapes of
// 4096 rows or more holding at least 2^25 weights (it also won the 4-column product of
// 4096 x 14336, by 4%, left to MMVQ here); from 7 columns on smaller ones of 4096 rows or more
// (4096 x 4096 lost by 8% and 4% at 5 and 6); never on 1024 rows (32 CTAs cannot fill the GPU).
// At 9-16 columns, where the engine runs MMQ, v5 won on every shape measured, 1024 x 4096
// included (H100, 2026-12-02: 16 columns 34.3 against 44.7 us on 4096 x 14336, 11.0 against
// 14.8 on 1024 x 4096). It also needs the shapes its ring takes (k a multiple of 256, W 16-byte
// aligned); v2, where it falls back, never beats MMVQ.
inline bool v5_beats_mmvq(const void* w, int64_t rows, int64_t k, int cols) {
  if (cols < 1 || cols > kMaxCols || k < 256 || k % 256 != 0 || reinterpret_cast<uintptr_t>(w) % 16 != 0) return false;
  if (rows >= 65536 || cols > 8) return true;
  return rows >= 4096 && cols >= (rows * k >= (int64_t{1} << 25) ? 5 : 7);
}

}  // namespace gemv
