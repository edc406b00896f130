// v4's output kernel: every chunk of every head at once, O = scale (e^{G} Q S_c + P U) for 32
// value columns of one chunk, from the starting state and U the scan wrote. It starts while the
// scan runs (LAUNCH_EARLY), in the shared memory and registers the scan leaves free on each SM
// (v4's two 16-column scan CTAs an SM leave room for one), and waits for the scan CTAs of its 32
// columns (kSignals of them) before it reads their output. Chunks are the slowest grid index: the
// CTAs that start first are the ones whose chunks the scan reaches first.
#pragma once

#include <atomic>
#include <cstdint>

#include "chunks.cuh"
#include "device.cuh"
#include "products.cuh"

namespace gdn {
namespace {

template <int D>
constexpr size_t out_smem() {
  using L = Strides<D, true>;
  return sizeof(float) * ((D + C) * L::kS + C * L::kX + C * L::kA);
}

template <int D, int kSignals>  // kSignals: scan CTAs that signal each chunk's 32 columns
__global__ void __launch_bounds__(kThreads, 2) gdn_out(GdnArgs a, Scratch s) {
  using L = Strides<D, true>;
  constexpr int kTilesPerHead = D / kTileV;
  const int tile = static_cast<int>(blockIdx.x % kTilesPerHead);
  const int h = static_cast<int>(blockIdx.x / kTilesPerHead % a.Hv);
  const int64_t c = blockIdx.x / kTilesPerHead / a.Hv;
  const int b = blockIdx.y, col0 = tile * kTileV;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int hk = h % a.Hk, bqk = b / (a.B / a.Bqk);
  const int64_t t0 = c * C, unit = (int64_t{b} * a.Hv + h) * s.chunks + c;
  const int n = static_cast<int>(a.T - t0 < C ? a.T - t0 : C);

  DYNAMIC_SHARED(float4, smem4);
  float* smem = reinterpret_cast<float*>(smem4);
  const Cells<false> st{smem, L::kS}, us{smem + D * L::kS, L::kS};
  float* qx = smem + (D + C) * L::kS;  // [C][kX]
  float* ps = qx + C * L::kX;           // [C][kA]
  __shared__ float ge[C];

  load_rows_async<D>(qx, L::kX, a.q + bqk * a.q_seq + hk * a.q_head + t0 * a.q_token, a.q_token, n);
  load_rows_async<C>(ps, L::kA, s.p + unit * C * C, C, C);
  async_commit();
  if (threadIdx.x < C) ge[threadIdx.x] = expf(static_cast<float>(s.g[unit * C + threadIdx.x]));
  ready_wait(s.ready + unit * kTilesPerHead + tile, kSignals);
  // The scan's output, through L2 (cp.async.cg: scratch is 16-byte aligned).
  load_rows_async<kTileV>(us.m, L::kS, s.u + unit * C * D + col0, D, n);
  for (int i0 = 0; i0 < D; i0 += C)  // the state's D rows, C at a time
    load_rows_async<kTileV>(st.m + i0 * L::kS, L::kS, s.states + unit * D * D + int64_t{i0} * D + col0, D, C);
  async_commit();
  async_wait<0>();
  __syncthreads();

  // The C x 32 output's 4 x 4 tiles of 16 x 8, kN in a row per warp.
  constexpr int kN = 16 / kWarps;
  static_assert(kN >= 1 && 4 % kN == 0, "the output's tiles split evenly over the warps");
  const int trow0 = 16 * (warp / (4 / kN)), tcol0 = (warp % (4 / kN)) * kN;
  float acc[kN][4] = {};
  mma_rows<L::kX>(acc, qx, st, trow0, tcol0, D, lane);
#pragma unroll
  for (int j = 0; j < kN; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] *= ge[c_row(trow0, lane, e)];
  mma_rows<L::kA>(acc, ps, us, trow0, tcol0, trow0 + 16, lane);
  float* ob = a.out + ((b * a.T + t0) * a.Hv + h) * int64_t{D} + col0;
  const int64_t o_token = int64_t{a.Hv} * D;
  const float scale = rsqrtf(static_cast<float>(D));
#pragma unroll
  for (int j = 0; j < kN; ++j) store_c_scaled(ob, o_token, acc[j], scale, trow0, tcol0 + j, n, lane);
  // This grid ends after the scan, so that the stream's next kernel sees the snapshots and the
  // last state. Only the last chunk's CTAs wait: they run last, and a wait holds its CTA's slot.
  if (c == s.chunks - 1) wait_for_primary();
}

// Started early: it waits for the scan chunk by chunk.
template <int D, int kSignals>
cudaError_t start_out(const GdnArgs& a, const Scratch& s, cudaStream_t stream) {
  static std::atomic<uint64_t> ready{0};
  return start<true>(gdn_out<D, kSignals>, dim3(static_cast<unsigned>(s.chunks * a.Hv * (D / kTileV)), a.B),
                     out_smem<D>(), ready, stream, a, s);
}

}  // namespace
}  // namespace gdn
