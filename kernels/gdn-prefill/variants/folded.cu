// v10: prep's transform folded into the scan's operands. Lost on the H200: 157.2 against v3's 151.4 us, 32 x d128 x 1024.
// Measured 2026-12-01, slower in all 12 timed cases by 0.4-9%; it passes the GPU oracle (lowest
// 126.4 dB). Its prep writes 112 KB a unit instead of 176 and solves for 64 columns instead of
// 256, yet took 43.3 us against 45.9; its scan, the same products on K, V and W2 instead of W, U'
// and K, 109.3 against 103.9: it reads K and V in the input's layout instead of scratch written
// contiguously (program.md, idea 9).
#include <atomic>
#include <cstdint>

#include "../chunks.cuh"
#include "../prep.cuh"
#include "../products.cuh"
#include "device.cuh"
#include "entry.h"
#include "split_scan.cuh"
#include "variants.h"

namespace gdn {
namespace {

// Prep folds the chunk's transform into the scan's other operands instead of writing W and U'.
// With T' = (I + A)^{-1} diag(beta),
//   U = U' - W S = T' (V - diag(e^{G}) K S),
// so prep writes P' = P T' for O and W2 = T'^T K~ for the state update, and the scan takes
// Y = V - diag(e^{G}) K S from K and V as they come: O = scale (e^{G} Q S + P' Y) and
// S <- e^{G_last} S + W2^T Y. The scan's chain keeps its products and barriers; prep loses V, U'
// and the substitution's 2 D right-hand sides, and solves for T' (C columns) instead.

// T' rows are kLdT floats apart: the B fragments read T' by rows (k) on 32 distinct banks.
constexpr int kLdT = C + 8;

// T' = (I + A)^{-1} diag(beta) into xs, in blocks of 16 rows as blocked_substitute solves: block
// r0's rows first take diag(beta) minus A[r0.., 0..r0) T'[0..r0, ..) (a warp an 8-column tile,
// 3xTF32), then a thread per column solves the block's own rows. T' is lower triangular, so
// columns from r0 on need no product and columns from r0 + 16 no solve.
template <int kLdA>
__device__ __forceinline__ void invert_transform(float* xs, const float* as, const float* betas, int warp, int lane) {
  static_assert(kWarps * 8 == C, "a warp an 8-column tile of T'");
  constexpr int kB = 16;
  const Cells<false> x{xs, kLdT};
#pragma unroll 1
  for (int r0 = 0; r0 < C; r0 += kB) {
    Acc part;
    for (int k0 = 8 * warp; k0 < r0; k0 += 8) {
      float fa[4];
      load_a(fa, as, kLdA, r0, k0, lane);
      part.add(Split<4>(fa), x.load_b(k0, 8 * warp, lane));
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int t = c_row(r0, lane, e), v = c_col(warp, lane, e);
      xs[t * kLdT + v] = (t == v ? betas[t] : 0.0f) - part.sum(e);
    }
    __syncthreads();
    if (threadIdx.x < r0 + kB) solve_block_column<kLdA, kB, false>(xs + threadIdx.x, kLdT, as, r0);
    __syncthreads();
  }
}

// P' = P T' (ps: P's rows kLdA apart) to p_out and W2 = T'^T K~ (K~[t][i] = wt[t] K[t][i], ks's
// rows kLdX apart) to w_out, both row-major (rows C and D floats apart), on tensor cores. P' is
// lower triangular; a warp takes four of its 16 x 8 tiles in a row block and skips the k steps
// that meet zeros of P or T'. W2 is computed transposed (rows i of K~^T) by the state update's
// product.
template <int D, int kLdX, int kLdA>
__device__ __forceinline__ void fold_operands(float* xs, const float* ps, const float* ks, const float* wt,
                                              float* p_out, float* w_out, int warp, int lane) {
  const Cells<false> x{xs, kLdT};
  {
    const int rb = warp >> 1, tile0 = 4 * (warp & 1);
    Acc acc[4];
    for (int k0 = 8 * tile0; k0 < 16 * rb + 16; k0 += 8) {
      float fa[4];
      load_a(fa, ps, kLdA, 16 * rb, k0, lane);
      const Split<4> sa(fa);
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[j].add(sa, x.load_b(k0, 8 * (tile0 + j), lane));
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float f[4] = {acc[j].sum(0), acc[j].sum(1), acc[j].sum(2), acc[j].sum(3)};
      store_c_scaled(p_out, C, f, 1.0f, 16 * rb, tile0 + j, C, lane);
    }
  }
  constexpr int kWarpsPerBlock = kWarps / (D / 16);  // warps a 16-row block of W2^T
  static_assert(kWarpsPerBlock >= 1 && (C / 8) % (4 * kWarpsPerBlock) == 0, "whole passes of four tiles");
  const int i0 = 16 * (warp / kWarpsPerBlock);
#pragma unroll 1
  for (int tile0 = 4 * (warp % kWarpsPerBlock); tile0 < C / 8; tile0 += 4 * kWarpsPerBlock) {
    Acc acc[4];
    // All rows: T' is zero above its diagonal, and K~ from n on.
    rank_update<kLdX>(acc, wt, ks, x, i0, tile0, C, lane);
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) w_out[c_col(tile0 + j, lane, e) * D + c_row(i0, lane, e)] = acc[j].sum(e);
  }
}

// v3's prep (prep.cuh) on folded chunks: T' in shared memory after A, and the products' P kept in
// Q's place for P' = P T'.
template <int D>
constexpr size_t prep_folded_smem() {
  return prep_smem<D, true, true>() + sizeof(float) * C * kLdT;
}

template <int D>
__global__ void __launch_bounds__(kThreads, 2) gdn_prep_folded(GdnArgs a, Scratch s) {
  using L = Strides<D, true>;
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
  float* vs = qs;                                      // [C][kX]
  float* as = qs + C * L::kX;                          // [C][kA]
  float* xs = as + C * L::kA;                          // [C][kLdT], T'
  // Folded, this unit's P stays in shared memory, in Q's place once the products are done.
  const bool folded = folds(a, t0, n);
  __shared__ double gs[C];
  __shared__ float betas[C], wscale[C];

  ChunkGates gates;
  gates.fetch(a, b, h, t0, n);
  const float* v_rows = a.v + b * a.v_seq + h * a.v_head + t0 * a.v_token;
  // K and Q in two groups of column halves, as in v3's prep.
  const float* k_rows = a.k + bqk * a.k_seq + hk * a.k_head + t0 * a.k_token;
  const float* q_rows = a.q + bqk * a.q_seq + hk * a.q_head + t0 * a.q_token;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    load_rows_async<D / 2>(ks + half * (D / 2), L::kX, k_rows + half * (D / 2), a.k_token, n);
    load_rows_async<D / 2>(qs + half * (D / 2), L::kX, q_rows + half * (D / 2), a.q_token, n);
    async_commit();
  }
  gates.publish(betas, gs);
  async_wait<1>();
  __syncthreads();
  // W's row scales, or (folded) K~'s: e^{G_{n-1} - G_t}, zero from n on.
  if (threadIdx.x < C) {
    const int t = threadIdx.x;
    wscale[t] = !folded ? betas[t] * expf(static_cast<float>(gs[t]))
                : t < n ? expf(static_cast<float>(gs[n - 1] - gs[t]))
                        : 0.0f;
  }

  float* p = folded ? qs : s.p + unit * C * C;
  const int ldp = folded ? L::kA : C;
  auto store = [&](int t, int u, float kk, float qk) { store_a_p(as, L::kA, p, ldp, gs, betas, n, t, u, kk, qk); };
  {
    // K K^T and Q K^T: 4 x 8 tiles of 16 x 8 each, kP of them in a row per warp.
    constexpr int kP = 32 / kWarps;
    const int row0 = 16 * (warp / (8 / kP)), col_tile0 = (warp % (8 / kP)) * kP;
    Acc kk[kP], qk[kP];
    // Tiles wholly above the diagonal stay zero (A and P are lower triangular): warps whose
    // tiles all are skip the products.
    const int k_end = 8 * col_tile0 < row0 + 16 ? D : 0;
    key_products<L::kX>(kk, qk, ks, qs, row0, col_tile0, 0, k_end / 2, lane);
    async_wait<0>();  // the second half
    __syncthreads();
    key_products<L::kX>(kk, qk, ks, qs, row0, col_tile0, k_end / 2, k_end, lane);
    if (folded) __syncthreads();  // every warp is done reading Q
#pragma unroll
    for (int j = 0; j < kP; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        store(c_row(row0, lane, e), c_col(col_tile0 + j, lane, e), kk[j].sum(e), qk[j].sum(e));
  }
  if (threadIdx.x < C) s.g[unit * C + threadIdx.x] = gs[threadIdx.x];
  if (!folded) {
    __syncthreads();  // every warp is done with Q
    load_rows_async<D>(vs, L::kX, v_rows, a.v_token, n);
    async_commit();
    async_wait<0>();
  }
  __syncthreads();

  if (folded) {
    invert_transform<L::kA>(xs, as, betas, warp, lane);
    fold_operands<D, L::kX, L::kA>(xs, qs, ks, wscale, s.p + unit * C * C, s.w + unit * C * D, warp, lane);
    return;
  }
  blocked_substitute<D, L::kX, L::kA>(ks, vs, as, wscale, betas, s.w + unit * C * D, s.u + unit * C * D, n, warp, lane);
}

// The folded prep, then v3's scan on folded chunks.
template <int D>
cudaError_t launch_folded(const GdnArgs& a, const Scratch& s, cudaStream_t stream) {
  static std::atomic<uint64_t> prep_ready{0}, scan_ready{0};
  cudaError_t e = start(gdn_prep_folded<D>, dim3(static_cast<unsigned>(s.chunks), a.Hv, a.B), prep_folded_smem<D>(),
                        prep_ready, stream, a, s);
  if (e == cudaSuccess)
    e = start(gdn_scan_split<D, false, true>, dim3(D / kTileV, a.Hv, a.B), split_scan_smem<D, false>(), scan_ready,
              stream, a, s, kThreads + 32);
  return e;
}

size_t folded_scratch_bytes(const GdnArgs& a) { return carved_bytes(a, false); }

cudaError_t folded_run(const GdnArgs& a, void* scratch, cudaStream_t stream) {
  return run_checked(a, scratch, [&](auto d) {
    return launch_folded<decltype(d)::value>(a, carve(a, scratch, false), stream);
  });
}

}  // namespace

const KernelVariant kFolded = {"v10", folded_scratch_bytes, folded_run};

}  // namespace gdn
