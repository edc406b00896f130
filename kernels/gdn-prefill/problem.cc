#include "problem.h"

#include <cmath>
#include <random>

namespace gdn {

const char* mode_name(Mode m) { return m == Mode::kHarsh ? "harsh" : "gentle"; }

const std::vector<Mode>& all_modes() {
  static const std::vector<Mode> modes = {Mode::kHarsh, Mode::kGentle};
  return modes;
}

namespace {

// Rows of length S, each L2-normalized, as the models feed q and k.
void normalized_rows(std::vector<float>& x, int S, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t r = 0; r < x.size(); r += S) {
    double norm = 0;
    for (int i = 0; i < S; ++i) {
      x[r + i] = normal(rng);
      norm += double{x[r + i]} * x[r + i];
    }
    const float inv = static_cast<float>(1.0 / std::sqrt(norm));
    for (int i = 0; i < S; ++i) x[r + i] *= inv;
  }
}

void uniform(std::vector<float>& x, float lo, float hi, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(lo, hi);
  for (float& f : x) f = u(rng);
}

}  // namespace

Problem make_problem(const Shape& s, Mode m, uint64_t seed) {
  Problem p;
  p.shape = s;
  p.mode = m;
  std::mt19937_64 rng(seed);
  const int64_t tokens = s.T * s.B;
  p.q.resize(static_cast<size_t>(tokens * s.Hk * s.S));
  p.k.resize(p.q.size());
  p.v.resize(static_cast<size_t>(tokens * s.Hv * s.S));
  p.g.resize(static_cast<size_t>(tokens * s.Hv));
  p.beta.resize(p.g.size());
  p.state.resize(static_cast<size_t>(int64_t{s.B} * s.Hv * s.S * s.S));
  normalized_rows(p.q, s.S, rng);
  normalized_rows(p.k, s.S, rng);
  uniform(p.v, -1.0f, 1.0f, rng);
  if (m == Mode::kHarsh) uniform(p.g, -20.0f, -1e-4f, rng);
  else uniform(p.g, -0.05f, -1e-4f, rng);
  uniform(p.beta, 0.0f, 1.0f, rng);
  uniform(p.state, -1.0f, 1.0f, rng);
  return p;
}

}  // namespace gdn
