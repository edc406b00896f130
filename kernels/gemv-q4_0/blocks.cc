#include "blocks.h"

#include <cmath>
#include <algorithm>
#include <random>

namespace gemv {

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      uint32_t m = mant;
      do ++e, m <<= 1;
      while ((m & 0x400u) == 0);
      bits = sign | ((127 - 15 - e) << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow: inf
  if (exp <= 0) {                                                // subnormal or zero, round to nearest even
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - exp;
    uint32_t half = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;  // may carry into the exponent: correct
  return static_cast<uint16_t>(sign | half);
}

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kNormal: return "normal";
    case Mode::kExtremeScales: return "extreme-scales";
    case Mode::kNibbleEdges: return "nibble-edges";
    case Mode::kSaturated: return "saturated";
  }
  return "?";
}

const std::vector<Mode>& all_modes() {
  static const std::vector<Mode> m = {Mode::kNormal, Mode::kExtremeScales, Mode::kNibbleEdges, Mode::kSaturated};
  return m;
}

void quantize_q8_1(const float* x, int64_t k, BlockQ8_1* out) {
  for (int64_t b = 0; b < k / kBlock; ++b) {
    float amax = 0;
    for (int i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(x[b * kBlock + i]));
    const float d = amax / 127.0f;
    const uint16_t dh = f32_to_f16(d);
    const float dq = f16_to_f32(dh);  // quantize against the scale the kernel will read
    int sum = 0;
    for (int i = 0; i < kBlock; ++i) {
      const int q = dq == 0.0f ? 0 : static_cast<int>(std::lround(std::clamp(x[b * kBlock + i] / dq, -127.0f, 127.0f)));
      out[b].qs[i] = static_cast<int8_t>(q);
      sum += q;
    }
    out[b].d = dh;
    out[b].s = f32_to_f16(dq * static_cast<float>(sum));
  }
}

Problem make_problem(const std::string& name, int64_t rows, int64_t k, int cols, Mode mode, uint64_t seed) {
  Problem p;
  p.name = name;
  p.rows = rows;
  p.k = k;
  p.cols = cols;
  const int64_t nb = k / kBlock;
  p.w.resize(static_cast<size_t>(rows * nb));
  p.x.resize(static_cast<size_t>(cols * nb));
  std::mt19937_64 rng(seed ^ (static_cast<uint64_t>(mode) << 56) ^ static_cast<uint64_t>(rows * 131 + k * 7 + cols));
  std::uniform_real_distribution<float> u01(0.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> nibble(0, 15);
  for (auto& b : p.w) {
    float d;
    switch (mode) {
      case Mode::kExtremeScales: d = std::pow(10.0f, -4.0f + 7.0f * u01(rng)); break;  // 10^U(-4, 3)
      default: d = 0.01f + 0.02f * u01(rng);
    }
    b.d = f32_to_f16(d);
    for (auto& q : b.qs) {
      int lo, hi;
      if (mode == Mode::kNibbleEdges) {
        lo = (rng() & 1) ? 15 : 0;
        hi = (rng() & 1) ? 15 : 0;
      } else {
        lo = nibble(rng);
        hi = nibble(rng);
      }
      q = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
  std::vector<float> col(static_cast<size_t>(k));
  for (int c = 0; c < cols; ++c) {
    for (int64_t b = 0; b < nb; ++b) {
      // Extreme scales: each block's values drawn at a magnitude of 10^U(-3, 2).
      const float scale = mode == Mode::kExtremeScales ? std::pow(10.0f, -3.0f + 5.0f * u01(rng)) : 1.0f;
      for (int i = 0; i < kBlock; ++i) {
        float v = normal(rng) * scale;
        if (mode == Mode::kSaturated) v = c == cols - 1 && cols > 1 ? 0.0f : ((rng() & 1) ? 50.0f : -50.0f);
        col[static_cast<size_t>(b * kBlock + i)] = v;
      }
    }
    quantize_q8_1(col.data(), k, &p.x[static_cast<size_t>(c * nb)]);
  }
  return p;
}

}  // namespace gemv
