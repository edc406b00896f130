// v3's scan (scan.cuh: split state and U, O inside the scan) in the form the variants built on it
// change: v6 (kAlongside: prep runs beside the scan, which waits for each chunk's ready flag) and
// v10 (kFold: chunks folded by prep, see folded.cu). v6 keeps v3's scan as it was before the
// producer warp and the exchange of half sums (every warp issues copies and computes W S and Q S
// over all of the state's rows): those would not leave prep room on the SM.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../chunks.cuh"
#include "../products.cuh"
#include "../scan.cuh"
#include "device.cuh"

namespace gdn {
namespace {

// v10 folds a chunk (prep writes P' and W2 instead of P, W and U'; see folded.cu) unless it holds
// a snapshot, which needs the chunk's U itself.
__device__ __forceinline__ bool folds(const GdnArgs& a, int64_t t0, int n) {
  return a.K == 1 || first_snapshot(a, t0, n) == n;
}

// chunk_decays, and for a folded chunk gtail one below n (W2 holds the decays).
__device__ __forceinline__ void chunk_decays_folded(const double* g, int n, float* ge, float* gtail, bool folded) {
  const int tid = static_cast<int>(threadIdx.x);
  if (tid < C) {
    ge[tid] = expf(static_cast<float>(g[tid]));
    gtail[tid] = tid < n ? (folded ? 1.0f : expf(static_cast<float>(g[n - 1] - g[tid]))) : 0.0f;
  }
}

// v3's shared memory, without the half sums' exchange for v6.
template <int D, bool kAlongside>
constexpr size_t split_scan_smem() {
  return scan_smem<D, true, true, false>() - (kAlongside ? sizeof(float) * kThreads * kSwapFloats : 0);
}

// Two CTAs an SM's worth of registers (128 a thread) for v6, whose CTA shares the SM with a prep
// CTA of the same size (121 used, no spills, against 165 uncapped). kFold: v3 on folded chunks
// (see fold_operands): K in W's buffer, V in U''s and W2 in K's.
template <int D, bool kAlongside, bool kFold>
__global__ void __launch_bounds__(kThreads + (kAlongside ? 0 : 32), kAlongside ? 2 : 1)
    gdn_scan_split(GdnArgs a, Scratch s) {
  static_assert(!(kAlongside && kFold), "v6 and v10 each build on v3");
  constexpr int kCols = kTileV;
  using L = Strides<D, true, kCols>;
  const int h = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int col0 = blockIdx.x * kCols;
  const int hk = h % a.Hk, bqk = b / (a.B / a.Bqk);
  constexpr bool kProd = !kAlongside;  // v3's producer warp and half sums (scan.cuh)
  const bool producer = kProd && warp == kWarps;

  DYNAMIC_SHARED(float4, smem4);  // float4: 16-byte aligned, as the copies need
  float* smem = reinterpret_cast<float*>(smem4);
  // The state tile S[i][col0 + c] of this CTA's columns ([D] rows) and U ([C] rows).
  float2* pairs = reinterpret_cast<float2*>(smem);
  const Cells<true> st{pairs, kSplitLd<kCols>}, us{pairs + D * kSplitLd<kCols>, kSplitLd<kCols>};
  float* up = reinterpret_cast<float*>(pairs + (D + C) * kSplitLd<kCols>);  // [C][kS]: U' (this CTA's columns)
  float* ws = up + C * L::kS;      // [C][kX]: W
  float* kx = ws + C * L::kX;      // [C][kX]: K
  float* qx = kx + C * L::kX;      // [C][kX]: Q
  float* ps = qx + C * L::kX;      // [C][kA]: P
  float* swap = ps + C * L::kA;    // [kSwapFloats][kThreads]: the half sums
  alignas(16) __shared__ double gs[2][C];  // log-gates of this chunk and the next (cp.async: 16-byte aligned)
  __shared__ float ge[C], gtail[C], decay[C];

  const float* kb = a.k + bqk * a.k_seq + hk * a.k_head;
  const float* qb = a.q + bqk * a.q_seq + hk * a.q_head;
  const float* vb = a.v + b * a.v_seq + h * a.v_head + col0;  // v10's V
  float* head_out = a.state_out + (int64_t{b} * a.Hv + h) * D * D;  // snapshot slot 0 of this head
  const int64_t unit0 = (int64_t{b} * a.Hv + h) * s.chunks;
  auto rows_in = [&](int64_t c) { return static_cast<int>(a.T - c * C < C ? a.T - c * C : C); };

  // Each operand's copy for chunk c by `nt` threads (a std::integral_constant), tid the caller's
  // index among them; the caller commits.
  using All = std::integral_constant<int, kThreads>;
  using Lanes = std::integral_constant<int, 32>;
  auto folded_at = [&](int64_t c) { return kFold && folds(a, c * C, rows_in(c)); };
  auto copy_w = [&](int64_t c, auto nt, int tid) {
    if (folded_at(c))
      load_rows_async<D, decltype(nt)::value>(ws, L::kX, kb + c * C * a.k_token, a.k_token, rows_in(c), tid);
    else
      load_rows_async<D, decltype(nt)::value>(ws, L::kX, s.w + (unit0 + c) * C * D, D, rows_in(c), tid);
  };
  auto copy_u = [&](int64_t c, auto nt, int tid) {
    if (folded_at(c))
      load_rows_async<kCols, decltype(nt)::value>(up, L::kS, vb + c * C * a.v_token, a.v_token, rows_in(c), tid);
    else
      load_rows_async<kCols, decltype(nt)::value>(up, L::kS, s.u + (unit0 + c) * C * D + col0, D, rows_in(c), tid);
  };
  auto copy_g = [&](int64_t c, auto nt, int tid) {
    for (int i = tid; i < C / 2; i += decltype(nt)::value) copy_async_16(&gs[c & 1][2 * i], s.g + (unit0 + c) * C + 2 * i);
  };
  auto copy_q = [&](int64_t c, auto nt, int tid) {
    load_rows_async<D, decltype(nt)::value>(qx, L::kX, qb + c * C * a.q_token, a.q_token, rows_in(c), tid);
  };
  auto copy_p = [&](int64_t c, auto nt, int tid) {
    load_rows_async<C, decltype(nt)::value>(ps, L::kA, s.p + (unit0 + c) * C * C, C, C, tid);
  };
  auto copy_k = [&](int64_t c, auto nt, int tid) {
    if (folded_at(c))
      load_rows_async<D, decltype(nt)::value>(kx, L::kX, s.w + (unit0 + c) * C * D, D, rows_in(c), tid);
    else
      load_rows_async<D, decltype(nt)::value>(kx, L::kX, kb + c * C * a.k_token, a.k_token, rows_in(c), tid);
  };

  // v6: three groups of copies per chunk, each issued by every thread as soon as its buffers are
  // free. Every step commits a group (empty past the last chunk).
  const int tid = static_cast<int>(threadIdx.x);
  [[maybe_unused]] auto issue_wu = [&](int64_t c) {  // W, U', G
    if (c < s.chunks) {
      copy_w(c, All{}, tid);
      copy_u(c, All{}, tid);
      copy_g(c, All{}, tid);
    }
    async_commit();
  };
  [[maybe_unused]] auto issue_qp = [&](int64_t c) {  // Q, P
    if (c < s.chunks) {
      copy_q(c, All{}, tid);
      copy_p(c, All{}, tid);
    }
    async_commit();
  };
  [[maybe_unused]] auto issue_k = [&](int64_t c) {  // K
    if (c < s.chunks) copy_k(c, All{}, tid);
    async_commit();
  };

  // The producer's copies, by its lanes: P, K, the next Q and the next W U' G, one group each.
  [[maybe_unused]] auto produce_wu = [&](int64_t c) {
    if (c < s.chunks) {
      copy_w(c, Lanes{}, lane);
      copy_u(c, Lanes{}, lane);
      copy_g(c, Lanes{}, lane);
    }
    async_commit();
  };
  [[maybe_unused]] auto produce_q = [&](int64_t c) {
    if (c < s.chunks) copy_q(c, Lanes{}, lane);
    async_commit();
  };
  [[maybe_unused]] auto produce_pk = [&](int64_t c) {
    copy_p(c, Lanes{}, lane);
    async_commit();
    copy_k(c, Lanes{}, lane);
    async_commit();
  };

  // v6: chunk c's W, U', P and G are there once prep's flag for it is (before anything copies them).
  [[maybe_unused]] auto wait_prep = [&](int64_t c) {
    if (c < s.chunks) ready_wait(s.ready + unit0 + c, 1);
    else __syncthreads();
  };
  if constexpr (kAlongside) wait_prep(0);
  if constexpr (kProd) {
    if (producer) {
      produce_q(0);
      produce_wu(0);
    }
  } else {
    issue_wu(0);
    issue_qp(0);
    issue_k(0);
  }
  load_state<D, kCols>(st, a.state + b * a.state_seq + int64_t{h} * D * D, col0, producer);

  // The tiles of the chunk's C x kCols products (U, O), kN in a row per warp, and of the D x kCols
  // state (the snapshots and the state update), as in scan.cuh.
  constexpr int kColTiles = kCols / 8, kN = (C / 16) * kColTiles / kWarps;
  const int trow0 = 16 * (warp / (kColTiles / kN)), tcol0 = (warp % (kColTiles / kN)) * kN;
  constexpr int kTiles = (D / 16) * kColTiles / kWarps;
  const int srow0 = 16 * (warp / (kColTiles / kTiles)), scol0 = (warp % (kColTiles / kTiles)) * kTiles;

  for (int64_t c = 0; c < s.chunks; ++c) {
    const int64_t t0 = c * C;
    const int n = rows_in(c);
    const double* g = gs[c & 1];
    const bool folded = folded_at(c);
    // W, U', G of this chunk (the producer: and Q, whose Q S goes with W S; P comes before O).
    if constexpr (kProd) {
      if (producer) async_wait<0>();
    } else {
      async_wait<1>();
    }
    __syncthreads();  // ... for every thread; the previous chunk is done with ge, gtail, decay
    chunk_decays_folded(g, n, ge, gtail, folded);

    // U = U' - W S with Q S for O; folded, Y = V - e^{G} K S in its place.
    float qs_acc[kN][4] = {};
    float acc[kN][4] = {};
    if constexpr (kProd) {
      // As in scan.cuh: this warp's half of the rows of S (kh) for all four column tiles; it keeps
      // tiles [2 kh, 2 kh + 2) and hands the other two to the warp of the other half.
      static_assert(kN == 2 && kColTiles == 4, "two warps a row block, two column tiles each");
      const int kh = warp & 1;
      float part[2][kColTiles][4] = {};
      if (producer) {
        produce_pk(c);
      } else {
        mma_rows<L::kX, 1>(part, {ws, qx}, st, trow0, 0, kh * (D / 2), (kh + 1) * (D / 2), lane);
        float* out = swap + warp * kSwapFloats * 32 + lane;
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
          for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) out[((m * 2 + j) * 4 + e) * 32] = kh ? part[m][j][e] : part[m][2 + j][e];
      }
      __syncthreads();
      if (producer) produce_q(c + 1);  // every warp is done reading Q
      const float* in = swap + (warp ^ 1) * kSwapFloats * 32 + lane;
#pragma unroll
      for (int j = 0; j < 2 && !producer; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int x = (j * 4 + e) * 32, y = ((2 + j) * 4 + e) * 32;
          acc[j][e] = (kh ? part[0][2 + j][e] : part[0][j][e]) + in[x];
          qs_acc[j][e] = (kh ? part[1][2 + j][e] : part[1][j][e]) + in[y];
        }
    } else {
      float ws_qs[2][kN][4] = {};
      mma_rows<L::kX, 2>(ws_qs, {ws, qx}, st, trow0, tcol0, 0, D, lane);
#pragma unroll
      for (int j = 0; j < kN; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] = ws_qs[0][j][e], qs_acc[j][e] = ws_qs[1][j][e];
    }
#pragma unroll
    for (int j = 0; j < kN && !producer; ++j)
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        const int t = c_row(trow0, lane, e), cc = c_col(tcol0 + j, lane, e);
        const float u0 = t < n ? up[t * L::kS + cc] - (folded ? ge[t] * acc[j][e] : acc[j][e]) : 0.0f;
        const float u1 = t < n ? up[t * L::kS + cc + 1] - (folded ? ge[t] * acc[j][e + 1] : acc[j][e + 1]) : 0.0f;
        us.set_pair(t, cc, u0, u1);
      }
    // U is complete; W and U' are free.
    if constexpr (kAlongside) {
      wait_prep(c + 1);
      issue_wu(c + 1);
    } else {
      if (producer) async_wait<2>();  // P of this chunk (K and the next Q may still be on their way)
      __syncthreads();
    }

    // O = scale (e^{G} Q S + P U).
    {
      float* ob = a.out + ((b * a.T + t0) * a.Hv + h) * int64_t{D} + col0;
      const int64_t o_token = int64_t{a.Hv} * D;
      const float scale = rsqrtf(static_cast<float>(D));
      attention_out<L::kA>(qs_acc, ge, ps, us, ob, o_token, scale, trow0, tcol0, n, lane, producer);
      if constexpr (!kProd) {
        __syncthreads();  // Q and P are free
        issue_qp(c + 1);
      }
    }

    // The snapshots this chunk holds, then the next state.
    if constexpr (kProd) {
      if (producer) async_wait<1>();  // K (the next Q may still be on its way)
    } else {
      async_wait<2>();  // K
    }
    __syncthreads();
    if (a.K > 1)
      write_snapshots<D, L::kX, kTiles>(a, head_out, t0, n, g, ge, decay, kx, st, us, col0, srow0, scol0, lane,
                                        producer);
    // S <- e^{G_last} S + K~^T U with K~[u][i] = gtail[u] K[u][i]; the producer copies the next
    // chunk's W U' G meanwhile (free since U).
    const float glast = ge[n - 1];
    Acc sacc[kTiles];
    float next[kTiles][4];
    if (producer) {
      produce_wu(c + 1);
    } else {
      rank_update<L::kX>(sacc, gtail, kx, us, srow0, scol0, C, lane);
#pragma unroll
      for (int j = 0; j < kTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          next[j][e] = glast * st.get(c_row(srow0, lane, e), c_col(scol0 + j, lane, e)) + sacc[j].sum(e);
    }
    __syncthreads();  // every thread is done reading the old state and K
#pragma unroll
    for (int j = 0; j < kTiles && !producer; ++j)
#pragma unroll
      for (int e = 0; e < 4; e += 2)
        st.set_pair(c_row(srow0, lane, e), c_col(scol0 + j, lane, e), next[j][e], next[j][e + 1]);
    if constexpr (!kProd) issue_k(c + 1);
  }
  if (a.K == 1) {
    __syncthreads();
    store_state<D, kCols>(head_out, st, col0, producer);
  }
  // v6 started early: the stream's next kernel comes after prep too.
  if constexpr (kAlongside) wait_for_primary();
}

}  // namespace
}  // namespace gdn
