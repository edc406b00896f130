// Every variant the driver and the emulator check run: the ones the engine dispatches (kernel.cuh)
// and those that lost to them (this folder, which the engine patch does not carry).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "../kernel.cuh"

namespace gemv {

struct Variant {
  const char* name;
  const char* what;
  GemvFn run;
  int max_cols = 8;
};

// In the order the driver runs them.
const std::vector<Variant>& variants();

// v1: dp4a, a warp per row; v1-batch4: four blocks a lane in flight (dp4a.cu). v2-wide: v2 with 32
// rows a CTA (activations read half as often; shapes.cu). v6: v5 with persistent CTAs (one wave,
// each walking row tiles with its ring kept filled; persistent.cu). v7, v7-r16, v7-r32: one
// column, a row a lane over whole 144-byte octets of 8 blocks, dp4a (row_lanes.cu); v7-direct,
// v7-r32-direct: the same without the ring.
cudaError_t gemv_v1(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                    int cols, cudaStream_t stream);
cudaError_t gemv_v1_batch4(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                           int64_t k, int cols, cudaStream_t stream);
cudaError_t gemv_v2_wide(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows,
                         int64_t k, int cols, cudaStream_t stream);
cudaError_t gemv_v6(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                    int cols, cudaStream_t stream);
// v7 and its shapes (row_lanes.cu), in the order the driver runs them.
std::vector<Variant> row_lanes_variants();

}  // namespace gemv
