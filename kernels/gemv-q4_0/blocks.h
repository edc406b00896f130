// The data the GEMV works on, laid out exactly as ggml lays it out, so the same bytes can be
// handed to the engine's MMVQ: Q4_0 weight blocks (an f16 scale and 32 4-bit values, the low
// nibbles holding elements 0-15 and the high nibbles 16-31, value = (q - 8) * d) and Q8_1
// activation blocks (an f16 scale d, an f16 s and 32 int8 values, value = q * d).
//
// s is d * sum(q): the exact sum of the quantized values, so the kernel's "subtract 8" term is
// exact and the float64 oracle, computed from the very same blocks, is the right answer.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace gemv {

constexpr int kBlock = 32;

struct BlockQ4_0 {
  uint16_t d;  // f16
  uint8_t qs[kBlock / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block must match ggml's");

struct BlockQ8_1 {
  uint16_t d;  // f16
  uint16_t s;  // f16: d * sum(qs)
  int8_t qs[kBlock];
};
static_assert(sizeof(BlockQ8_1) == 36, "Q8_1 block must match ggml's");

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// A problem: W (rows x k, Q4_0) times X (k x cols, Q8_1), cols in 1..16.
struct Problem {
  std::string name;
  int64_t rows = 0, k = 0;
  int cols = 1;
  std::vector<BlockQ4_0> w;  // rows * k/32, row-major
  std::vector<BlockQ8_1> x;  // cols * k/32, column-major (one column after another)
};

enum class Mode { kNormal, kExtremeScales, kNibbleEdges, kSaturated };
const char* mode_name(Mode m);
const std::vector<Mode>& all_modes();

// Deterministic data for a mode (the seed picks the draw).
Problem make_problem(const std::string& name, int64_t rows, int64_t k, int cols, Mode mode, uint64_t seed);

// Quantizes a float column into Q8_1 blocks (d = amax / 127, q = round(x / d), s = d * sum(q)).
void quantize_q8_1(const float* x, int64_t k, BlockQ8_1* out);

}  // namespace gemv
