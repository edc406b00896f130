// The answers a kernel is judged by.
//   reference: the CPU doing the kernel's own arithmetic (exact integer dot products of
//              (q_w - 8) * q_a per block, times d_w * d_a in float, summed in float).
//   oracle:    float64 from the same quantized blocks: sum of ((q_w - 8) d_w)(q_a d_a).
// Both write out[col * rows + row].
#pragma once

#include <vector>

#include "blocks.h"

namespace gemv {

void reference(const Problem& p, std::vector<float>& out);
void oracle(const Problem& p, std::vector<double>& out);

// Rows [row0, row1) only, for the largest shapes where a full CPU pass would be slow.
void reference_rows(const Problem& p, int64_t row0, int64_t row1, std::vector<float>& out);
void oracle_rows(const Problem& p, int64_t row0, int64_t row1, std::vector<double>& out);

struct Accuracy {
  double snr_db = 0;         // 10 log10(mean(ref^2) / mean(err^2)); +inf when exact
  bool finite = true;        // every output finite
  bool allclose = true;      // |got - ref| <= atol + rtol * |ref| everywhere
  double max_abs_err = 0;
};
// Compares `got` with the oracle. Elementwise: |got - ref| <= rtol |ref| + atol_rel * max|ref|
// (the second term covers outputs that cancel to near zero, where float summation order shows).
Accuracy compare(const std::vector<double>& oracle, const std::vector<float>& got, double rtol = 1e-3,
                 double atol_rel = 1e-5);

}  // namespace gemv
