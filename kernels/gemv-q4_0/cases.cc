#include "cases.h"

#include <algorithm>

#include "reference.h"

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
      {"65x768", 65, 768, false},
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

Expected expected_for(const Shape& s, const Problem& p) {
  Expected e;
  e.rows = checked_rows(s);
  e.per_col.assign(static_cast<size_t>(p.cols), {});
  std::vector<double> part;
  for (auto [r0, r1] : e.rows) {
    oracle_rows(p, r0, r1, part);
    const int64_t n = r1 - r0;
    for (int c = 0; c < p.cols; ++c)
      e.per_col[c].insert(e.per_col[c].end(), part.begin() + c * n, part.begin() + (c + 1) * n);
  }
  return e;
}

void gather(const Expected& e, const std::vector<float>& out, int64_t rows, int cols, std::vector<double>& want,
            std::vector<float>& got) {
  want.clear();
  got.clear();
  for (int c = 0; c < cols; ++c) {
    want.insert(want.end(), e.per_col[c].begin(), e.per_col[c].end());
    for (auto [r0, r1] : e.rows)
      for (int64_t r = r0; r < r1; ++r) got.push_back(out[static_cast<size_t>(c * rows + r)]);
  }
}

}  // namespace gemv
