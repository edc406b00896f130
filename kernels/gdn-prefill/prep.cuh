// prep: each chunk's own quantities, independent of the state and so all chunks at once (grid
// chunks x Hv x B): G (cumulative log-gates, in double), A = strictly lower beta_t e^{G_t - G_u}
// k_t.k_u, W and U' by forward substitution of (I + A) X = rhs, P = e^{G_t - G_u} q_t.k_u (u <= t),
// written to scratch for the scan.
#pragma once

#include <atomic>
#include <cstdint>

#include "chunks.cuh"
#include "device.cuh"
#include "products.cuh"

namespace gdn {
namespace {

// A[t][u] = beta_t e^{G_t - G_u} k_t.k_u (u < t) and P[t][u] = e^{G_t - G_u} q_t.k_u (u <= t), from
// the products k_t.k_u and q_t.k_u; zero elsewhere and in rows from n on. P's rows are ldp apart.
__device__ __forceinline__ void store_a_p(float* as, int lda, float* p, int ldp, const double* gs, const float* betas,
                                          int n, int t, int u, float kk, float qk) {
  const float decay = u <= t && t < n ? expf(static_cast<float>(gs[t] - gs[u])) : 0.0f;
  as[t * lda + u] = u < t ? betas[t] * decay * kk : 0.0f;
  p[t * ldp + u] = decay * qk;
}

// One row of a forward substitution: y - at[0, t) x[0, t), with four partial sums so that the
// multiply-adds do not wait on each other (at is 16-byte aligned when kLdA is a multiple of 4).
// Called with t known at compile time (unrolled loops), it keeps x in registers.
template <int kLdA, int N>
__device__ __forceinline__ float substitute_row(const float* at, const float (&x)[N], int t, float y) {
  float r0 = y, r1 = 0, r2 = 0, r3 = 0;
  int u = 0;
  if constexpr (kLdA % 4 == 0) {
#pragma unroll
    for (; u + 4 <= t; u += 4) {
      const float4 a4 = *reinterpret_cast<const float4*>(at + u);
      r0 -= a4.x * x[u];
      r1 -= a4.y * x[u + 1];
      r2 -= a4.z * x[u + 2];
      r3 -= a4.w * x[u + 3];
    }
  }
#pragma unroll
  for (; u < t; ++u) r0 -= at[u] * x[u];
  return (r0 + r1) + (r2 + r3);
}

// Forward substitution of (I + A) x = scale rhs for one column of W or U', in place: x holds the
// column of rhs on entry. The column lives in registers and the loops unroll completely.
template <int kLdA>
__device__ __forceinline__ void forward_substitute(float (&x)[C], const float* as, const float* scale) {
#pragma unroll
  for (int t = 0; t < C; ++t) x[t] = substitute_row<kLdA>(as + t * kLdA, x, t, scale[t] * x[t]);
}

// The kB rows from r0 of a column of X (xc, rows ld apart) solved in place against A's diagonal
// block at r0, and (kOut) those below n stored to out (rows out_ld apart). Loads, solve, stores
// apart: with a store between them the compiler could not move the next row's loads of A ahead
// (as and xc may alias, as far as it knows).
template <int kLdA, int kB, bool kOut>
__device__ __forceinline__ void solve_block_column(float* xc, int ld, const float* as, int r0, float* out = nullptr,
                                                   int out_ld = 0, int n = 0) {
  float x[kB];
#pragma unroll
  for (int i = 0; i < kB; ++i) x[i] = xc[(r0 + i) * ld];
#pragma unroll
  for (int i = 0; i < kB; ++i) x[i] = substitute_row<kLdA>(as + (r0 + i) * kLdA + r0, x, i, x[i]);
#pragma unroll
  for (int i = 0; i < kB; ++i) {
    xc[(r0 + i) * ld] = x[i];
    if (kOut && r0 + i < n) out[(r0 + i) * out_ld] = x[i];
  }
}

// (I + A) X = diag(scale) R for W (R = K in ks, scale wscale) and U' (R = V in vs, scale betas)
// together, X over R in shared memory and out to w_out / u_out, in blocks of 16 rows: block b's
// rows first take R_b scaled minus A[b][0, 16b) X[0, 16b) as a 3xTF32 product (the warps over
// column tiles), then a thread per column solves the block's own 16 rows. The serial work per
// column is four 16-row solves instead of one of 64 rows: about a quarter of the scalar
// multiply-adds, the rest on tensor cores (prep 54-55 -> 50 us at 32 x d128 x 1024 on the H200).
template <int D, int kLdX, int kLdA>
__device__ __forceinline__ void blocked_substitute(float* ks, float* vs, const float* as, const float* wscale,
                                                   const float* betas, float* w_out, float* u_out, int n, int warp,
                                                   int lane) {
  constexpr int kB = 16;                     // rows a block
  constexpr int kWarpCols = 2 * D / kWarps;  // the columns of the product a warp takes
  constexpr int kT = kWarpCols / 8;
  static_assert(D % kWarpCols == 0 && kT >= 1 && 2 * D <= kThreads, "a warp's columns lie in K or in V");
  const int c0 = warp * kWarpCols;
  float* const xw = c0 < D ? ks + c0 : vs + (c0 - D);  // this warp's first column
  const float* const sw = c0 < D ? wscale : betas;
  const int r = lane >> 2, q = lane & 3;
#pragma unroll 1
  for (int r0 = 0; r0 < C; r0 += kB) {
    // Y = scale R - A[r0.., 0..r0) X[0..r0, ..) for this block's rows, in place of R.
    Acc part[kT];
    for (int k0 = 0; k0 < r0; k0 += 8) {
      float fa[4];
      load_a(fa, as, kLdA, r0, k0, lane);
      const Split<4> sa(fa);
#pragma unroll
      for (int j = 0; j < kT; ++j) {
        const float fb[2] = {xw[(k0 + q) * kLdX + 8 * j + r], xw[(k0 + q + 4) * kLdX + 8 * j + r]};
        part[j].add(sa, Split<2>(fb));
      }
    }
#pragma unroll
    for (int j = 0; j < kT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = c_row(r0, lane, e), cc = c_col(j, lane, e);
        xw[t * kLdX + cc] = sw[t] * xw[t * kLdX + cc] - part[j].sum(e);
      }
    __syncthreads();
    // The block's own rows, a column a thread.
    if (threadIdx.x < 2 * D) {
      const int col = threadIdx.x % D;
      solve_block_column<kLdA, kB, true>((threadIdx.x < D ? ks : vs) + col, kLdX, as, r0,
                                         (threadIdx.x < D ? w_out : u_out) + col, D, n);
    }
    __syncthreads();  // X's block is there for the next blocks' products
  }
}

// K K^T and Q K^T over the columns [k_begin, k_stop) of K and Q (rows kLdX apart) for this warp's
// kP tiles of 16 x 8 in row block row0 from column tile col_tile0, 3xTF32 into kk and qk.
template <int kLdX, int kP>
__device__ __forceinline__ void key_products(Acc (&kk)[kP], Acc (&qk)[kP], const float* ks, const float* qs, int row0,
                                             int col_tile0, int k_begin, int k_stop, int lane) {
#pragma unroll 2
  for (int k0 = k_begin; k0 < k_stop; k0 += 8) {
    float fk[4], fq[4];
    load_a(fk, ks, kLdX, row0, k0, lane);
    load_a(fq, qs, kLdX, row0, k0, lane);
    const Split<4> sk(fk), sq(fq);
#pragma unroll
    for (int j = 0; j < kP; ++j) {
      float fb[2];
      load_b_t(fb, ks, kLdX, k0, 8 * (col_tile0 + j), lane);
      const Split<2> sb(fb);
      kk[j].add(sk, sb);
      qk[j].add(sq, sb);
    }
  }
}

// kTwoPerSm (v3): V is loaded into Q's buffer once Q K^T is done, so that the shared memory of
// two CTAs fits one SM and one CTA's waits overlap the other's work.
template <int D, bool kTC, bool kTwoPerSm>
constexpr size_t prep_smem() {
  return sizeof(float) * ((kTwoPerSm ? 2 : 3) * C * Strides<D, kTC>::kX + C * Strides<D, kTC>::kA);
}

template <int D, bool kTC, bool kTwoPerSm>
__global__ void __launch_bounds__(kThreads, kTwoPerSm ? 2 : 1) gdn_prep(GdnArgs a, Scratch s) {
  using L = Strides<D, kTC>;
  const int c = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t t0 = int64_t{c} * C;
  const int n = static_cast<int>(a.T - t0 < C ? a.T - t0 : C);
  const int hk = h % a.Hk, bqk = b / (a.B / a.Bqk);
  const int64_t unit = (int64_t{b} * a.Hv + h) * s.chunks + c;

  DYNAMIC_SHARED(float4, smem4);  // float4: 16-byte aligned, as the copies and float4 reads need
  float* smem = reinterpret_cast<float*>(smem4);
  float* ks = smem;                                    // [C][kX]
  float* qs = ks + C * L::kX;                          // [C][kX]
  float* vs = kTwoPerSm ? qs : qs + C * L::kX;         // [C][kX]
  float* as = (kTwoPerSm ? qs : vs) + C * L::kX;       // [C][kA]
  __shared__ double gs[C];
  __shared__ float betas[C], wscale[C];

  ChunkGates gates;
  gates.fetch(a, b, h, t0, n);
  const float* v_rows = a.v + b * a.v_seq + h * a.v_head + t0 * a.v_token;
  // K and Q in two groups of column halves (V with the second, where it comes early): the
  // tensor-core products start on the first half while the second lands (prep 46.5 -> 45.7 us).
  const float* k_rows = a.k + bqk * a.k_seq + hk * a.k_head + t0 * a.k_token;
  const float* q_rows = a.q + bqk * a.q_seq + hk * a.q_head + t0 * a.q_token;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    load_rows_async<D / 2>(ks + half * (D / 2), L::kX, k_rows + half * (D / 2), a.k_token, n);
    load_rows_async<D / 2>(qs + half * (D / 2), L::kX, q_rows + half * (D / 2), a.q_token, n);
    if (!kTwoPerSm && half == 1) load_rows_async<D>(vs, L::kX, v_rows, a.v_token, n);
    async_commit();
  }
  gates.publish(betas, gs);
  if constexpr (kTC) async_wait<1>();
  else async_wait<0>();
  __syncthreads();
  if (threadIdx.x < C) wscale[threadIdx.x] = betas[threadIdx.x] * expf(static_cast<float>(gs[threadIdx.x]));

  float* p = s.p + unit * C * C;
  auto store = [&](int t, int u, float kk, float qk) { store_a_p(as, L::kA, p, C, gs, betas, n, t, u, kk, qk); };
  if constexpr (kTC) {
    // K K^T and Q K^T: 4 x 8 tiles of 16 x 8 each, kP of them in a row per warp.
    constexpr int kP = 32 / kWarps;
    const int row0 = 16 * (warp / (8 / kP)), col_tile0 = (warp % (8 / kP)) * kP;
    Acc kk[kP], qk[kP];
    // Tiles wholly above the diagonal stay zero (A and P are lower triangular): warps whose
    // tiles all are skip the products.
    const int k_end = 8 * col_tile0 < row0 + 16 ? D : 0;
    key_products<L::kX>(kk, qk, ks, qs, row0, col_tile0, 0, k_end / 2, lane);
    async_wait<0>();  // the second half (and V without kTwoPerSm)
    __syncthreads();
    key_products<L::kX>(kk, qk, ks, qs, row0, col_tile0, k_end / 2, k_end, lane);
#pragma unroll
    for (int j = 0; j < kP; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        store(c_row(row0, lane, e), c_col(col_tile0 + j, lane, e), kk[j].sum(e), qk[j].sum(e));
  } else {
    for (int idx = threadIdx.x; idx < C * C; idx += kThreads) {
      const int t = idx / C, u = idx % C;
      float kk = 0, qk = 0;
      if (u <= t && t < n)
        for (int i = 0; i < D; ++i) {
          const float ku = ks[u * L::kX + i];
          kk += ks[t * L::kX + i] * ku;
          qk += qs[t * L::kX + i] * ku;
        }
      store(t, u, kk, qk);
    }
  }
  if (threadIdx.x < C) s.g[unit * C + threadIdx.x] = gs[threadIdx.x];
  // Before the scan, which starts after prep.
  if (s.ready != nullptr && threadIdx.x < D / kTileV) s.ready[unit * (D / kTileV) + threadIdx.x] = 0;
  if constexpr (kTwoPerSm) {
    __syncthreads();  // every warp is done with Q
    load_rows_async<D>(vs, L::kX, v_rows, a.v_token, n);
    async_commit();
    async_wait<0>();
  }
  __syncthreads();

  if constexpr (kTC) {
    blocked_substitute<D, L::kX, L::kA>(ks, vs, as, wscale, betas, s.w + unit * C * D, s.u + unit * C * D, n, warp,
                                        lane);
    return;
  }
  // Forward substitution, one column of W (threads 0..D-1) or of U' (D..2D-1) per thread.
  if (threadIdx.x < 2 * D) {
    const bool is_w = threadIdx.x < D;
    const int col = threadIdx.x % D;
    const float* rhs = is_w ? ks : vs;
    float x[C];
#pragma unroll
    for (int t = 0; t < C; ++t) x[t] = rhs[t * L::kX + col];
    forward_substitute<L::kA>(x, as, is_w ? wscale : betas);
    float* dst = (is_w ? s.w : s.u) + unit * C * D + col;
#pragma unroll
    for (int t = 0; t < C; ++t)
      if (t < n) dst[t * D] = x[t];
  }
}

template <int D, bool kTC, bool kSplit>
cudaError_t start_prep(const GdnArgs& a, const Scratch& s, cudaStream_t stream) {
  static std::atomic<uint64_t> ready{0};
  return start(gdn_prep<D, kTC, kSplit>, dim3(static_cast<unsigned>(s.chunks), a.Hv, a.B), prep_smem<D, kTC, kSplit>(),
               ready, stream, a, s);
}

}  // namespace
}  // namespace gdn
