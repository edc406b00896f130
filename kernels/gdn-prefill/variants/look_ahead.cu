// v7: v4's split with a look-ahead scan. Lost on the H200: 239.7 us against v3's 157.2 at 32 x d128 x 1024.
// Measured 2026-12-01; it passes the GPU oracle (127.7 dB). Each chunk's U is computed a step
// early from M = W K~^T (a kernel of its own between prep and the scan); the scan alone took
// 110.9 us against v3's 104.9 (which computes O too), so the chain was not the bound, and gdn_out
// found no SM free beside 128 scan CTAs of 225 KB (program.md, idea 1). v3's prep, M, this scan,
// v4's output.
#include <atomic>
#include <cstdint>

#include "../chunks.cuh"
#include "../output.cuh"
#include "../prep.cuh"
#include "../products.cuh"
#include "../scan.cuh"
#include "device.cuh"
#include "entry.h"
#include "variants.h"

namespace gdn {
namespace {

// The look-ahead chain (program.md, idea 1) on v4's split, O left to gdn_out. With
// M(c + 1) = W(c + 1) K~(c)^T, K~(c) chunk c's keys weighted by their decays to its last token,
//   U(c + 1) = U'(c + 1) - e^{G_last} W(c + 1) S(c) - M(c + 1) U(c),
// so that a step of the scan reads only S(c) and U(c): W(c + 1) S(c), M(c + 1) U(c) and the state
// update are independent products, then U(c + 1) and S(c + 1) are written (the CPU reference's
// Chain::kLookAhead computes it the same way in float).

// M(c) for c >= 1 (grid.x = chunks - 1): chunk c - 1 is whole (only the last chunk can be short).
template <int D>
constexpr size_t ahead_m_smem() {
  return sizeof(float) * 2 * C * Strides<D, true>::kX;
}

template <int D>
__global__ void __launch_bounds__(kThreads) gdn_ahead_m(GdnArgs a, Scratch s) {
  using L = Strides<D, true>;
  const int64_t c = int64_t{blockIdx.x} + 1;
  const int h = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int hk = h % a.Hk, bqk = b / (a.B / a.Bqk);
  const int64_t unit = (int64_t{b} * a.Hv + h) * s.chunks + c;
  const int n = static_cast<int>(a.T - c * C < C ? a.T - c * C : C);

  DYNAMIC_SHARED(float4, smem4);
  float* ws = reinterpret_cast<float*>(smem4);  // [C][kX]: W(c)
  float* ks = ws + C * L::kX;                     // [C][kX]: K(c - 1)
  __shared__ float gtail[C];
  // W's rows from n on were never written: zero them.
  load_rows_async<D>(ws, L::kX, s.w + unit * C * D, D, n);
  load_rows_async<D>(ks, L::kX, a.k + bqk * a.k_seq + hk * a.k_head + (c - 1) * C * a.k_token, a.k_token, C);
  async_commit();
  if (threadIdx.x < C) {
    const double* g = s.g + (unit - 1) * C;
    gtail[threadIdx.x] = expf(static_cast<float>(g[C - 1] - g[threadIdx.x]));
  }
  async_wait<0>();
  __syncthreads();

  // M's 4 x 8 tiles of 16 x 8, kP in a row per warp: M[t][u] = sum_i W[t][i] gtail[u] K[u][i].
  constexpr int kP = 32 / kWarps;
  const int row0 = 16 * (warp / (8 / kP)), tile0 = (warp % (8 / kP)) * kP;
  const int r = lane >> 2;
  Acc acc[kP];
#pragma unroll 2
  for (int k0 = 0; k0 < D; k0 += 8) {
    float fa[4];
    load_a(fa, ws, L::kX, row0, k0, lane);
    const Split<4> sa(fa);
#pragma unroll
    for (int j = 0; j < kP; ++j) {
      float fb[2];
      load_b_t(fb, ks, L::kX, k0, 8 * (tile0 + j), lane);
      const float w = gtail[8 * (tile0 + j) + r];
      fb[0] *= w;
      fb[1] *= w;
      acc[j].add(sa, Split<2>(fb));
    }
  }
  float* m = s.m + unit * C * C;
#pragma unroll
  for (int j = 0; j < kP; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) m[c_row(row0, lane, e) * C + c_col(tile0 + j, lane, e)] = acc[j].sum(e);
}

// The look-ahead scan: kTileV columns a CTA, one CTA an SM. K(c), W(c + 1), M(c + 1) and G(c) are
// double-buffered by c's parity and copied a step ahead; U'(c + 1) comes straight into registers.
template <int D>
constexpr size_t ahead_smem() {
  using L = Strides<D, true>;
  return sizeof(float2) * (D + C) * kSplitLd<kTileV> + sizeof(float) * 2 * (2 * C * L::kX + C * L::kA);
}

template <int D>
__global__ void __launch_bounds__(kThreads, 1) gdn_scan_ahead(GdnArgs a, Scratch s) {
  constexpr int kCols = kTileV;
  using L = Strides<D, true>;
  const int h = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int col0 = blockIdx.x * kCols;
  const int hk = h % a.Hk, bqk = b / (a.B / a.Bqk);
  launch_dependents();  // gdn_out may start: it waits chunk by chunk

  DYNAMIC_SHARED(float4, smem4);
  float2* pairs = reinterpret_cast<float2*>(smem4);
  const Cells<true> st{pairs, kSplitLd<kCols>}, us{pairs + D * kSplitLd<kCols>, kSplitLd<kCols>};
  float* ws = reinterpret_cast<float*>(pairs + (D + C) * kSplitLd<kCols>);  // [2][C][kX]: W(c + 1)
  float* kx = ws + 2 * C * L::kX;                                          // [2][C][kX]: K(c)
  float* ms = kx + 2 * C * L::kX;                                          // [2][C][kA]: M(c + 1)
  alignas(16) __shared__ double gs[2][C];
  __shared__ float ge[C], gtail[C], decay[C];

  const float* kb = a.k + bqk * a.k_seq + hk * a.k_head;
  float* head_out = a.state_out + (int64_t{b} * a.Hv + h) * D * D;  // snapshot slot 0 of this head
  const int64_t unit0 = (int64_t{b} * a.Hv + h) * s.chunks;
  auto rows_in = [&](int64_t c) { return static_cast<int>(a.T - c * C < C ? a.T - c * C : C); };
  // Step c's operands into the buffers of c's parity (W(0), for U(0), goes to W's other buffer).
  auto issue = [&](int64_t c) {
    if (c < s.chunks) {
      const int64_t p = c & 1;
      load_rows_async<D>(kx + p * C * L::kX, L::kX, kb + c * C * a.k_token, a.k_token, rows_in(c));
      for (int i = threadIdx.x; i < C / 2; i += kThreads) copy_async_16(&gs[p][2 * i], s.g + (unit0 + c) * C + 2 * i);
      if (c + 1 < s.chunks) {
        load_rows_async<D>(ws + p * C * L::kX, L::kX, s.w + (unit0 + c + 1) * C * D, D, rows_in(c + 1));
        load_rows_async<C>(ms + p * C * L::kA, L::kA, s.m + (unit0 + c + 1) * C * C, C, C);
      }
    }
    async_commit();
  };

  // The tiles of the C x kCols products (U), kN in a row per warp, and of the D x kCols state.
  constexpr int kColTiles = kCols / 8, kN = (C / 16) * kColTiles / kWarps;
  static_assert(kN >= 1 && kColTiles % kN == 0, "the chunk's tiles split evenly over the warps");
  const int trow0 = 16 * (warp / (kColTiles / kN)), tcol0 = (warp % (kColTiles / kN)) * kN;
  constexpr int kTiles = (D / 16) * kColTiles / kWarps;
  static_assert(kTiles >= 1 && kColTiles % kTiles == 0, "every warp has a tile of the state");
  const int srow0 = 16 * (warp / (kColTiles / kTiles)), scol0 = (warp % (kColTiles / kTiles)) * kTiles;

  // U(0) = U'(0) - W(0) S(0).
  load_rows_async<D>(ws + C * L::kX, L::kX, s.w + unit0 * C * D, D, rows_in(0));
  async_commit();
  issue(0);
  load_state<D, kCols>(st, a.state + b * a.state_seq + int64_t{h} * D * D, col0);
  async_wait<1>();  // W(0)
  __syncthreads();
  // U'(c) of this warp's tiles, rows from rows_in(c) on zero (past the last chunk: all).
  auto u_prime = [&](int64_t c, float (&up)[kN][4]) {
    const int n = c < s.chunks ? rows_in(c) : 0;
    const float* src = s.u + (unit0 + c) * C * D + col0;
#pragma unroll
    for (int j = 0; j < kN; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = c_row(trow0, lane, e);
        up[j][e] = t < n ? src[t * D + c_col(tcol0 + j, lane, e)] : 0.0f;
      }
  };
  {
    float up[kN][4], acc[kN][4] = {};
    u_prime(0, up);
    mma_rows<L::kX>(acc, ws + C * L::kX, st, trow0, tcol0, D, lane);
#pragma unroll
    for (int j = 0; j < kN; ++j)
#pragma unroll
      for (int e = 0; e < 4; e += 2)
        us.set_pair(c_row(trow0, lane, e), c_col(tcol0 + j, lane, e), up[j][e] - acc[j][e],
                    up[j][e + 1] - acc[j][e + 1]);
  }
  __syncthreads();  // U(0) is written; W(0)'s buffer is free

  for (int64_t c = 0; c < s.chunks; ++c) {
    const int64_t t0 = c * C, p = c & 1;
    const int n = rows_in(c);
    const double* g = gs[p];
    issue(c + 1);  // into the buffers step c - 1 used
    float up[kN][4];
    u_prime(c + 1, up);
    async_wait<1>();  // step c's operands
    __syncthreads();  // ... for every thread; the previous step is done with ge, gtail, decay
    chunk_decays(g, n, ge, gtail);
    // For gdn_out: the state this chunk starts from, and U over U'.
    store_rows<D, kCols>(s.states + (unit0 + c) * D * D + col0, st, D);
    store_rows<D, kCols>(s.u + (unit0 + c) * C * D + col0, us, n);
    ready_signal(s.ready + (unit0 + c) * (D / kTileV) + col0 / kTileV);  // a barrier: ge, gtail are set

    const float* kc = kx + p * C * L::kX;
    if (a.K > 1) {
      for (int t = first_snapshot(a, t0, n); t < n; ++t) {
        const int64_t slot = a.T - 1 - (t0 + t);
        snapshot_decays(g, t, decay);
        write_snapshot<D, L::kX, kTiles>(head_out + slot * a.slot_stride, ge[t], decay, kc, st, us, t, col0, srow0,
                                         scol0, lane);
      }
    }

    // The step's three products, all from S(c) and U(c).
    const float glast = ge[n - 1];
    float x[kN][4] = {}, y[kN][4] = {};
    if (c + 1 < s.chunks) {
      mma_rows<L::kX>(x, ws + p * C * L::kX, st, trow0, tcol0, D, lane);
      mma_rows<L::kA>(y, ms + p * C * L::kA, us, trow0, tcol0, C, lane);
    }
    Acc acc[kTiles];
    rank_update<L::kX>(acc, gtail, kc, us, srow0, scol0, C, lane);
    float next[kTiles][4];
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        next[j][e] = glast * st.get(c_row(srow0, lane, e), c_col(scol0 + j, lane, e)) + acc[j].sum(e);
    __syncthreads();  // every thread is done reading S(c), U(c) and this step's buffers
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; e += 2)
        st.set_pair(c_row(srow0, lane, e), c_col(scol0 + j, lane, e), next[j][e], next[j][e + 1]);
#pragma unroll
    for (int j = 0; j < kN; ++j)
#pragma unroll
      for (int e = 0; e < 4; e += 2)
        us.set_pair(c_row(trow0, lane, e), c_col(tcol0 + j, lane, e), up[j][e] - glast * x[j][e] - y[j][e],
                    up[j][e + 1] - glast * x[j][e + 1] - y[j][e + 1]);
  }
  if (a.K == 1) {
    __syncthreads();
    store_state<D, kCols>(head_out, st, col0);
  }
}

// v3's prep, M, the look-ahead scan, v4's output.
template <int D>
cudaError_t launch_ahead(const GdnArgs& a, const Scratch& s, cudaStream_t stream) {
  static std::atomic<uint64_t> m_ready{0}, scan_ready{0};
  cudaError_t e = start_prep<D, true, true>(a, s, stream);
  if (e == cudaSuccess && s.chunks > 1)
    e = start(gdn_ahead_m<D>, dim3(static_cast<unsigned>(s.chunks - 1), a.Hv, a.B),
              ahead_m_smem<D>(), m_ready, stream, a, s);
  if (e == cudaSuccess)
    e = start(gdn_scan_ahead<D>, dim3(D / kTileV, a.Hv, a.B), ahead_smem<D>(), scan_ready, stream, a, s);
  return e == cudaSuccess ? start_out<D, 1>(a, s, stream) : e;
}

// v4's scratch, and each chunk's M after the ready counters, 16-byte aligned (the scan copies M in
// 16-byte pieces).
size_t ahead_scratch_bytes(const GdnArgs& a) {
  return carved_bytes(a, true) + 16 + static_cast<size_t>(a.B) * a.Hv * chunk_count(a) * sizeof(float) * C * C;
}

cudaError_t ahead_run(const GdnArgs& a, void* scratch, cudaStream_t stream) {
  return run_checked(a, scratch, [&](auto d) {
    Scratch s = carve(a, scratch, true);
    const int64_t units = int64_t{a.B} * a.Hv * s.chunks;
    s.m = reinterpret_cast<float*>(s.ready) + (units * (a.S / kTileV) + 3) / 4 * 4;
    return launch_ahead<decltype(d)::value>(a, s, stream);
  });
}

}  // namespace

const KernelVariant kLookAhead = {"v7", ahead_scratch_bytes, ahead_run};

}  // namespace gdn
