// scan: grid (S / 32, Hv, B) (v4: S / 16), a CTA owns 32 value columns of one head's state (columns
// of the delta rule are independent) and walks the chunks in order, from prep's W, U', P and G:
//   U = U' - W S;  O = scale (e^{G} Q S + P U);  snapshots;  S <- e^{G_last} S + K~^T U.
// v4's scan leaves O to gdn_out (output.cuh): it writes U and each chunk's starting state instead.
#pragma once

#include <cstdint>
#include <type_traits>

#include "chunks.cuh"
#include "device.cuh"
#include "products.cuh"

namespace gdn {
namespace {

// Row stride, in pairs, of the split state and U (v3, v4): kCols + 4 puts a fragment's 64-bit
// loads on 32 distinct banks in each half-warp.
template <int kCols>
constexpr int kSplitLd = kCols + 4;

// The scan's value columns a CTA. kApart (v4) leaves O to gdn_out, so the scan keeps neither Q
// nor P and writes U and each chunk's starting state instead.
template <bool kApart>
constexpr int kScanCols = kApart ? kTileV4 : kTileV;

// v2, v3: the two warps of a row block compute W S and Q S over one half of the state's rows
// each, for all of the CTA's columns, and then swap the partial sums of each other's columns
// through shared memory (16 floats a thread): half the A operands' loads and splits per warp, and
// chains half as long.
template <bool kTC, bool kApart>
constexpr bool kHalvesK = kTC && !kApart;
constexpr int kSwapFloats = 16;  // per thread: 2 operands x 2 column tiles x 4

// v2, v3: a ninth warp (the producer) issues every copy, so that the eight that compute never
// stall issuing them. Issuing Q and P alone held each of v3's warps 1406 of a chunk's 12800
// cycles (clock64 stamps, 32 x d128 x 1024), as long with 4 heads as with 32: the SM's intake of
// 16-byte copies (about 35 bytes a cycle), not L2. The producer issues P and K while the others
// compute W S and Q S, the next Q once they are done with it, the next W U' G during the state
// update, and waits for each group before the barrier ahead of its first use (v3 174.8 -> 165.5
// us; the next Q after W S Q S rather than in the state update's window: 165.4 -> 161.6 us).
template <bool kTC, bool kApart>
constexpr bool kProducer = kHalvesK<kTC, kApart>;
template <bool kTC, bool kApart>
constexpr int kScanThreads = kThreads + (kProducer<kTC, kApart> ? 32 : 0);

template <int D, bool kTC, bool kSplit, bool kApart>
constexpr size_t scan_smem() {
  constexpr int kCols = kScanCols<kApart>;
  using L = Strides<D, kTC, kCols>;
  const size_t kept =
      kSplit ? sizeof(float2) * (D + C) * kSplitLd<kCols> : sizeof(float) * (D + C) * L::kS;
  const size_t swap = kHalvesK<kTC, kApart> ? sizeof(float) * kThreads * kSwapFloats : 0;
  return kept + swap + sizeof(float) * (C * L::kS + (kApart ? 2 : 3) * C * L::kX + (kApart ? 0 : C * L::kA));
}

// O = scale (e^{G} Q S + P U) on tensor cores for this warp's kN tiles of 16 x 8 from (trow0,
// tcol0), o holding Q S on entry, stored to ob (rows o_token floats apart) below row n. P is lower
// triangular: columns past the row tile's last row add nothing. An idle warp (the producer)
// computes nothing.
template <int kLdA, int kN, class U>
__device__ __forceinline__ void attention_out(float (&o)[kN][4], const float* ge, const float* ps, const U& us,
                                              float* ob, int64_t o_token, float scale, int trow0, int tcol0, int n,
                                              int lane, bool idle = false) {
#pragma unroll
  for (int j = 0; j < kN; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) o[j][e] *= ge[c_row(trow0, lane, e)];
  if (!idle) mma_rows<kLdA>(o, ps, us, trow0, tcol0, trow0 + 16, lane);
#pragma unroll
  for (int j = 0; j < kN && !idle; ++j) store_c_scaled(ob, o_token, o[j], scale, trow0, tcol0 + j, n, lane);
}

// Snapshot S_t = e^{G_t} S + K~^T U of a split state (v3, v4), with decay[u] the decays to
// token t (zero past t): the state update's product on tensor cores over the rows up to t, written
// to dst in the state's transposed layout (this CTA's columns from col0).
template <int D, int kLdK, int kTiles>
__device__ __forceinline__ void write_snapshot(float* dst, float ge_t, const float* decay, const float* kx,
                                               const Cells<true>& st, const Cells<true>& us, int t, int col0,
                                               int srow0, int scol0, int lane) {
  Acc acc[kTiles];
  rank_update<kLdK>(acc, decay, kx, us, srow0, scol0, (t + 8) & ~7, lane);
#pragma unroll
  for (int j = 0; j < kTiles; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = c_row(srow0, lane, e), cc = c_col(scol0 + j, lane, e);
      dst[int64_t{col0 + cc} * D + i] = ge_t * st.get(i, cc) + acc[j].sum(e);
    }
}

// The snapshots the chunk at t0 (n rows, log-gates g) holds, of a split state (write_snapshot),
// into their slots of head_out, each with its decays in decay[]; an idle warp (the producer) only
// meets the others at the barriers.
template <int D, int kLdK, int kTiles>
__device__ __forceinline__ void write_snapshots(const GdnArgs& a, float* head_out, int64_t t0, int n, const double* g,
                                                const float* ge, float* decay, const float* kx, const Cells<true>& st,
                                                const Cells<true>& us, int col0, int srow0, int scol0, int lane,
                                                bool idle) {
  for (int t = first_snapshot(a, t0, n); t < n; ++t) {
    const int64_t slot = a.T - 1 - (t0 + t);
    snapshot_decays(g, t, decay);
    float* dst = head_out + slot * a.slot_stride;
    if (idle) continue;  // after both barriers of the iteration
    write_snapshot<D, kLdK, kTiles>(dst, ge[t], decay, kx, st, us, t, col0, srow0, scol0, lane);
  }
}

// Two CTAs an SM's worth of registers (128 a thread) for v4, whose CTAs pair up.
template <int D, bool kTC, bool kSplit, bool kApart>
__global__ void __launch_bounds__(kScanThreads<kTC, kApart>, kApart ? 2 : 1) gdn_scan(GdnArgs a, Scratch s) {
  constexpr int kCols = kScanCols<kApart>;
  static_assert(kTC || !kSplit, "only the tensor-core form keeps split operands");
  static_assert(kTC || kCols == 32, "v1 gives each lane a column");
  static_assert(!kApart || kSplit, "v4 builds on v3");
  using L = Strides<D, kTC, kCols>;
  constexpr int kRowsT = C / kWarps;  // chunk rows per warp
  constexpr int kRowsI = D / kWarps;  // state rows per warp
  const int h = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int col0 = blockIdx.x * kCols;
  const int hk = h % a.Hk, bqk = b / (a.B / a.Bqk);
  constexpr bool kProd = kProducer<kTC, kApart>;
  const bool producer = kProd && warp == kWarps;

  DYNAMIC_SHARED(float4, smem4);  // float4: 16-byte aligned, as the copies need
  float* smem = reinterpret_cast<float*>(smem4);
  // The state tile S[i][col0 + c] of this CTA's columns ([D] rows) and U ([C] rows).
  Cells<kSplit> st, us;
  float* after;
  if constexpr (kSplit) {
    float2* pairs = reinterpret_cast<float2*>(smem);
    st = {pairs, kSplitLd<kCols>};
    us = {pairs + D * kSplitLd<kCols>, kSplitLd<kCols>};
    after = reinterpret_cast<float*>(pairs + (D + C) * kSplitLd<kCols>);
  } else {
    st = {smem, L::kS};
    us = {smem + D * L::kS, L::kS};
    after = smem + (D + C) * L::kS;
  }
  float* up = after;               // [C][kS]: U' (this CTA's columns)
  float* ws = up + C * L::kS;      // [C][kX]: W
  float* kx = ws + C * L::kX;      // [C][kX]: K
  float* qx = kx + C * L::kX;      // [C][kX]: Q (not with kApart)
  float* ps = qx + C * L::kX;      // [C][kA]: P (not with kApart)
  float* swap = ps + C * L::kA;    // [kSwapFloats][kThreads]: kHalvesK's partial sums
  alignas(16) __shared__ double gs[2][C];  // log-gates of this chunk and the next (cp.async: 16-byte aligned)
  __shared__ float ge[C], gtail[C], decay[C];

  const float* kb = a.k + bqk * a.k_seq + hk * a.k_head;
  const float* qb = a.q + bqk * a.q_seq + hk * a.q_head;
  float* head_out = a.state_out + (int64_t{b} * a.Hv + h) * D * D;  // snapshot slot 0 of this head
  const int64_t unit0 = (int64_t{b} * a.Hv + h) * s.chunks;
  auto rows_in = [&](int64_t c) { return static_cast<int>(a.T - c * C < C ? a.T - c * C : C); };

  // Each operand's copy for chunk c by `nt` threads (a std::integral_constant), tid the caller's
  // index among them; the caller commits.
  using All = std::integral_constant<int, kThreads>;
  using Lanes = std::integral_constant<int, 32>;
  auto copy_w = [&](int64_t c, auto nt, int tid) {
    load_rows_async<D, decltype(nt)::value>(ws, L::kX, s.w + (unit0 + c) * C * D, D, rows_in(c), tid);
  };
  auto copy_u = [&](int64_t c, auto nt, int tid) {
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
    load_rows_async<D, decltype(nt)::value>(kx, L::kX, kb + c * C * a.k_token, a.k_token, rows_in(c), tid);
  };

  // Without kProducer: three groups of copies per chunk, each issued by every thread as soon as its
  // buffers are free. Every step commits a group (empty past the last chunk, and for Q and P with
  // kApart), so async_wait<2> always means "this step's".
  const int tid = static_cast<int>(threadIdx.x);
  auto issue_wu = [&](int64_t c) {  // W, U', G
    if (c < s.chunks) {
      copy_w(c, All{}, tid);
      copy_u(c, All{}, tid);
      copy_g(c, All{}, tid);
    }
    async_commit();
  };
  auto issue_qp = [&](int64_t c) {  // Q, P
    if (!kApart && c < s.chunks) {
      copy_q(c, All{}, tid);
      copy_p(c, All{}, tid);
    }
    async_commit();
  };
  auto issue_k = [&](int64_t c) {  // K
    if (c < s.chunks) copy_k(c, All{}, tid);
    async_commit();
  };

  // kProducer's copies, by the producer's lanes: P, K, the next Q and the next W U' G, one group
  // each.
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

  if constexpr (kApart) launch_dependents();  // gdn_out may start: it waits chunk by chunk
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

  // The tiles of the chunk's C x kCols products (U, O), kN in a row per warp: the C / 16 x kCols / 8
  // tiles of 16 x 8 split evenly over the warps.
  constexpr int kColTiles = kCols / 8, kN = (C / 16) * kColTiles / kWarps;
  static_assert(kN >= 1 && kColTiles % kN == 0, "the chunk's tiles split evenly over the warps");
  const int trow0 = 16 * (warp / (kColTiles / kN)), tcol0 = (warp % (kColTiles / kN)) * kN;
  // The same for the D x kCols state (the tensor-core forms' snapshots and state update).
  constexpr int kTiles = kTC ? (D / 16) * kColTiles / kWarps : 1;
  static_assert(!kTC || (kTiles >= 1 && kColTiles % kTiles == 0), "every warp has a tile of the state");
  const int srow0 = 16 * (warp / (kColTiles / kTiles)), scol0 = (warp % (kColTiles / kTiles)) * kTiles;

  for (int64_t c = 0; c < s.chunks; ++c) {
    const int64_t t0 = c * C;
    const int n = rows_in(c);
    const double* g = gs[c & 1];
    // W, U', G of this chunk (kProducer: and Q, whose Q S goes with W S; P comes before O).
    if constexpr (kProd) {
      if (producer) async_wait<0>();
    } else {
      async_wait<2>();
    }
    __syncthreads();  // ... for every thread; the previous chunk is done with ge, gtail, decay
    chunk_decays(g, n, ge, gtail);
    if constexpr (kApart) {
      // The state this chunk starts from, for gdn_out.
      store_rows<D, kCols>(s.states + (unit0 + c) * D * D + col0, st, D);
    }

    // U = U' - W S (v2, v3: with Q S for O).
    [[maybe_unused]] float qs_acc[kN][4] = {};
    if constexpr (kTC) {
      float acc[kN][4] = {};
      if constexpr (kApart) {
        mma_rows<L::kX>(acc, ws, st, trow0, tcol0, D, lane);
      } else {
        // This warp's half of the rows of S (kh) for all four column tiles; it keeps tiles
        // [2 kh, 2 kh + 2) (its own, tcol0) and hands the other two to the warp of the other half.
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
      }
      float* u_out = s.u + (unit0 + c) * C * D + col0;  // kApart: U over U', which only this CTA read
#pragma unroll
      for (int j = 0; j < kN && !producer; ++j)
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
          const int t = c_row(trow0, lane, e), cc = c_col(tcol0 + j, lane, e);
          const float u0 = t < n ? up[t * L::kS + cc] - acc[j][e] : 0.0f;
          const float u1 = t < n ? up[t * L::kS + cc + 1] - acc[j][e + 1] : 0.0f;
          us.set_pair(t, cc, u0, u1);
          if (kApart && t < n) *reinterpret_cast<float2*>(u_out + t * D + cc) = float2{u0, u1};
        }
    } else {
      float acc[kRowsT];
#pragma unroll
      for (int rr = 0; rr < kRowsT; ++rr) {
        const int t = warp * kRowsT + rr;
        acc[rr] = t < n ? up[t * L::kS + lane] : 0.0f;
      }
      for (int i = 0; i < D; ++i) {
        const float sv = st.get(i, lane);
#pragma unroll
        for (int rr = 0; rr < kRowsT; ++rr) acc[rr] -= ws[(warp * kRowsT + rr) * L::kX + i] * sv;
      }
#pragma unroll
      for (int rr = 0; rr < kRowsT; ++rr) {
        const int t = warp * kRowsT + rr;
        us.set(t, lane, t < n ? acc[rr] : 0.0f);
      }
    }
    // U is complete; W and U' are free (with kApart gdn_out may take this chunk).
    if constexpr (kApart) ready_signal(s.ready + (unit0 + c) * (D / kTileV) + col0 / kTileV);
    else {
      if (producer) async_wait<2>();  // P of this chunk (K and the next Q may still be on their way)
      __syncthreads();
    }
    if constexpr (!kProd) issue_wu(c + 1);

    // O = scale (e^{G} Q S + P U).
    if constexpr (!kApart) {
      if constexpr (!kTC) {
        async_wait<2>();  // Q, P
        __syncthreads();
      }
      float* ob = a.out + ((b * a.T + t0) * a.Hv + h) * int64_t{D} + col0;
      const int64_t o_token = int64_t{a.Hv} * D;
      const float scale = rsqrtf(static_cast<float>(D));
      if constexpr (kTC) {
        attention_out<L::kA>(qs_acc, ge, ps, us, ob, o_token, scale, trow0, tcol0, n, lane, producer);
      } else {
        float acc[kRowsT] = {};
        for (int i = 0; i < D; ++i) {
          const float sv = st.get(i, lane);
#pragma unroll
          for (int rr = 0; rr < kRowsT; ++rr) acc[rr] += qx[(warp * kRowsT + rr) * L::kX + i] * sv;
        }
#pragma unroll
        for (int rr = 0; rr < kRowsT; ++rr) {
          const int t = warp * kRowsT + rr;
          float o = ge[t] * acc[rr];
          for (int u = 0; u <= t; ++u) o += ps[t * L::kA + u] * us.get(u, lane);
          if (t < n) ob[t * o_token + lane] = o * scale;
        }
      }
      if constexpr (!kProd) __syncthreads();  // Q and P are free
    }
    if constexpr (!kProd) issue_qp(c + 1);

    // The snapshots this chunk holds, then the next state.
    if constexpr (kProd) {
      if (producer) async_wait<1>();  // K (the next Q may still be on its way)
    } else {
      async_wait<2>();  // K
    }
    __syncthreads();
    if (a.K > 1) {
      if constexpr (kSplit) {
        write_snapshots<D, L::kX, kTiles>(a, head_out, t0, n, g, ge, decay, kx, st, us, col0, srow0, scol0, lane,
                                          producer);
      } else {
        for (int t = first_snapshot(a, t0, n); t < n; ++t) {
          const int64_t slot = a.T - 1 - (t0 + t);
          snapshot_decays(g, t, decay);
          float* dst = head_out + slot * a.slot_stride;
          if (producer) continue;  // after both barriers of the iteration
#pragma unroll
          for (int rr = 0; rr < kRowsI; ++rr) {
            const int i = warp * kRowsI + rr;
            float v = ge[t] * st.get(i, lane);
            for (int u = 0; u <= t; ++u) v += decay[u] * kx[u * L::kX + i] * us.get(u, lane);
            dst[int64_t{col0 + lane} * D + i] = v;
          }
        }
      }
    }
    const float glast = ge[n - 1];
    if constexpr (kTC) {
      // S <- e^{G_last} S + K~^T U with K~[u][i] = gtail[u] K[u][i]; the producer copies the
      // next chunk's W U' G meanwhile (free since U).
      Acc acc[kTiles];
      float next[kTiles][4];
      if (producer) {
        produce_wu(c + 1);
      } else {
        rank_update<L::kX>(acc, gtail, kx, us, srow0, scol0, C, lane);
#pragma unroll
        for (int j = 0; j < kTiles; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            next[j][e] = glast * st.get(c_row(srow0, lane, e), c_col(scol0 + j, lane, e)) + acc[j].sum(e);
      }
      __syncthreads();  // every thread is done reading the old state and K
#pragma unroll
      for (int j = 0; j < kTiles && !producer; ++j)
#pragma unroll
        for (int e = 0; e < 4; e += 2)
          st.set_pair(c_row(srow0, lane, e), c_col(scol0 + j, lane, e), next[j][e], next[j][e + 1]);
    } else {
      float next[kRowsI];
#pragma unroll
      for (int rr = 0; rr < kRowsI; ++rr) next[rr] = glast * st.get(warp * kRowsI + rr, lane);
      for (int u = 0; u < n; ++u) {
        const float uv = gtail[u] * us.get(u, lane);
#pragma unroll
        for (int rr = 0; rr < kRowsI; ++rr) next[rr] += kx[u * L::kX + warp * kRowsI + rr] * uv;
      }
      __syncthreads();  // every thread is done reading K
      // A thread of v1 reads and writes only its own rows of st here.
#pragma unroll
      for (int rr = 0; rr < kRowsI; ++rr) st.set(warp * kRowsI + rr, lane, next[rr]);
    }
    if constexpr (!kProd) issue_k(c + 1);
  }
  if (a.K == 1) {
    __syncthreads();
    store_state<D, kCols>(head_out, st, col0, producer);
  }
}

}  // namespace
}  // namespace gdn
