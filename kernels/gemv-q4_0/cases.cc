#include "cases.h"

#include <algorithm>

namespace gemv {

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> s = {
      {"4096x4096", 4096, 4096, true},     // 8B attention q/o
      {"1024x4096", 1024, 4096, true},     // 8B attention k/v (GQA)
      {"14336x4096", 14336, 4096, true},   // 8B FFN gate/up
      {"4096x14336", 4096, 14336, true},   // 8B FFN down
      {"5120x17408", 5120, 17408, true},   // 14B-class FFN down
      {"151936x4096", 151936, 4096, true}, // Qwen vocabulary head
      {"1x32", 1, 32, false},
      {"3x64", 3, 64, false},
      {"7x96", 7, 96, false},
      {"33x160", 33, 160, false},
      {"100x4096", 100, 4096, false},
      {"257x288", 257, 288, false},
  };
  return s;
}

std::vector<std::pair<int64_t, int64_t>> checked_rows(const Shape& s) {
  if (!s.large) return {{0, s.rows}};
  std::vector<std::pair<int64_t, int64_t>> r = {{0, 64}, {s.rows - 64, s.rows}};
  for (int i = 1; i <= 128; ++i) {
    const int64_t row = 64 + (s.rows - 128) * i / 129;
    r.push_back({row, row + 1});
  }
  return r;
}

std::string case_name(const Shape& s, Mode m, int cols) {
  return std::string(s.name) + "/" + mode_name(m) + "/n" + std::to_string(cols);
}

}  // namespace gemv
