// The cases every kernel is checked and timed on: shapes from real models (rows x k of their
// weight matrices) and small odd ones, each in every input mode, with 1 to 8 columns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "blocks.h"

namespace gemv {

struct Shape {
  const char* name;
  int64_t rows, k;
  bool large;  // checked on sampled rows, timed in bench mode
};

const std::vector<Shape>& shapes();

// Rows whose outputs are checked for a shape: all for small shapes, for large ones the first
// and last 64 and 128 spread between (a full float64 pass over 151936 x 4096 x 8 would take
// minutes on the CPU).
std::vector<std::pair<int64_t, int64_t>> checked_rows(const Shape& s);

std::string case_name(const Shape& s, Mode m, int cols);

// The oracle for the checked rows of a shape, all of the problem's columns; a case with fewer
// columns uses the leading ones.
struct Expected {
  std::vector<std::pair<int64_t, int64_t>> rows;
  std::vector<std::vector<double>> per_col;  // [col] -> values over the checked rows
};
Expected expected_for(const Shape& s, const Problem& p);

// The checked rows of a result out[c * rows + r], the first `cols` columns, beside the oracle's.
void gather(const Expected& e, const std::vector<float>& out, int64_t rows, int cols, std::vector<double>& want,
            std::vector<float>& got);

}  // namespace gemv
