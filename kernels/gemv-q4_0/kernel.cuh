// The GEMV kernel's contract: out[c * rows + r] = sum over k of W[r, k] * X[k, c] for c < cols,
// with W in Q4_0 blocks (row-major, k/32 blocks a row) and X in Q8_1 blocks (column after
// column), k a multiple of 32, 1 <= cols <= 8, any rows. Runs on `stream`, returns launch errors.
#pragma once

#include <cuda_runtime.h>

#include "blocks.h"

namespace gemv {

cudaError_t gemv_q4_0_q8_1(const BlockQ4_0* w, const BlockQ8_1* x, float* out, int64_t rows, int64_t k, int cols,
                           cudaStream_t stream);

}  // namespace gemv
