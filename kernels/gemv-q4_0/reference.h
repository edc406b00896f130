// The answers a kernel is judged by.
//   reference: the CPU doing the kernel's own arithmetic (exact integer dot products of
//              (q_w - 8) * q_a per block, times d_w * d_a in float, summed in float).
//   oracle:    float64 from the same quantized blocks: sum of ((q_w - 8) d_w)(q_a d_a).
// Both write out[col * rows + row].
#pragma once

#include <vector>

#include "accuracy.h"
#include "blocks.h"

namespace gemv {

void reference(const Problem& p, std::vector<float>& out);
void oracle(const Problem& p, std::vector<double>& out);

// Rows [row0, row1) only, for the largest shapes where a full CPU pass would be slow.
void reference_rows(const Problem& p, int64_t row0, int64_t row1, std::vector<float>& out);
void oracle_rows(const Problem& p, int64_t row0, int64_t row1, std::vector<double>& out);

// The accuracy measure shared by the kernel packages.
using kernels::Accuracy;
using kernels::compare;

}  // namespace gemv
