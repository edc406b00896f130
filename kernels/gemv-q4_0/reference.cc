#include "reference.h"

#include <cmath>
#include <limits>

namespace gemv {
namespace {

int block_dot(const BlockQ4_0& w, const BlockQ8_1& x) {
  int sum = 0;
  for (int i = 0; i < kBlock / 2; ++i) {
    sum += ((w.qs[i] & 0x0f) - 8) * x.qs[i];
    sum += ((w.qs[i] >> 4) - 8) * x.qs[i + kBlock / 2];
  }
  return sum;
}

}  // namespace

void reference_rows(const Problem& p, int64_t row0, int64_t row1, std::vector<float>& out) {
  const int64_t nb = p.k / kBlock, n = row1 - row0;
  out.assign(static_cast<size_t>(n * p.cols), 0.0f);
  for (int c = 0; c < p.cols; ++c)
    for (int64_t r = row0; r < row1; ++r) {
      float acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const BlockQ4_0& w = p.w[static_cast<size_t>(r * nb + b)];
        const BlockQ8_1& x = p.x[static_cast<size_t>(c * nb + b)];
        acc += f16_to_f32(w.d) * f16_to_f32(x.d) * static_cast<float>(block_dot(w, x));
      }
      out[static_cast<size_t>(c * n + (r - row0))] = acc;
    }
}

void oracle_rows(const Problem& p, int64_t row0, int64_t row1, std::vector<double>& out) {
  const int64_t nb = p.k / kBlock, n = row1 - row0;
  out.assign(static_cast<size_t>(n * p.cols), 0.0);
  for (int c = 0; c < p.cols; ++c)
    for (int64_t r = row0; r < row1; ++r) {
      double acc = 0;
      for (int64_t b = 0; b < nb; ++b) {
        const BlockQ4_0& w = p.w[static_cast<size_t>(r * nb + b)];
        const BlockQ8_1& x = p.x[static_cast<size_t>(c * nb + b)];
        const double dw = f16_to_f32(w.d), dx = f16_to_f32(x.d);
        for (int i = 0; i < kBlock / 2; ++i) {
          acc += ((w.qs[i] & 0x0f) - 8) * dw * (x.qs[i] * dx);
          acc += ((w.qs[i] >> 4) - 8) * dw * (x.qs[i + kBlock / 2] * dx);
        }
      }
      out[static_cast<size_t>(c * n + (r - row0))] = acc;
    }
}

void reference(const Problem& p, std::vector<float>& out) { reference_rows(p, 0, p.rows, out); }
void oracle(const Problem& p, std::vector<double>& out) { oracle_rows(p, 0, p.rows, out); }

}  // namespace gemv
