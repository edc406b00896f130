// v5: the scan's products on wgmma (sm_90a). Lost on the H200: 233.4 us against v3's 185.7 at 32 x d128 x 1024.
// Measured 2026-11-30; it passes the GPU oracle (lowest 126.8 dB). Its scan is bound by the
// scalar work around the products, not by them (program.md, idea 6). v3's prep, this scan, v4's
// output (gdn_out, one scan CTA signalling each 32 columns).
#include <atomic>
#include <cstdint>

#include "../chunks.cuh"
#include "../output.cuh"
#include "../prep.cuh"
#include "device.cuh"
#include "device_sm90.cuh"
#include "entry.h"
#include "variants.h"

namespace gdn {
namespace {

// v4's sequential chain on wgmma (sm_90a). A CTA owns 32 value columns of one head, as in v3;
// each of its two warpgroups owns 16 of them and runs both of the chain's products for them:
//   U = U' - W S          wgmma m64n16k8: A = W (C x D), B = S^T (16 x D)
//   S <- e^{G_last} S + K~^T U   D / 64 x wgmma m64n16k8: A = K~^T (D x C), B = U^T (16 x C)
// Every operand sits in shared memory split into TF32 high parts and rests, K-major in wgmma's
// core matrices (wgmma_index), so the 3xTF32 products need no fragment loads and no splits per warp:
// W and K~^T are split once per chunk by the whole CTA (one buffer serves both in turn), S^T and
// U^T as they are written. O is left to gdn_out, as in v4.
constexpr int kTileV5 = 32;  // value columns per v5 scan CTA: two warpgroups of 16
static_assert(kTileV % kTileV5 == 0, "gdn_out's 32 columns are whole v5 scan tiles");

// A split operand: high parts at hi, rests at hi + rows * cols.
struct WgSplit {
  float* hi;
  int rows, cols;
  __device__ __forceinline__ void set(int row, int k, float v) const {
    const float h = to_tf32(v);
    const int at = wgmma_index(row, k, cols);
    hi[at] = h;
    hi[rows * cols + at] = v - h;
  }
  __device__ __forceinline__ float get(int row, int k) const {
    const int at = wgmma_index(row, k, cols);
    return hi[at] + hi[rows * cols + at];
  }
  // Elements k .. k + 3 of a row (k a multiple of 4): one core matrix row, 16 contiguous bytes.
  __device__ __forceinline__ void set4(int row, int k, float4 v) const {
    const float4 h = make_float4(to_tf32(v.x), to_tf32(v.y), to_tf32(v.z), to_tf32(v.w));
    const int at = wgmma_index(row, k, cols);
    *reinterpret_cast<float4*>(hi + at) = h;
    *reinterpret_cast<float4*>(hi + rows * cols + at) = make_float4(v.x - h.x, v.y - h.y, v.z - h.z, v.w - h.w);
  }
  __device__ __forceinline__ float4 get4(int row, int k) const {
    const int at = wgmma_index(row, k, cols);
    const float4 h = *reinterpret_cast<const float4*>(hi + at), r = *reinterpret_cast<const float4*>(hi + rows * cols + at);
    return make_float4(h.x + r.x, h.y + r.y, h.z + r.z, h.w + r.w);
  }
  // The descriptors of the 64 (A) or 16 (B) rows from row0 at k step k0, high parts or rests.
  __device__ __forceinline__ uint64_t desc(int row0, int k0, bool rest) const {
    return wgmma_kmajor(hi + (rest ? rows * cols : 0), row0, k0, cols);
  }
};

// acc = A[a_row0 ..][0 .. k_end) B[b_row0 .. + 16)[0 .. k_end)^T in 3xTF32: three wgmma a k
// step into one accumulator (the rests' products first, while the sum is small).
__device__ __forceinline__ void wg_product(float (&acc)[8], const WgSplit& a, int a_row0, const WgSplit& b, int b_row0,
                                           int k_end) {
  for (int k0 = 0; k0 < k_end; k0 += 8) {
    wgmma_tf32<16>(acc, a.desc(a_row0, k0, true), b.desc(b_row0, k0, false), k0 > 0);
    wgmma_tf32<16>(acc, a.desc(a_row0, k0, false), b.desc(b_row0, k0, true), true);
    wgmma_tf32<16>(acc, a.desc(a_row0, k0, false), b.desc(b_row0, k0, false), true);
  }
}

// Row strides of what v5 stages, padded so that the splits' and U's reads hit 32 banks (W: a
// quarter warp reads 16 bytes from each of 8 rows) or 16 (U': 8 rows x 4 pairs). K's split reads
// 32 consecutive elements of a row: no padding.
template <int D>
struct WgStrides {
  static constexpr int kW = D + 4, kK = D, kU = kTileV5 + 8;
};

template <int D>
constexpr size_t wg_scan_smem() {
  using L = WgStrides<D>;
  // S^T and U^T split; W or K~^T split; W, K and U' staged.
  return sizeof(float) * (2 * kTileV5 * (D + C) + 2 * C * D + C * (L::kW + L::kK + L::kU));
}

template <int D>
__global__ void __launch_bounds__(kThreads, 1) gdn_scan_wg(GdnArgs a, Scratch s) {
  static_assert(kThreads == 256 && D % 64 == 0, "two warpgroups; the state's rows in 64s");
  static_assert(C % 16 == 0 && C <= kThreads, "k steps of 8, row groups of 8, a thread per chunk row");
  using L = WgStrides<D>;
  const int h = blockIdx.y, b = blockIdx.z;
  const int col0 = blockIdx.x * kTileV5;
  const int group = threadIdx.x >> 7, t = threadIdx.x & 127;
  const int gcol0 = 16 * group;  // this warpgroup's columns within the tile
  const int hk = h % a.Hk, bqk = b / (a.B / a.Bqk);

  DYNAMIC_SHARED(float4, smem4);
  float* smem = reinterpret_cast<float*>(smem4);
  const WgSplit st{smem, kTileV5, D};                       // S^T: [column][state row]
  const WgSplit ut{st.hi + 2 * kTileV5 * D, kTileV5, C};    // U^T: [column][chunk row]
  float* split = ut.hi + 2 * kTileV5 * C;                   // W (C x D) or K~^T (D x C), split
  const WgSplit wsp{split, C, D}, ksp{split, D, C};
  float* ws = split + 2 * C * D;                            // [C][kW]: W as copied
  float* kx = ws + C * L::kW;                               // [C][kK]: K as copied
  float* up = kx + C * L::kK;                               // [C][kU]: U'
  alignas(16) __shared__ double gs[2][C];
  __shared__ float ge[C], gtail[C], decay[C];

  const float* kb = a.k + bqk * a.k_seq + hk * a.k_head;
  float* head_out = a.state_out + (int64_t{b} * a.Hv + h) * D * D;
  const int64_t unit0 = (int64_t{b} * a.Hv + h) * s.chunks;
  auto rows_in = [&](int64_t c) { return static_cast<int>(a.T - c * C < C ? a.T - c * C : C); };
  // Three copy groups a chunk, as in v3: W and G; U'; K. Each step commits one, so async_wait<2>
  // is always "this step's".
  auto issue_w = [&](int64_t c) {
    if (c < s.chunks) {
      load_rows_async<D>(ws, L::kW, s.w + (unit0 + c) * C * D, D, rows_in(c));
      for (int i = threadIdx.x; i < C / 2; i += kThreads) copy_async_16(&gs[c & 1][2 * i], s.g + (unit0 + c) * C + 2 * i);
    }
    async_commit();
  };
  auto issue_u = [&](int64_t c) {
    if (c < s.chunks) load_rows_async<kTileV5>(up, L::kU, s.u + (unit0 + c) * C * D + col0, D, rows_in(c));
    async_commit();
  };
  auto issue_k = [&](int64_t c) {
    if (c < s.chunks) load_rows_async<D>(kx, L::kK, kb + c * C * a.k_token, a.k_token, rows_in(c));
    async_commit();
  };
  // K~^T into the split buffer with weights w[u] on K's rows: element (i, u) = w[u] K[u][i]. A
  // thread writes 4 u of one row i; a warp's lanes take 32 consecutive i (4 core matrices, one
  // 16-byte store a lane), so its reads of K's rows hit 32 banks.
  auto split_k = [&](const float* w) {
    for (int idx = threadIdx.x; idx < C * D / 4; idx += kThreads) {
      const int rest = idx >> 5, i = 32 * (rest / (C / 4)) + (idx & 31), u = 4 * (rest % (C / 4));
      const float* col = kx + u * L::kK + i;
      ksp.set4(i, u, make_float4(w[u] * col[0], w[u + 1] * col[L::kK], w[u + 2] * col[2 * L::kK], w[u + 3] * col[3 * L::kK]));
    }
    fence_proxy_async();
    __syncthreads();
  };

  // acc[r] = K~^T U for the state's rows 64 r .. + 64 and this warpgroup's columns, every row
  // block's products issued before the one wait.
  auto rank_update_wg = [&](float (&acc)[D / 64][8]) {
#pragma unroll
    for (int r = 0; r < D / 64; ++r) wgmma_fence(acc[r]);
#pragma unroll
    for (int r = 0; r < D / 64; ++r) wg_product(acc[r], ksp, 64 * r, ut, gcol0, C);
    wgmma_commit();
#pragma unroll
    for (int r = 0; r < D / 64; ++r) wgmma_wait<0>(acc[r]);
  };

  launch_dependents();  // gdn_out may start: it waits chunk by chunk
  issue_w(0);
  issue_u(0);
  issue_k(0);
  const float* s0 = a.state + b * a.state_seq + int64_t{h} * D * D;  // column-major: S[i][j] at j D + i
  for (int idx = threadIdx.x; idx < D * kTileV5; idx += kThreads) st.set(idx / D, idx % D, s0[int64_t{col0} * D + idx]);

  for (int64_t c = 0; c < s.chunks; ++c) {
    const int n = rows_in(c);
    const double* g = gs[c & 1];
    async_wait<2>();  // W, G
    __syncthreads();  // ... for every thread; the last chunk is done with ge, gtail, decay
    chunk_decays(g, n, ge, gtail);
    {
      // The state this chunk starts from, for gdn_out.
      // A lane per column (coalesced stores), 4 state rows a thread (two 16-byte reads).
      float* dst = s.states + (unit0 + c) * D * D + col0;
      for (int idx = threadIdx.x; idx < D * kTileV5 / 4; idx += kThreads) {
        const int i = 4 * (idx / kTileV5), cc = idx % kTileV5;
        const float4 v = st.get4(cc, i);
        dst[i * D + cc] = v.x;
        dst[(i + 1) * D + cc] = v.y;
        dst[(i + 2) * D + cc] = v.z;
        dst[(i + 3) * D + cc] = v.w;
      }
    }
    // W split, a core matrix row (4 elements) a thread: a quarter warp's 8 rows hit 32 banks.
    for (int idx = threadIdx.x; idx < C * D / 4; idx += kThreads) {
      const int core = idx >> 3, u = 8 * (core / (D / 4)) + (idx & 7), i = 4 * (core % (D / 4));
      wsp.set4(u, i, *reinterpret_cast<const float4*>(ws + u * L::kW + i));
    }
    fence_proxy_async();
    __syncthreads();  // W split; the staged W is free
    issue_w(c + 1);

    // U = U' - W S for this warpgroup's 16 columns.
    float acc[8] = {};
    wgmma_fence(acc);
    wg_product(acc, wsp, 0, st, gcol0, D);
    wgmma_commit();
    async_wait<2>();  // U'
    __syncthreads();  // ... for every thread
    wgmma_wait<0>(acc);
    float* u_out = s.u + (unit0 + c) * C * D + col0;  // U over U', which only this CTA read
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int u = wgmma_row(t, e), cc = gcol0 + wgmma_col(t, e);
      const float uv = u < n ? up[u * L::kU + cc] - acc[e] : 0.0f;
      ut.set(cc, u, uv);
      if (u < n) u_out[u * D + cc] = uv;
    }
    fence_proxy_async();
    // Past this barrier U is complete and the split buffer free (each warpgroup waited for its
    // product above); gdn_out may take this chunk.
    ready_signal(s.ready + (unit0 + c) * (D / kTileV) + col0 / kTileV);
    issue_u(c + 1);

    async_wait<2>();  // K
    __syncthreads();
    // The snapshots this chunk holds: S_u = e^{G_u} S + K~^T U with the decays to token u as
    // weights (zero past u).
    if (a.K > 1) {
      for (int u = first_snapshot(a, c * C, n); u < n; ++u) {
        const int64_t slot = a.T - 1 - (c * C + u);
        if (threadIdx.x < C) decay[threadIdx.x] = threadIdx.x <= u ? expf(static_cast<float>(g[u] - g[threadIdx.x])) : 0.0f;
        __syncthreads();
        split_k(decay);
        float* dst = head_out + slot * a.slot_stride;
        float sacc[D / 64][8] = {};
        rank_update_wg(sacc);
#pragma unroll
        for (int r = 0; r < D / 64; ++r)
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            const int i = 64 * r + wgmma_row(t, e), cc = gcol0 + wgmma_col(t, e);
            dst[int64_t{col0 + cc} * D + i] = ge[u] * st.get(cc, i) + sacc[r][e];
          }
        __syncthreads();  // the split buffer is free (the next split_k writes it at once)
      }
    }
    // S <- e^{G_last} S + K~^T U with K~[u][i] = gtail[u] K[u][i].
    split_k(gtail);
    const float glast = ge[n - 1];
    float sacc[D / 64][8] = {};
    rank_update_wg(sacc);
    // In place: each thread rewrites only the state cells its own registers hold, and these
    // products do not read the state (only K~^T and U^T).
#pragma unroll
    for (int r = 0; r < D / 64; ++r)
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int i = 64 * r + wgmma_row(t, e), cc = gcol0 + wgmma_col(t, e);
        st.set(cc, i, glast * st.get(cc, i) + sacc[r][e]);
      }
    fence_proxy_async();
    __syncthreads();  // the state is new; K and the split buffer are free
    issue_k(c + 1);
  }
  if (a.K == 1)
    for (int idx = threadIdx.x; idx < D * kTileV5; idx += kThreads)
      head_out[int64_t{col0} * D + idx] = st.get(idx / D, idx % D);
}

// v3's prep, the wgmma scan, v4's output.
template <int D>
cudaError_t launch_wg(const GdnArgs& a, const Scratch& s, cudaStream_t stream) {
  static std::atomic<uint64_t> scan_ready{0};
  cudaError_t e = start_prep<D, true, true>(a, s, stream);
  if (e == cudaSuccess)
    e = start(gdn_scan_wg<D>, dim3(D / kTileV5, a.Hv, a.B), wg_scan_smem<D>(), scan_ready, stream, a, s);
  return e == cudaSuccess ? start_out<D, kTileV / kTileV5>(a, s, stream) : e;
}

size_t wgmma_scratch_bytes(const GdnArgs& a) { return carved_bytes(a, true); }

cudaError_t wgmma_run(const GdnArgs& a, void* scratch, cudaStream_t stream) {
  return run_checked(a, scratch, [&](auto d) {
    return launch_wg<decltype(d)::value>(a, carve(a, scratch, true), stream);
  });
}

}  // namespace

const KernelVariant kWgmma = {"v5", wgmma_scratch_bytes, wgmma_run};

}  // namespace gdn
