#include "reference.h"

#include <algorithm>
#include <cmath>

#include "cases.h"

namespace gdn {

int written_slots(const Shape& s) { return s.K == 1 ? 1 : static_cast<int>(std::min<int64_t>(s.T, s.K)); }

void oracle_pair(const Problem& p, Pair pair, PairOutput<double>& out) {
  const Shape& s = p.shape;
  const int S = s.S, hk = pair.h % s.Hk;
  const double scale = 1.0 / std::sqrt(static_cast<double>(S));
  std::vector<double> st(static_cast<size_t>(S) * S);  // st[col * S + i] = S[i][col]
  const float* s0 = &p.state[static_cast<size_t>(p.state_at(pair.b, pair.h))];
  std::copy(s0, s0 + st.size(), st.begin());
  out.attn.assign(static_cast<size_t>(s.T * S), 0.0);
  out.snapshots.assign(static_cast<size_t>(written_slots(s)) * S * S, 0.0);
  for (int64_t t = 0; t < s.T; ++t) {
    const float* q = &p.q[static_cast<size_t>(p.qk_at(pair.b, t, hk))];
    const float* k = &p.k[static_cast<size_t>(p.qk_at(pair.b, t, hk))];
    const float* v = &p.v[static_cast<size_t>(p.v_at(pair.b, t, pair.h))];
    const double a = std::exp(static_cast<double>(p.g[static_cast<size_t>(p.gate_at(pair.b, t, pair.h))]));
    const double beta = p.beta[static_cast<size_t>(p.gate_at(pair.b, t, pair.h))];
    for (int col = 0; col < S; ++col) {
      double* c = &st[static_cast<size_t>(col) * S];
      double kv = 0;
      for (int i = 0; i < S; ++i) {
        c[i] *= a;
        kv += c[i] * k[i];
      }
      const double delta = beta * (v[col] - kv);
      double o = 0;
      for (int i = 0; i < S; ++i) {
        c[i] += k[i] * delta;
        o += c[i] * q[i];
      }
      out.attn[static_cast<size_t>(t * S + col)] = o * scale;
    }
    const int slot = p.slot_of(t);
    if (slot >= 0) std::copy(st.begin(), st.end(), out.snapshots.begin() + static_cast<size_t>(slot) * S * S);
  }
}

namespace {

// The cumulative log-gates are summed in double: far into a chunk of harsh gates they reach
// -1000, where a float's spacing would cost the short-range decays (the ones that matter) about
// 1e-4 of relative error. Only the exponential is taken in float.
float decay_of(double log_gate) { return std::exp(static_cast<float>(log_gate)); }

}  // namespace

void reference_pair(const Problem& p, Pair pair, int chunk, PairOutput<float>& out) {
  const Shape& s = p.shape;
  const int S = s.S, C = chunk, hk = pair.h % s.Hk;
  const float scale = 1.0f / std::sqrt(static_cast<float>(S));
  std::vector<float> st(static_cast<size_t>(S) * S);  // st[col * S + i] = S[i][col]
  const float* s0 = &p.state[static_cast<size_t>(p.state_at(pair.b, pair.h))];
  std::copy(s0, s0 + st.size(), st.begin());
  out.attn.assign(static_cast<size_t>(s.T * S), 0.0f);
  out.snapshots.assign(static_cast<size_t>(written_slots(s)) * S * S, 0.0f);

  std::vector<double> G(C);
  std::vector<float> A(static_cast<size_t>(C) * C), P(static_cast<size_t>(C) * C);
  std::vector<float> W(static_cast<size_t>(C) * S), U(static_cast<size_t>(C) * S);
  auto row = [&](const std::vector<float>& x, int64_t at) { return &x[static_cast<size_t>(at)]; };
  auto dot = [S](const float* a, const float* b) {
    float sum = 0;
    for (int i = 0; i < S; ++i) sum += a[i] * b[i];
    return sum;
  };

  for (int64_t c0 = 0; c0 < s.T; c0 += C) {
    const int n = static_cast<int>(std::min<int64_t>(C, s.T - c0));
    std::vector<const float*> k(n), q(n);
    std::vector<float> beta(n);
    for (int t = 0; t < n; ++t) {
      k[t] = row(p.k, p.qk_at(pair.b, c0 + t, hk));
      q[t] = row(p.q, p.qk_at(pair.b, c0 + t, hk));
      beta[t] = p.beta[static_cast<size_t>(p.gate_at(pair.b, c0 + t, pair.h))];
      G[t] = (t ? G[t - 1] : 0.0) + p.g[static_cast<size_t>(p.gate_at(pair.b, c0 + t, pair.h))];
    }
    // Phase 1: the chunk's own quantities, independent of the state.
    for (int t = 0; t < n; ++t) {
      for (int u = 0; u < t; ++u) A[t * C + u] = beta[t] * decay_of(G[t] - G[u]) * dot(k[t], k[u]);
      for (int u = 0; u <= t; ++u) P[t * C + u] = decay_of(G[t] - G[u]) * dot(q[t], k[u]);
      const float* v = row(p.v, p.v_at(pair.b, c0 + t, pair.h));
      const float wk = beta[t] * decay_of(G[t]);
      for (int i = 0; i < S; ++i) {
        float w = wk * k[t][i], x = beta[t] * v[i];
        for (int u = 0; u < t; ++u) {
          w -= A[t * C + u] * W[static_cast<size_t>(u) * S + i];
          x -= A[t * C + u] * U[static_cast<size_t>(u) * S + i];
        }
        W[static_cast<size_t>(t) * S + i] = w;
        U[static_cast<size_t>(t) * S + i] = x;
      }
    }
    // Phase 2: U = U' - W S, the outputs, the snapshots, the next state.
    for (int t = 0; t < n; ++t)
      for (int col = 0; col < S; ++col)
        U[static_cast<size_t>(t) * S + col] -= dot(&W[static_cast<size_t>(t) * S], &st[static_cast<size_t>(col) * S]);
    for (int t = 0; t < n; ++t) {
      const float e = decay_of(G[t]);
      for (int col = 0; col < S; ++col) {
        float o = e * dot(q[t], &st[static_cast<size_t>(col) * S]);
        for (int u = 0; u <= t; ++u) o += P[t * C + u] * U[static_cast<size_t>(u) * S + col];
        out.attn[static_cast<size_t>((c0 + t) * S + col)] = o * scale;
      }
    }
    // The state after token t of this chunk: e^{G_t} S + sum_{u <= t} e^{G_t - G_u} k_u U_u^T.
    std::vector<float> decay(n);
    auto state_after = [&](int t, float* dst) {
      const float e = decay_of(G[t]);
      for (int u = 0; u <= t; ++u) decay[u] = decay_of(G[t] - G[u]);
      for (int col = 0; col < S; ++col)
        for (int i = 0; i < S; ++i) {
          float x = e * st[static_cast<size_t>(col) * S + i];
          for (int u = 0; u <= t; ++u) x += decay[u] * k[u][i] * U[static_cast<size_t>(u) * S + col];
          dst[static_cast<size_t>(col) * S + i] = x;
        }
    };
    for (int t = 0; t < n - 1; ++t) {
      const int slot = p.slot_of(c0 + t);
      if (slot >= 0) state_after(t, &out.snapshots[static_cast<size_t>(slot) * S * S]);
    }
    std::vector<float> next(st.size());
    state_after(n - 1, next.data());
    st.swap(next);
    const int slot = p.slot_of(c0 + n - 1);
    if (slot >= 0) std::copy(st.begin(), st.end(), out.snapshots.begin() + static_cast<size_t>(slot) * S * S);
  }
}

void gather_pair(const Problem& p, const std::vector<float>& out, Pair pair, PairOutput<float>& got) {
  const Shape& s = p.shape;
  const int S = s.S;
  got.attn.resize(static_cast<size_t>(s.T * S));
  for (int64_t t = 0; t < s.T; ++t) {
    const float* src = &out[static_cast<size_t>(p.v_at(pair.b, t, pair.h))];
    std::copy(src, src + S, got.attn.begin() + static_cast<size_t>(t * S));
  }
  const int slots = written_slots(s);
  got.snapshots.resize(static_cast<size_t>(slots) * S * S);
  for (int slot = 0; slot < slots; ++slot) {
    const float* src = &out[static_cast<size_t>(p.snapshot_at(slot, pair.b, pair.h))];
    std::copy(src, src + S * S, got.snapshots.begin() + static_cast<size_t>(slot) * S * S);
  }
}

PairOutput<double> oracle_checked(const Problem& p) {
  PairOutput<double> all, one;
  for (Pair pair : checked_pairs(p.shape)) {
    oracle_pair(p, pair, one);
    append(all, one);
  }
  return all;
}

PairOutput<float> gather_checked(const Problem& p, const std::vector<float>& out) {
  PairOutput<float> all, one;
  for (Pair pair : checked_pairs(p.shape)) {
    gather_pair(p, out, pair, one);
    append(all, one);
  }
  return all;
}

}  // namespace gdn
