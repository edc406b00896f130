// How every kernel package judges a result against its float64 oracle: the SNR of the driver
// contract, 10 log10(mean(ref^2) / mean(err^2)), plus finiteness and an elementwise allclose.
#pragma once

#include <vector>

namespace kernels {

struct Accuracy {
  double snr_db = 0;     // +inf when exact
  bool finite = true;    // every output finite
  bool allclose = true;  // |got - ref| <= atol + rtol * |ref| everywhere
  double max_abs_err = 0;
};

// Compares `got` with the oracle. Elementwise: |got - ref| <= rtol |ref| + atol_rel * max|ref|
// (the second term covers outputs that cancel to near zero, where float summation order shows).
Accuracy compare(const std::vector<double>& oracle, const std::vector<float>& got, double rtol = 1e-3,
                 double atol_rel = 1e-5);

}  // namespace kernels
