#include "accuracy.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kernels {

Accuracy compare(const std::vector<double>& ref, const std::vector<float>& got, double rtol, double atol_rel) {
  Accuracy a;
  double sig = 0, err = 0, peak = 0;
  for (double r : ref) peak = std::max(peak, std::fabs(r));
  const double atol = atol_rel * peak;
  for (size_t i = 0; i < std::min(ref.size(), got.size()); ++i) {
    const double g = got[i];
    if (!std::isfinite(g)) {
      a.finite = false;
      continue;
    }
    const double e = g - ref[i];
    sig += ref[i] * ref[i];
    err += e * e;
    a.max_abs_err = std::max(a.max_abs_err, std::fabs(e));
    if (std::fabs(e) > atol + rtol * std::fabs(ref[i])) a.allclose = false;
  }
  a.allclose = a.allclose && a.finite && ref.size() == got.size();
  a.snr_db = err == 0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(sig / err);
  return a;
}

}  // namespace kernels
