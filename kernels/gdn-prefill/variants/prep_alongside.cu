// v6: prep as a persistent kernel beside v3's scan. Lost on the H200: 222.7 us against v3's 182.2 at 32 x d128 x 1024.
// Measured 2026-11-30; correct on the GPU (lowest 128.0 dB). Alone under Nsight Compute prep took
// 127.2 us and the scan 129.7: prep on a quarter of an SM is no faster than the whole scan, and the
// two slow each other down (program.md, "v6, prep alongside the scan"). Chunks are handed over
// through ready flags; the scan is v3's as it was before its producer warp (split_scan.cuh).
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

// Prep alongside the scan. A persistent kernel of one CTA per SM walks the units chunk by chunk
// (every head's chunk 0, then every head's chunk 1, ...) in shared memory that fits beside a v3 scan
// CTA, which keeps about 182 KB of the SM's 228: K and Q pass through in slices of kSlice columns
// (two slices in flight) for A and P, A then takes the slices' place, and the substitution reads
// its right-hand sides (K, V) from global memory (L2, where the slices just came from) straight
// into registers. A unit ends with its ready flag; the scan's CTAs of that head wait for it
// before they copy the unit's W, U', P and G. Prep never waits for the scan, so any number of
// scan CTAs may be waiting for SM room: prep always finishes.
constexpr int kPrepThreads = 256;
constexpr int kSlice = 32;
constexpr int kSliceLd = kSlice + 4;  // fragment loads on 32 distinct banks
constexpr int kPrepLdA = C + 4;
constexpr size_t prep_alongside_smem() { return sizeof(float) * 4 * C * kSliceLd; }
static_assert(C * kPrepLdA <= 4 * C * kSliceLd, "A fits where the slices were");

// The 16 x 8 tiles of A and P on or below the diagonal (row block r: column tiles 0 .. 2r + 1, 20
// tiles), at most three to a warp, each warp's in one row block.
struct TileRun {
  int rb, j0, count;
};
constexpr int kPrepTiles = 3;
constexpr TileRun kPrepRuns[8] = {{3, 0, 3}, {3, 3, 3}, {3, 6, 2}, {2, 0, 3},
                                  {2, 3, 3}, {1, 0, 3}, {1, 3, 1}, {0, 0, 2}};
static_assert(kPrepThreads / 32 == 8 && C == 64, "the runs cover a 64 x 64 product with eight warps");

// Adds one slice of K (ks) and Q (qs) to warp kW's tiles of K K^T (kk) and Q K^T (qk), or (kStore)
// stores the finished tiles as A and P; the warp index picks the instantiation.
template <bool kStore, int kW = 0>
__device__ __forceinline__ void prep_tiles(int warp, Acc (&kk)[kPrepTiles], Acc (&qk)[kPrepTiles], const float* ks,
                                           const float* qs, float* as, float* p, const double* gs,
                                           const float* betas, int n, int lane) {
  if (warp != kW) {
    if constexpr (kW + 1 < kPrepThreads / 32) prep_tiles<kStore, kW + 1>(warp, kk, qk, ks, qs, as, p, gs, betas, n, lane);
    return;
  }
  constexpr TileRun r = kPrepRuns[kW];
  if constexpr (kStore) {
#pragma unroll
    for (int j = 0; j < r.count; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        store_a_p(as, kPrepLdA, p, C, gs, betas, n, c_row(16 * r.rb, lane, e), c_col(r.j0 + j, lane, e), kk[j].sum(e),
                  qk[j].sum(e));
  } else {
#pragma unroll
    for (int k0 = 0; k0 < kSlice; k0 += 8) {
      float fk[4], fq[4];
      load_a(fk, ks, kSliceLd, 16 * r.rb, k0, lane);
      load_a(fq, qs, kSliceLd, 16 * r.rb, k0, lane);
      const Split<4> sk(fk), sq(fq);
#pragma unroll
      for (int j = 0; j < r.count; ++j) {
        float fb[2];
        load_b_t(fb, ks, kSliceLd, k0, 8 * (r.j0 + j), lane);
        const Split<2> sb(fb);
        kk[j].add(sk, sb);
        qk[j].add(sq, sb);
      }
    }
  }
}

// 128 registers a thread (the bound of two CTAs an SM): half the register file, the scan's CTA
// takes the other half.
template <int D>
__global__ void __launch_bounds__(kPrepThreads, 2) gdn_prep_alongside(GdnArgs a, Scratch s) {
  launch_dependents();  // the scan may start: it waits for each unit's flag
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  DYNAMIC_SHARED(float4, smem4);  // float4: 16-byte aligned, as the copies and float4 reads need
  float* smem = reinterpret_cast<float*>(smem4);
  float* as = smem;  // [C][kPrepLdA], once the slices are used up
  __shared__ double gs[C];
  __shared__ float betas[C], wscale[C];

  const int64_t heads = int64_t{a.B} * a.Hv;
  for (int64_t item = blockIdx.x; item < s.chunks * heads; item += gridDim.x) {
    const int64_t c = item / heads;
    const int h = static_cast<int>(item % heads % a.Hv), b = static_cast<int>(item % heads / a.Hv);
    const int64_t t0 = c * C;
    const int n = static_cast<int>(a.T - t0 < C ? a.T - t0 : C);
    const int hk = h % a.Hk, bqk = b / (a.B / a.Bqk);
    const int64_t unit = (int64_t{b} * a.Hv + h) * s.chunks + c;
    const float* kb = a.k + bqk * a.k_seq + hk * a.k_head + t0 * a.k_token;
    const float* qb = a.q + bqk * a.q_seq + hk * a.q_head + t0 * a.q_token;

    // Slice sl of K and Q into buffer sl % 2 (K's rows, then Q's); every call commits a group.
    auto issue = [&](int sl) {
      if (sl < D / kSlice) {
        float* kd = smem + (sl & 1) * 2 * C * kSliceLd;
        load_rows_async<kSlice, kPrepThreads>(kd, kSliceLd, kb + sl * kSlice, a.k_token, n);
        load_rows_async<kSlice, kPrepThreads>(kd + C * kSliceLd, kSliceLd, qb + sl * kSlice, a.q_token, n);
      }
      async_commit();
    };
    ChunkGates gates;
    gates.fetch(a, b, h, t0, n);
    issue(0);
    issue(1);
    gates.publish(betas, gs);

    Acc kk[kPrepTiles], qk[kPrepTiles];
#pragma unroll 1
    for (int sl = 0; sl < D / kSlice; ++sl) {
      async_wait<1>();  // slice sl (sl + 1 may still be in flight)
      __syncthreads();
      const float* ks = smem + (sl & 1) * 2 * C * kSliceLd;
      const float* qs = ks + C * kSliceLd;
      prep_tiles<false>(warp, kk, qk, ks, qs, nullptr, nullptr, gs, betas, n, lane);
      __syncthreads();  // every warp is done with buffer sl % 2 (and, after the last, with both)
      issue(sl + 2);
    }

    if (threadIdx.x < C) wscale[threadIdx.x] = betas[threadIdx.x] * expf(static_cast<float>(gs[threadIdx.x]));
    float* p = s.p + unit * C * C;
    prep_tiles<true>(warp, kk, qk, nullptr, nullptr, as, p, gs, betas, n, lane);
    // P's tiles above the diagonal are zero (the scan reads them); A's are never read.
    for (int idx = threadIdx.x; idx < C * C; idx += kPrepThreads)
      if ((idx % C) / 8 > 2 * (idx / C / 16) + 1) p[idx] = 0.0f;
    if (threadIdx.x < C) s.g[unit * C + threadIdx.x] = gs[threadIdx.x];
    __syncthreads();  // A and wscale are complete

    // Forward substitution, one column of W or U' per thread at a time, its right-hand side
    // loaded into registers in one go (coalesced across the warp's columns).
    const float* vb = a.v + b * a.v_seq + h * a.v_head + t0 * a.v_token;
#pragma unroll 1
    for (int col = threadIdx.x; col < 2 * D; col += kPrepThreads) {
      const bool is_w = col < D;
      const int j = col % D;
      const float* rhs = is_w ? kb + j : vb + j;
      const int64_t stride = is_w ? a.k_token : a.v_token;
      float x[C];
#pragma unroll
      for (int t = 0; t < C; ++t, rhs += stride) x[t] = t < n ? *rhs : 0.0f;
      forward_substitute<kPrepLdA>(x, as, is_w ? wscale : betas);
      float* dst = (is_w ? s.w : s.u) + unit * C * D + j;
#pragma unroll
      for (int t = 0; t < C; ++t)
        if (t < n) dst[t * D] = x[t];
    }
    // The unit is written (its barrier also ends this unit's use of shared memory).
    ready_signal(s.ready + unit);
  }
}

// The ready flags cleared, prep on one CTA per SM (fewer for short inputs), then v3's scan started
// early beside it.
template <int D>
cudaError_t launch_alongside(const GdnArgs& a, const Scratch& s, cudaStream_t stream) {
  static std::atomic<uint64_t> prep_ready{0}, scan_ready{0};
  const int64_t units = int64_t{a.B} * a.Hv * s.chunks;
  int device = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess) e = cudaMemsetAsync(s.ready, 0, sizeof(int) * units, stream);
  // An SM sets its shared-memory size for the CTAs it runs: prep alone would leave it too small
  // for a scan CTA, which then could not start beside prep (start's own opt-in is then a no-op).
  if (e == cudaSuccess)
    e = allow_dynamic_shared(gdn_prep_alongside<D>, static_cast<int>(prep_alongside_smem()), prep_ready,
                             static_cast<int>(cudaSharedmemCarveoutMaxShared));
  if (e == cudaSuccess)
    e = start(gdn_prep_alongside<D>, dim3(static_cast<unsigned>(units < sms ? units : sms)), prep_alongside_smem(),
              prep_ready, stream, a, s, kPrepThreads);
  if (e == cudaSuccess)
    e = start<true>(gdn_scan_split<D, true, false>, dim3(D / kTileV, a.Hv, a.B), split_scan_smem<D, true>(),
                    scan_ready, stream, a, s);
  return e;
}

// v3's scratch, with a ready flag per chunk after P.
size_t alongside_scratch_bytes(const GdnArgs& a) {
  return carved_bytes(a, false) + static_cast<size_t>(a.B) * a.Hv * chunk_count(a) * sizeof(int);
}

cudaError_t alongside_run(const GdnArgs& a, void* scratch, cudaStream_t stream) {
  return run_checked(a, scratch, [&](auto d) {
    Scratch s = carve(a, scratch, false);
    s.ready = reinterpret_cast<int*>(s.p + int64_t{a.B} * a.Hv * s.chunks * C * C);
    return launch_alongside<decltype(d)::value>(a, s, stream);
  });
}

}  // namespace

const KernelVariant kPrepAlongside = {"v6", alongside_scratch_bytes, alongside_run};

}  // namespace gdn
