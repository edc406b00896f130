// make test's part of the package, no GPU: the f16 conversions are exact, and the CPU reference
// (the kernel's arithmetic) meets the accuracy bar against the float64 oracle in every mode, on
// the small shapes and on sampled rows of the real ones. Prints the driver's contract lines.
#include <cmath>
#include <cstdio>
#include <limits>

#include "cases.h"
#include "reference.h"

using namespace gemv;

int main() {
  int failures = 0;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    if (f32_to_f16(f) != h) {
      std::printf("f16 round trip fails for 0x%04x\n", h);
      ++failures;
    }
  }
  double min_snr = std::numeric_limits<double>::infinity();
  bool all_close = true;
  for (const Shape& s : shapes()) {
    for (Mode m : all_modes()) {
      for (int cols : {1, 3, 8}) {
        if (s.large && cols != 8) continue;  // the big shapes once, with every column
        Problem p = make_problem(case_name(s, m, cols), s.rows, s.k, cols, m, 1);
        std::vector<double> want, w;
        std::vector<float> got, g;
        for (auto [r0, r1] : checked_rows(s)) {
          oracle_rows(p, r0, r1, w);
          reference_rows(p, r0, r1, g);
          want.insert(want.end(), w.begin(), w.end());
          got.insert(got.end(), g.begin(), g.end());
        }
        Accuracy a = compare(want, got);
        std::printf("case %-32s snr %7.1f dB  max_abs_err %.3g  finite %d  allclose %d\n", p.name.c_str(), a.snr_db,
                    a.max_abs_err, a.finite, a.allclose);
        min_snr = std::min(min_snr, a.snr_db);
        all_close = all_close && a.allclose;
        if (a.snr_db < 90 || !a.finite) ++failures;
      }
    }
  }
  std::printf("SNR: %.1f\nallclose: %s\n", min_snr, all_close ? "true" : "false");
  return failures == 0 && all_close ? 0 : 1;
}
