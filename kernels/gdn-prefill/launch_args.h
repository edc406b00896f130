// The kernel's arguments for a problem laid out contiguously, as the engine's tensors usually are:
// the driver passes device pointers, the emulated check host pointers.
#pragma once

#include "kernel.cuh"
#include "problem.h"

namespace gdn {

inline GdnArgs contiguous_args(const Shape& s, const float* q, const float* k, const float* v, const float* g,
                               const float* beta, const float* state, float* out) {
  GdnArgs a{};
  a.q = q;
  a.k = k;
  a.v = v;
  a.g = g;
  a.beta = beta;
  a.state = state;
  a.out = out;
  a.state_out = out + int64_t{s.S} * s.Hv * s.T * s.B;
  a.slot_stride = int64_t{s.S} * s.S * s.Hv * s.B;
  a.S = s.S;
  a.Hv = s.Hv;
  a.Hk = s.Hk;
  a.T = s.T;
  a.B = s.B;
  a.Bqk = s.B;
  a.K = s.K;
  a.q_head = a.k_head = s.S;
  a.q_token = a.k_token = int64_t{s.S} * s.Hk;
  a.q_seq = a.k_seq = int64_t{s.S} * s.Hk * s.T;
  a.v_head = s.S;
  a.v_token = int64_t{s.S} * s.Hv;
  a.v_seq = int64_t{s.S} * s.Hv * s.T;
  a.state_seq = int64_t{s.S} * s.S * s.Hv;
  return a;
}

}  // namespace gdn
