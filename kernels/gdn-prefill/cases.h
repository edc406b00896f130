// The cases every kernel is checked and timed on: the sizes of real hybrid models (32 heads of
// d128; 48 value heads over 16 q/k heads; d64) at 512-4096 tokens with K = 1 and K = 8
// snapshots, and small odd ones (lengths not a multiple of the chunk, T below K, several
// sequences), each in every input mode.
#pragma once

#include <string>
#include <vector>

#include "problem.h"

namespace gdn {

const std::vector<Shape>& shapes();

// The pairs whose outputs are checked: all for small shapes; for large ones three, spread over
// sequences and heads (a float64 pass over every head of 4096 tokens takes minutes on a CPU).
std::vector<Pair> checked_pairs(const Shape& s);

std::string case_name(const Shape& s, Mode m);

}  // namespace gdn
