// v8, v9: v3's scan as two chains of 16 columns a CTA. Lost on the H200: 164.4, 166.7 against v3's 150.8 us.
// At 32 x d128 x 1024, measured 2026-12-01; both pass the GPU oracle. v9 starts the second warp
// group a phase after the first. Their scans took 118.3 and 120.1 us against 103.9, with 44.7 M
// instructions against 37.9 M (each group loads and splits the A operands for itself): two chains
// of four warps hide no more than one of eight (program.md, idea 8). v3's prep, this scan.
#include <atomic>
#include <cstdint>

#include "../chunks.cuh"
#include "../prep.cuh"
#include "../products.cuh"
#include "../scan.cuh"
#include "device.cuh"
#include "device_sm90.cuh"
#include "entry.h"
#include "variants.h"

namespace gdn {
namespace {

// v3's scan as two independent chains a CTA (program.md, idea 8). The CTA's 32 value columns
// are two chains of 16 that share W, U', G, Q, P and K: warps 0-3 run columns 0-15, warps 4-7
// columns 16-31, each group with barriers of its own, so that one group's waits (fragment loads,
// barriers, fixed latencies) may fall under the other's products instead of all eight warps
// waiting at the CTA's barriers in step. The producer warp copies a chunk's operands in three sets,
// A (W, U', G, Q: the first phase), P (O) and K (the snapshots and the state update), tells each
// group when a set has landed and refills a set once both groups have released it. v9 (kStagger)
// starts the second group once the first has written chunk 0's U, so that the two run about a
// phase apart: each set is then refilled when the second group is done with it, while the first
// is a phase further on and needs that set again a phase later.
constexpr int kPairGroup = kThreads / 2;      // threads a group
constexpr int kPairCols = kTileV / 2;         // columns a group
constexpr int kPairSignal = kPairGroup + 32;  // a group and the producer
// Named barriers, + group: the group's own, and the producer's per set: landed, released.
constexpr int kBarGroup = 1, kBarFullA = 3, kBarFullP = 5, kBarFullK = 7, kBarFreeA = 9, kBarFreeP = 11,
              kBarFreeK = 13, kBarStagger = 15;

template <int D>
constexpr size_t pair_smem() {
  using L = Strides<D, true, kTileV>;
  return sizeof(float2) * (D + C) * kSplitLd<kTileV> + sizeof(float) * (C * L::kS + 3 * C * L::kX + C * L::kA);
}

template <int D, bool kStagger>
__global__ void __launch_bounds__(kThreads + 32, 1) gdn_scan_pair(GdnArgs a, Scratch s) {
  using L = Strides<D, true, kTileV>;
  const int h = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int col0 = blockIdx.x * kTileV;
  const int hk = h % a.Hk, bqk = b / (a.B / a.Bqk);

  DYNAMIC_SHARED(float4, smem4);
  float2* pairs = reinterpret_cast<float2*>(smem4);
  const Cells<true> st{pairs, kSplitLd<kTileV>}, us{pairs + D * kSplitLd<kTileV>, kSplitLd<kTileV>};
  float* up = reinterpret_cast<float*>(pairs + (D + C) * kSplitLd<kTileV>);  // [C][kS]: U'
  float* ws = up + C * L::kS;                                                  // [C][kX]: W
  float* kx = ws + C * L::kX;                                                  // [C][kX]: K
  float* qx = kx + C * L::kX;                                                  // [C][kX]: Q
  float* ps = qx + C * L::kX;                                                  // [C][kA]: P
  alignas(16) __shared__ double gs[2][C];  // log-gates of this chunk and the next
  __shared__ float ge[2][C], gtail[2][C], decay[2][C];  // each group's

  const int64_t unit0 = (int64_t{b} * a.Hv + h) * s.chunks;
  auto rows_in = [&](int64_t c) { return static_cast<int>(a.T - c * C < C ? a.T - c * C : C); };

  if (warp == kWarps) {  // the producer
    const float* kb = a.k + bqk * a.k_seq + hk * a.k_head;
    const float* qb = a.q + bqk * a.q_seq + hk * a.q_head;
    auto issue_a = [&](int64_t c) {
      load_rows_async<D, 32>(ws, L::kX, s.w + (unit0 + c) * C * D, D, rows_in(c), lane);
      load_rows_async<kTileV, 32>(up, L::kS, s.u + (unit0 + c) * C * D + col0, D, rows_in(c), lane);
      for (int i = lane; i < C / 2; i += 32) copy_async_16(&gs[c & 1][2 * i], s.g + (unit0 + c) * C + 2 * i);
      load_rows_async<D, 32>(qx, L::kX, qb + c * C * a.q_token, a.q_token, rows_in(c), lane);
      async_commit();
    };
    auto issue_p = [&](int64_t c) {
      load_rows_async<C, 32>(ps, L::kA, s.p + (unit0 + c) * C * C, C, C, lane);
      async_commit();
    };
    auto issue_k = [&](int64_t c) {
      load_rows_async<D, 32>(kx, L::kX, kb + c * C * a.k_token, a.k_token, rows_in(c), lane);
      async_commit();
    };
    issue_a(0);
    issue_p(0);
    issue_k(0);
    for (int64_t c = 0; c < s.chunks; ++c) {
      async_wait<2>();
      for (int g = 0; g < 2; ++g) named_barrier_arrive(kBarFullA + g, kPairSignal);
      async_wait<1>();
      for (int g = 0; g < 2; ++g) named_barrier_arrive(kBarFullP + g, kPairSignal);
      async_wait<0>();
      for (int g = 0; g < 2; ++g) named_barrier_arrive(kBarFullK + g, kPairSignal);
      if (c + 1 < s.chunks) {
        for (int g = 0; g < 2; ++g) named_barrier_sync(kBarFreeA + g, kPairSignal);
        issue_a(c + 1);
        for (int g = 0; g < 2; ++g) named_barrier_sync(kBarFreeP + g, kPairSignal);
        issue_p(c + 1);
        for (int g = 0; g < 2; ++g) named_barrier_sync(kBarFreeK + g, kPairSignal);
        issue_k(c + 1);
      }
    }
    return;
  }

  const int g = warp / 4, gt = static_cast<int>(threadIdx.x) - g * kPairGroup;  // group, thread in it
  const int tcol0 = 2 * g;         // the group's two column tiles of 8
  const int trow0 = 16 * (warp % 4);  // this warp's chunk rows (U, O)
  constexpr int kRB = D / 64;         // the state's 16-row blocks a warp (four warps a group)
  const int srow0 = kRB * trow0;      // this warp's first state row
  float* head_out = a.state_out + (int64_t{b} * a.Hv + h) * D * D;  // snapshot slot 0 of this head
  load_state<D, kPairCols, kPairGroup>(st, a.state + b * a.state_seq + int64_t{h} * D * D, col0, false, gt,
                                       g * kPairCols);
  const float scale = rsqrtf(static_cast<float>(D));
  const int64_t o_token = int64_t{a.Hv} * D;
  if (kStagger && g == 1) named_barrier_sync(kBarStagger, 2 * kPairGroup);
  for (int64_t c = 0; c < s.chunks; ++c) {
    const int64_t t0 = c * C;
    const int n = rows_in(c);
    const double* gc = gs[c & 1];
    named_barrier_sync(kBarFullA + g, kPairSignal);  // set A has landed; the group's state is written
    chunk_decays(gc, n, ge[g], gtail[g], gt);

    // U = U' - W S, and Q S for O.
    float ws_qs[2][2][4] = {};
    mma_rows<L::kX, 2>(ws_qs, {ws, qx}, st, trow0, tcol0, 0, D, lane);
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        const int t = c_row(trow0, lane, e), cc = c_col(tcol0 + j, lane, e);
        const float u0 = t < n ? up[t * L::kS + cc] - ws_qs[0][j][e] : 0.0f;
        const float u1 = t < n ? up[t * L::kS + cc + 1] - ws_qs[0][j][e + 1] : 0.0f;
        us.set_pair(t, cc, u0, u1);
      }
    if (c + 1 < s.chunks) named_barrier_arrive(kBarFreeA + g, kPairSignal);  // W, U', Q read (G: its half stays)
    if (kStagger && g == 0 && c == 0) named_barrier_arrive(kBarStagger, 2 * kPairGroup);
    named_barrier_sync(kBarFullP + g, kPairSignal);  // P has landed; the group's U and decays are written

    // O = scale (e^{G} Q S + P U), P lower triangular.
    float (&o)[2][4] = ws_qs[1];
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[j][e] *= ge[g][c_row(trow0, lane, e)];
    mma_rows<L::kA>(o, ps, us, trow0, tcol0, trow0 + 16, lane);
    float* ob = a.out + ((b * a.T + t0) * a.Hv + h) * int64_t{D} + col0;
#pragma unroll
    for (int j = 0; j < 2; ++j) store_c_scaled(ob, o_token, o[j], scale, trow0, tcol0 + j, n, lane);
    if (c + 1 < s.chunks) named_barrier_arrive(kBarFreeP + g, kPairSignal);  // P read
    named_barrier_sync(kBarFullK + g, kPairSignal);  // K has landed

    if (a.K > 1) {
      for (int t = first_snapshot(a, t0, n); t < n; ++t) {
        named_barrier_sync(kBarGroup + g, kPairGroup);  // the previous snapshot is done with decay
        decays_to(gc, t, decay[g], gt);
        named_barrier_sync(kBarGroup + g, kPairGroup);
        float* dst = head_out + (a.T - 1 - (t0 + t)) * a.slot_stride;
#pragma unroll
        for (int r = 0; r < kRB; ++r)
          write_snapshot<D, L::kX, 2>(dst, ge[g][t], decay[g], kx, st, us, t, col0, srow0 + 16 * r, tcol0, lane);
      }
    }

    // S <- e^{G_last} S + K~^T U.
    const float glast = ge[g][n - 1];
    Acc acc[kRB][2];
    float next[kRB][2][4];
#pragma unroll
    for (int r = 0; r < kRB; ++r) {
      rank_update<L::kX>(acc[r], gtail[g], kx, us, srow0 + 16 * r, tcol0, C, lane);
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          next[r][j][e] = glast * st.get(c_row(srow0 + 16 * r, lane, e), c_col(tcol0 + j, lane, e)) + acc[r][j].sum(e);
    }
    if (c + 1 < s.chunks) named_barrier_arrive(kBarFreeK + g, kPairSignal);  // K read
    named_barrier_sync(kBarGroup + g, kPairGroup);  // the group is done reading its state and U
#pragma unroll
    for (int r = 0; r < kRB; ++r)
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; e += 2)
          st.set_pair(c_row(srow0 + 16 * r, lane, e), c_col(tcol0 + j, lane, e), next[r][j][e], next[r][j][e + 1]);
  }
  if (a.K == 1) {
    named_barrier_sync(kBarGroup + g, kPairGroup);
    store_state<D, kPairCols, kPairGroup>(head_out, st, col0, false, gt, g * kPairCols);
  }
}

// v3's prep, the scan of two chains a CTA.
template <int D, bool kStagger>
cudaError_t launch_pair(const GdnArgs& a, const Scratch& s, cudaStream_t stream) {
  static std::atomic<uint64_t> scan_ready{0};
  cudaError_t e = start_prep<D, true, true>(a, s, stream);
  if (e == cudaSuccess)
    e = start(gdn_scan_pair<D, kStagger>, dim3(D / kTileV, a.Hv, a.B), pair_smem<D>(), scan_ready, stream, a, s,
              kThreads + 32);
  return e;
}

size_t pair_scratch_bytes(const GdnArgs& a) { return carved_bytes(a, false); }

template <bool kStagger>
cudaError_t pair_run(const GdnArgs& a, void* scratch, cudaStream_t stream) {
  return run_checked(a, scratch, [&](auto d) {
    return launch_pair<decltype(d)::value, kStagger>(a, carve(a, scratch, false), stream);
  });
}

}  // namespace

const KernelVariant kPairChains = {"v8", pair_scratch_bytes, pair_run<false>};
const KernelVariant kPairChainsStaggered = {"v9", pair_scratch_bytes, pair_run<true>};

}  // namespace gdn
