// gdn-prefill v1: the chunked (WY / UT) form in two kernels, float32 SIMT arithmetic.
//
//   prep  grid (chunks, Hv, B): each chunk's own quantities, independent of the state and so all
//         chunks at once: G (cumulative log-gates, in double), A = strictly lower
//         beta_t e^{G_t - G_u} k_t.k_u, W and U' by forward substitution of (I + A) X = rhs,
//         P = e^{G_t - G_u} q_t.k_u (u <= t). Written to scratch.
//   scan  grid (S / 32, Hv, B): a CTA owns 32 value columns of one head's state (columns of the
//         delta rule are independent) and walks the chunks in order:
//         U = U' - W S;  O = scale (e^{G} Q S + P U);  snapshots;  S <- e^{G_last} S + K~^T U.
#include "device.cuh"
#include "kernel.cuh"
#include "kernel_config.h"

namespace gdn {
namespace {

constexpr int C = kChunk;
constexpr int kThreads = 256;
constexpr int kTileV = 32;  // value columns per scan CTA: one per lane

struct Scratch {
  float* w;        // [B][Hv][chunks][C][S]
  float* u;        // [B][Hv][chunks][C][S]
  float* p;        // [B][Hv][chunks][C][C]
  double* g;       // [B][Hv][chunks][C]
  int64_t chunks;
};

int64_t chunk_count(const GdnArgs& a) { return (a.T + C - 1) / C; }

Scratch carve(const GdnArgs& a, void* base) {
  Scratch s;
  s.chunks = chunk_count(a);
  const int64_t units = int64_t{a.B} * a.Hv * s.chunks;
  s.g = static_cast<double*>(base);
  s.w = reinterpret_cast<float*>(s.g + units * C);
  s.u = s.w + units * C * a.S;
  s.p = s.u + units * C * a.S;
  return s;
}

template <int D>
constexpr size_t prep_smem() {
  return sizeof(float) * (2 * C * (D + 1) + C * (C + 1));
}

template <int D>
__global__ void __launch_bounds__(kThreads) gdn_prep(GdnArgs a, Scratch s) {
  const int c = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t t0 = int64_t{c} * C;
  const int n = static_cast<int>(a.T - t0 < C ? a.T - t0 : C);
  const int hk = h % a.Hk, bqk = b / (a.B / a.Bqk);
  const int64_t unit = (int64_t{b} * a.Hv + h) * s.chunks + c;

  DYNAMIC_SHARED(float, smem);
  float* ks = smem;                // [C][D + 1]
  float* qs = ks + C * (D + 1);    // [C][D + 1]
  float* as = qs + C * (D + 1);    // [C][C + 1]
  __shared__ double gs[C];
  __shared__ float betas[C];

  const float* kb = a.k + bqk * a.k_seq + hk * a.k_head;
  const float* qb = a.q + bqk * a.q_seq + hk * a.q_head;
  for (int idx = threadIdx.x; idx < C * D; idx += kThreads) {
    const int t = idx / D, i = idx % D;
    const bool in = t < n;
    ks[t * (D + 1) + i] = in ? kb[(t0 + t) * a.k_token + i] : 0.0f;
    qs[t * (D + 1) + i] = in ? qb[(t0 + t) * a.q_token + i] : 0.0f;
  }
  if (threadIdx.x < C) {
    const int t = threadIdx.x;
    betas[t] = t < n ? a.beta[(b * a.T + t0 + t) * a.Hv + h] : 0.0f;
  }
  if (threadIdx.x == 0) {
    // Summed in double: far into a chunk of harsh gates G reaches -1000, where a float's spacing
    // would spoil the short-range decays that matter.
    double acc = 0;
    for (int t = 0; t < C; ++t) {
      if (t < n) acc += a.g[(b * a.T + t0 + t) * a.Hv + h];
      gs[t] = acc;
    }
  }
  __syncthreads();

  float* p = s.p + unit * C * C;
  for (int idx = threadIdx.x; idx < C * C; idx += kThreads) {
    const int t = idx / C, u = idx % C;
    float kk = 0, qk = 0, decay = 0;
    if (u <= t && t < n) {
      for (int i = 0; i < D; ++i) {
        const float ku = ks[u * (D + 1) + i];
        kk += ks[t * (D + 1) + i] * ku;
        qk += qs[t * (D + 1) + i] * ku;
      }
      decay = expf(static_cast<float>(gs[t] - gs[u]));
    }
    as[t * (C + 1) + u] = u < t ? betas[t] * decay * kk : 0.0f;
    p[idx] = decay * qk;
  }
  if (threadIdx.x < C) s.g[unit * C + threadIdx.x] = gs[threadIdx.x];
  __syncthreads();

  // Forward substitution, one column of W (threads 0..D-1) or of U' (D..2D-1) per thread; the
  // column lives in registers, the loops unroll completely.
  if (threadIdx.x < 2 * D) {
    const bool is_w = threadIdx.x < D;
    const int col = threadIdx.x % D;
    const float* vb = a.v + b * a.v_seq + h * a.v_head + col;
    float x[C];
#pragma unroll
    for (int t = 0; t < C; ++t) {
      float r = 0;
      if (t < n) r = is_w ? betas[t] * expf(static_cast<float>(gs[t])) * ks[t * (D + 1) + col]
                          : betas[t] * vb[(t0 + t) * a.v_token];
#pragma unroll
      for (int u = 0; u < t; ++u) r -= as[t * (C + 1) + u] * x[u];
      x[t] = r;
    }
    float* dst = (is_w ? s.w : s.u) + unit * C * D + col;
#pragma unroll
    for (int t = 0; t < C; ++t)
      if (t < n) dst[t * D] = x[t];
  }
}

template <int D>
constexpr size_t scan_smem() {
  return sizeof(float) * (D * kTileV + C * (D + 1) + C * kTileV + C * (C + 1));
}

template <int D>
__global__ void __launch_bounds__(kThreads, 1) gdn_scan(GdnArgs a, Scratch s) {
  constexpr int kWarps = kThreads / 32;
  constexpr int kRowsT = C / kWarps;  // chunk rows per warp
  constexpr int kRowsI = D / kWarps;  // state rows per warp
  const int h = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int col = blockIdx.x * kTileV + lane;
  const int hk = h % a.Hk, bqk = b / (a.B / a.Bqk);
  const float scale = rsqrtf(static_cast<float>(D));

  DYNAMIC_SHARED(float, smem);
  float* st = smem;                 // [D][32]: S[i][col] of this CTA's columns
  float* x = st + D * kTileV;       // [C][D + 1]: W, then Q, then K of the chunk
  float* us = x + C * (D + 1);      // [C][32]: U
  float* ps = us + C * kTileV;      // [C][C + 1]: P
  __shared__ double gs[C];
  __shared__ float ge[C], gtail[C], decay[C];

  const float* s0 = a.state + b * a.state_seq + int64_t{h} * D * D + int64_t{col} * D;
  for (int i = warp; i < D; i += kWarps) st[i * kTileV + lane] = s0[i];

  const float* kb = a.k + bqk * a.k_seq + hk * a.k_head;
  const float* qb = a.q + bqk * a.q_seq + hk * a.q_head;
  float* snap_base = a.state_out + (int64_t{b} * a.Hv + h) * D * D + int64_t{col} * D;

  for (int64_t c = 0; c < s.chunks; ++c) {
    const int64_t t0 = c * C;
    const int n = static_cast<int>(a.T - t0 < C ? a.T - t0 : C);
    const int64_t unit = (int64_t{b} * a.Hv + h) * s.chunks + c;
    __syncthreads();  // the previous chunk is done with x, us, ps, gs
    const float* w = s.w + unit * C * D;
    for (int idx = threadIdx.x; idx < C * D; idx += kThreads) {
      const int t = idx / D, i = idx % D;
      x[t * (D + 1) + i] = t < n ? w[idx] : 0.0f;
    }
    const float* p = s.p + unit * C * C;
    for (int idx = threadIdx.x; idx < C * C; idx += kThreads) ps[(idx / C) * (C + 1) + idx % C] = p[idx];
    if (threadIdx.x < C) gs[threadIdx.x] = s.g[unit * C + threadIdx.x];
    __syncthreads();
    if (threadIdx.x < C) {
      const int t = threadIdx.x;
      ge[t] = expf(static_cast<float>(gs[t]));
      gtail[t] = t < n ? expf(static_cast<float>(gs[n - 1] - gs[t])) : 0.0f;
    }

    // U = U' - W S.
    const float* up = s.u + unit * C * D + col;
    float acc[kRowsT];
#pragma unroll
    for (int r = 0; r < kRowsT; ++r) {
      const int t = warp * kRowsT + r;
      acc[r] = t < n ? up[t * D] : 0.0f;
    }
    for (int i = 0; i < D; ++i) {
      const float sv = st[i * kTileV + lane];
#pragma unroll
      for (int r = 0; r < kRowsT; ++r) acc[r] -= x[(warp * kRowsT + r) * (D + 1) + i] * sv;
    }
#pragma unroll
    for (int r = 0; r < kRowsT; ++r) {
      const int t = warp * kRowsT + r;
      us[t * kTileV + lane] = t < n ? acc[r] : 0.0f;
    }
    __syncthreads();

    // O = scale (e^{G} Q S + P U).
    for (int idx = threadIdx.x; idx < C * D; idx += kThreads) {
      const int t = idx / D, i = idx % D;
      x[t * (D + 1) + i] = t < n ? qb[(t0 + t) * a.q_token + i] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kRowsT; ++r) acc[r] = 0;
    for (int i = 0; i < D; ++i) {
      const float sv = st[i * kTileV + lane];
#pragma unroll
      for (int r = 0; r < kRowsT; ++r) acc[r] += x[(warp * kRowsT + r) * (D + 1) + i] * sv;
    }
#pragma unroll
    for (int r = 0; r < kRowsT; ++r) {
      const int t = warp * kRowsT + r;
      float o = ge[t] * acc[r];
      for (int u = 0; u <= t; ++u) o += ps[t * (C + 1) + u] * us[u * kTileV + lane];
      if (t < n) a.out[((b * a.T + t0 + t) * a.Hv + h) * int64_t{D} + col] = o * scale;
    }
    __syncthreads();

    // K into x; then the snapshots this chunk holds, then the next state.
    for (int idx = threadIdx.x; idx < C * D; idx += kThreads) {
      const int t = idx / D, i = idx % D;
      x[t * (D + 1) + i] = t < n ? kb[(t0 + t) * a.k_token + i] : 0.0f;
    }
    __syncthreads();
    if (a.K > 1) {
      for (int t = 0; t < n; ++t) {
        const int64_t slot = a.T - 1 - (t0 + t);
        if (slot >= a.K) continue;
        __syncthreads();  // decay[] of the previous snapshot is used up
        if (threadIdx.x < C) decay[threadIdx.x] = threadIdx.x <= t ? expf(static_cast<float>(gs[t] - gs[threadIdx.x])) : 0.0f;
        __syncthreads();
        float* dst = snap_base + slot * a.slot_stride;
#pragma unroll
        for (int r = 0; r < kRowsI; ++r) {
          const int i = warp * kRowsI + r;
          float v = ge[t] * st[i * kTileV + lane];
          for (int u = 0; u <= t; ++u) v += decay[u] * x[u * (D + 1) + i] * us[u * kTileV + lane];
          dst[i] = v;
        }
      }
    }
    float next[kRowsI];
    const float glast = ge[n - 1];
#pragma unroll
    for (int r = 0; r < kRowsI; ++r) next[r] = glast * st[(warp * kRowsI + r) * kTileV + lane];
    for (int u = 0; u < n; ++u) {
      const float uv = gtail[u] * us[u * kTileV + lane];
#pragma unroll
      for (int r = 0; r < kRowsI; ++r) next[r] += x[u * (D + 1) + warp * kRowsI + r] * uv;
    }
    // From the K load on, a thread reads and writes only its own rows of st (snapshots, next):
    // no barrier is needed before the write; the next chunk's first barrier orders the rest.
#pragma unroll
    for (int r = 0; r < kRowsI; ++r) st[(warp * kRowsI + r) * kTileV + lane] = next[r];
  }
  if (a.K == 1) {
    __syncthreads();
    for (int i = warp; i < D; i += kWarps) snap_base[i] = st[i * kTileV + lane];
  }
}

template <int D>
cudaError_t launch(const GdnArgs& a, const Scratch& s, cudaStream_t stream) {
  // Set on every launch: the limit is per device, and the call costs next to nothing.
  cudaError_t e = cudaFuncSetAttribute(gdn_prep<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, prep_smem<D>());
  if (e == cudaSuccess) e = cudaFuncSetAttribute(gdn_scan<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, scan_smem<D>());
  if (e != cudaSuccess) return e;
  LAUNCH(gdn_prep<D>, dim3(static_cast<unsigned>(s.chunks), a.Hv, a.B), kThreads, prep_smem<D>(), stream, a, s);
  LAUNCH(gdn_scan<D>, dim3(D / kTileV, a.Hv, a.B), kThreads, scan_smem<D>(), stream, a, s);
  return cudaGetLastError();
}

}  // namespace

bool gdn_prefill_supported(const GdnArgs& a) {
  // Heads and sequences are grid dimensions y and z (at most 65535 each).
  return (a.S == 64 || a.S == 128) && a.Hk > 0 && a.Hv > 0 && a.Hv <= 65535 && a.Hv % a.Hk == 0 && a.Bqk > 0 &&
         a.B > 0 && a.B <= 65535 && a.B % a.Bqk == 0 && a.T > 0 && a.K >= 1;
}

size_t gdn_prefill_scratch_bytes(const GdnArgs& a) {
  const size_t units = static_cast<size_t>(a.B) * a.Hv * chunk_count(a);
  return units * C * (sizeof(double) + sizeof(float) * (2 * a.S + C));
}

cudaError_t gdn_prefill(const GdnArgs& a, void* scratch, cudaStream_t stream) {
  if (!gdn_prefill_supported(a)) return cudaErrorInvalidValue;
  const Scratch s = carve(a, scratch);
  return a.S == 128 ? launch<128>(a, s, stream) : launch<64>(a, s, stream);
}

}  // namespace gdn
