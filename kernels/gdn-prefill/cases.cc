#include "cases.h"

namespace gdn {

namespace {

Shape make(int S, int Hv, int Hk, int64_t T, int B, int K, bool large) {
  Shape s;
  s.S = S;
  s.Hv = Hv;
  s.Hk = Hk;
  s.T = T;
  s.B = B;
  s.K = K;
  s.large = large;
  s.name = "d" + std::to_string(S) + "-h" + std::to_string(Hv) + (Hk != Hv ? "k" + std::to_string(Hk) : "") + "-t" +
           std::to_string(T) + (B > 1 ? "-b" + std::to_string(B) : "") + "-K" + std::to_string(K);
  return s;
}

}  // namespace

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> all = {
      // Small and odd, every pair checked.
      make(128, 1, 1, 1, 1, 1, false),
      make(64, 2, 2, 7, 1, 1, false),
      make(128, 2, 2, 3, 1, 8, false),
      make(64, 2, 1, 64, 1, 1, false),
      make(128, 4, 2, 65, 2, 8, false),
      make(64, 3, 1, 100, 3, 4, false),
      make(128, 6, 3, 129, 1, 2, false),
      make(128, 2, 2, 200, 2, 1, false),
      // Real sizes.
      make(128, 32, 32, 512, 1, 1, true),
      make(128, 32, 32, 1024, 1, 1, true),
      make(128, 32, 32, 1024, 1, 8, true),
      make(128, 32, 32, 2048, 1, 1, true),
      make(128, 32, 32, 4096, 1, 1, true),
      make(128, 32, 32, 4096, 1, 8, true),
      make(128, 48, 16, 1024, 1, 1, true),
      make(128, 48, 16, 4096, 1, 8, true),
      make(64, 32, 32, 1024, 1, 1, true),
      make(128, 4, 4, 1024, 1, 1, true),
      // Fewer heads than SMs' worth of v3 scan CTAs: where v3 and v4 trade places (auto_variant).
      make(128, 8, 8, 1024, 1, 1, true),
      make(128, 16, 16, 1024, 1, 1, true),
      make(128, 24, 24, 1024, 1, 1, true),
      make(128, 16, 16, 512, 1, 1, true),  // the engine's default ubatch
      make(128, 32, 32, 512, 4, 8, true),
  };
  return all;
}

std::vector<Pair> checked_pairs(const Shape& s) {
  std::vector<Pair> pairs;
  if (!s.large) {
    for (int b = 0; b < s.B; ++b)
      for (int h = 0; h < s.Hv; ++h) pairs.push_back({b, h});
    return pairs;
  }
  pairs.push_back({0, 0});
  pairs.push_back({s.B - 1, s.Hv - 1});
  if (s.Hv > 2) pairs.push_back({s.B / 2, s.Hv / 2 + 1});
  return pairs;
}

std::string case_name(const Shape& s, Mode m) { return s.name + "-" + mode_name(m); }

}  // namespace gdn
