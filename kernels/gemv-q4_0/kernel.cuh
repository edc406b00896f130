// The GEMV kernels' contract: out[c * rows + r] = sum over k of W[r, k] * X[k, c] for c < cols,
// with W in Q4_0 blocks (row-major, k/32 blocks a row) and X in Q8_1 blocks (column after column,
// x_stride blocks apart: k/32, or more where the engine pads its quantized activations), k a
// multiple of 32, 1 <= cols <= 8, any rows. Runs on `stream`, returns launch errors.
//
// The campaign keeps several variants side by side; the driver checks and times each.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "blocks.h"

namespace gemv {

using GemvFn = cudaError_t (*)(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                               int64_t k, int cols, cudaStream_t stream);

struct Variant {
  const char* name;
  const char* what;
  GemvFn run;
};

// v1: dp4a, a warp per row; v1-batch4: four blocks a lane in flight.  v2: int8 tensor cores (mma m16n8k32), k split over a CTA's 8 warps,
// 16 rows a CTA.  v2-wide: the same with 32 rows a CTA (activations read half as often).
// v3: v2's arithmetic fed through a cp.async ring of 16-byte copies, 16 rows a CTA; v3-wide: 32
// rows; v3-tall: 64 rows with a shallower ring. v4, v4-wide: v3, v3-wide with each warp meeting
// only itself per stage (its ring is its own). v5: v4-wide with a 2-stage ring (two CTAs an SM);
// v5-narrow: 16 rows; v5-occ, v5-narrow-occ: fewer registers for 3 and 4 CTAs an SM.
const std::vector<Variant>& variants();

cudaError_t gemv_v1(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                    int cols, cudaStream_t stream);
cudaError_t gemv_v1_batch4(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                           int64_t k, int cols, cudaStream_t stream);
cudaError_t gemv_v2(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                    int cols, cudaStream_t stream);
cudaError_t gemv_v2_wide(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                         int64_t k, int cols, cudaStream_t stream);

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
cudaError_t gemv_v5(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                    int cols, cudaStream_t stream);
cudaError_t gemv_v5_narrow(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                           int64_t k, int cols, cudaStream_t stream);
cudaError_t gemv_v5_occ(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                        int64_t k, int cols, cudaStream_t stream);
cudaError_t gemv_v5_narrow_occ(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                               int64_t k, int cols, cudaStream_t stream);

// Whether v5 beats the engine's MMVQ on a product, from the H200 measurements in
// docs/results.md (the fifth session's sweep against MMVQ on the same data): on every shape of
// 4096 rows or more from 5 columns on (it also won some 3- and 4-column products of the long
// shapes, left to MMVQ here), at every column count on an output head (151936 rows), and never
// on 1024 rows (32 CTAs cannot fill the GPU). It also needs the shapes its ring takes (k a
// multiple of 256, W 16-byte aligned); v2, where it falls back, never beats MMVQ.
inline bool v5_beats_mmvq(const void* w, int64_t rows, int64_t k, int cols) {
  if (cols < 1 || cols > 8 || k < 256 || k % 256 != 0 || reinterpret_cast<uintptr_t>(w) % 16 != 0) return false;
  return rows >= 65536 || (rows >= 4096 && cols >= 5);
}

}  // namespace gemv
