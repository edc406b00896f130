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

void reference_pair(const Problem& p, Pair pair, int chunk, PairOutput<float>& out, Chain chain) {
  const Shape& s = p.shape;
  const int S = s.S, C = chunk, hk = pair.h % s.Hk;
  const float scale = 1.0f / std::sqrt(static_cast<float>(S));
  std::vector<float> st(static_cast<size_t>(S) * S);  // st[col * S + i] = S[i][col]
  const float* s0 = &p.state[static_cast<size_t>(p.state_at(pair.b, pair.h))];
  std::copy(s0, s0 + st.size(), st.begin());
  out.attn.assign(static_cast<size_t>(s.T * S), 0.0f);
  out.snapshots.assign(static_cast<size_t>(written_slots(s)) * S * S, 0.0f);

  auto row = [&](const std::vector<float>& x, int64_t at) { return &x[static_cast<size_t>(at)]; };
  auto dot = [S](const float* a, const float* b) {
    float sum = 0;
    for (int i = 0; i < S; ++i) sum += a[i] * b[i];
    return sum;
  };
  // A chunk's own quantities, independent of the state (phase 1); U holds U' until the chain
  // subtracts W S.
  struct Terms {
    int64_t c0 = 0;
    int n = 0;
    std::vector<double> G;
    std::vector<const float*> k, q;
    std::vector<float> P, W, U;
  };
  std::vector<float> A(static_cast<size_t>(C) * C);  // prepare's (I + A), chunk by chunk
  auto prepare = [&](int64_t c0, Terms& ch) {
    const int n = static_cast<int>(std::min<int64_t>(C, s.T - c0));
    ch.c0 = c0;
    ch.n = n;
    ch.G.assign(C, 0.0);
    ch.k.assign(n, nullptr);
    ch.q.assign(n, nullptr);
    ch.P.assign(static_cast<size_t>(C) * C, 0.0f);
    ch.W.assign(static_cast<size_t>(C) * S, 0.0f);
    ch.U.assign(static_cast<size_t>(C) * S, 0.0f);
    std::vector<float> beta(n);
    for (int t = 0; t < n; ++t) {
      ch.k[t] = row(p.k, p.qk_at(pair.b, c0 + t, hk));
      ch.q[t] = row(p.q, p.qk_at(pair.b, c0 + t, hk));
      beta[t] = p.beta[static_cast<size_t>(p.gate_at(pair.b, c0 + t, pair.h))];
      ch.G[t] = (t ? ch.G[t - 1] : 0.0) + p.g[static_cast<size_t>(p.gate_at(pair.b, c0 + t, pair.h))];
    }
    for (int t = 0; t < n; ++t) {
      for (int u = 0; u < t; ++u) A[t * C + u] = beta[t] * decay_of(ch.G[t] - ch.G[u]) * dot(ch.k[t], ch.k[u]);
      for (int u = 0; u <= t; ++u) ch.P[t * C + u] = decay_of(ch.G[t] - ch.G[u]) * dot(ch.q[t], ch.k[u]);
      const float* v = row(p.v, p.v_at(pair.b, c0 + t, pair.h));
      const float wk = beta[t] * decay_of(ch.G[t]);
      for (int i = 0; i < S; ++i) {
        float w = wk * ch.k[t][i], x = beta[t] * v[i];
        for (int u = 0; u < t; ++u) {
          w -= A[t * C + u] * ch.W[static_cast<size_t>(u) * S + i];
          x -= A[t * C + u] * ch.U[static_cast<size_t>(u) * S + i];
        }
        ch.W[static_cast<size_t>(t) * S + i] = w;
        ch.U[static_cast<size_t>(t) * S + i] = x;
      }
    }
  };
  // U = U' - W S with the state as it is.
  auto subtract_ws = [&](Terms& ch) {
    for (int t = 0; t < ch.n; ++t)
      for (int col = 0; col < S; ++col)
        ch.U[static_cast<size_t>(t) * S + col] -= dot(&ch.W[static_cast<size_t>(t) * S], &st[static_cast<size_t>(col) * S]);
  };

  Terms cur, next;
  prepare(0, cur);
  subtract_ws(cur);
  for (int64_t c0 = 0; c0 < s.T; c0 += C) {
    const int n = cur.n;
    const std::vector<double>& G = cur.G;
    const std::vector<float>& U = cur.U;
    // Phase 2: the outputs, the snapshots, the next state (and, looking ahead, the next U).
    for (int t = 0; t < n; ++t) {
      const float e = decay_of(G[t]);
      for (int col = 0; col < S; ++col) {
        float o = e * dot(cur.q[t], &st[static_cast<size_t>(col) * S]);
        for (int u = 0; u <= t; ++u) o += cur.P[t * C + u] * U[static_cast<size_t>(u) * S + col];
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
          for (int u = 0; u <= t; ++u) x += decay[u] * cur.k[u][i] * U[static_cast<size_t>(u) * S + col];
          dst[static_cast<size_t>(col) * S + i] = x;
        }
    };
    for (int t = 0; t < n - 1; ++t) {
      const int slot = p.slot_of(c0 + t);
      if (slot >= 0) state_after(t, &out.snapshots[static_cast<size_t>(slot) * S * S]);
    }
    const bool more = c0 + C < s.T;
    if (more) prepare(c0 + C, next);
    if (more && chain == Chain::kLookAhead) {
      // U of the next chunk from this chunk's state and U, before the state moves on:
      // U' - e^{G_last} W S - M U with M[t][u] = e^{G_last - G_u} w_t.k_u (program.md, idea 1).
      const float glast = decay_of(G[n - 1]);
      std::vector<float> m(static_cast<size_t>(n));
      for (int t = 0; t < next.n; ++t) {
        const float* w = &next.W[static_cast<size_t>(t) * S];
        for (int u = 0; u < n; ++u) m[u] = decay_of(G[n - 1] - G[u]) * dot(w, cur.k[u]);
        for (int col = 0; col < S; ++col) {
          float mu = 0;
          for (int u = 0; u < n; ++u) mu += m[u] * U[static_cast<size_t>(u) * S + col];
          next.U[static_cast<size_t>(t) * S + col] -= glast * dot(w, &st[static_cast<size_t>(col) * S]) + mu;
        }
      }
    }
    std::vector<float> after(st.size());
    state_after(n - 1, after.data());
    st.swap(after);
    const int slot = p.slot_of(c0 + n - 1);
    if (slot >= 0) std::copy(st.begin(), st.end(), out.snapshots.begin() + static_cast<size_t>(slot) * S * S);
    if (more) {
      if (chain == Chain::kSequential) subtract_ws(next);
      std::swap(cur, next);
    }
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
