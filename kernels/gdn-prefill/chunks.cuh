// What the kernels of the chunked form share (dispatch.cu says how they fit together): sizes and
// shared-memory strides, the scratch through which prep hands each chunk to the scan, a chunk's
// rows copied into shared memory, its gates and decays, the scan's state tile, and the launch of a
// kernel with its shared-memory opt-in.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "device.cuh"
#include "kernel.cuh"
#include "kernel_config.h"

namespace gdn {
namespace {

constexpr int C = kChunk;
constexpr int kThreads = 256;  // 8 warps; 16 measured slower on the H200 (program.md)
constexpr int kTileV = 32;  // value columns per scan CTA of v1-v3 (v1: one per lane) and per v4 output CTA
constexpr int kTileV4 = 16;  // value columns per v4 scan CTA: 256 CTAs at 32 heads x d128, two an SM
constexpr int kWarps = kThreads / 32;
static_assert(kWarps == 8 || kWarps == 16, "the tile mappings and the substitution assume 8 or 16 warps");

// Shared-memory row strides. v2's are padded so that its fragment loads hit 32 distinct banks.
template <int D, bool kTC, int kCols = kTileV>
struct Strides {
  static constexpr int kX = D + (kTC ? 4 : 1);      // chunk rows of k, q, W (floats)
  static constexpr int kA = C + (kTC ? 4 : 1);      // rows of A and P
  static constexpr int kS = kCols + (kTC ? 8 : 0);  // rows of the state tile, U and U' (v3, v4: U' only)
};

struct Scratch {
  float* w;        // [B][Hv][chunks][C][S]
  float* u;        // [B][Hv][chunks][C][S]: U', which v4's scan overwrites with U
  float* p;        // [B][Hv][chunks][C][C]
  double* g;       // [B][Hv][chunks][C]
  float* states;   // v4: [B][Hv][chunks][S][S], the state each chunk starts from (row i, column j)
  int* ready;      // v4: [B][Hv][chunks][S / 32], scan CTAs done with a chunk's 32 columns
                   // (v1-v3: states and ready are nullptr)
  float* m;        // nullptr: room for one more per-chunk matrix, which kernels built on these
                   // may use (variants/look_ahead.cu), so that all of them take the same arguments
  int64_t chunks;
};

inline int64_t chunk_count(const GdnArgs& a) { return (a.T + C - 1) / C; }

// The scratch at `base` for these arguments: every chunk's W, U', P and G, and with `apart` (v4)
// every chunk's starting state and then the ready counters.
inline Scratch carve(const GdnArgs& a, void* base, bool apart) {
  Scratch s;
  s.chunks = chunk_count(a);
  const int64_t units = int64_t{a.B} * a.Hv * s.chunks;
  s.g = static_cast<double*>(base);
  s.w = reinterpret_cast<float*>(s.g + units * C);
  s.u = s.w + units * C * a.S;
  s.p = s.u + units * C * a.S;
  s.states = apart ? s.p + units * C * C : nullptr;
  s.ready = apart ? reinterpret_cast<int*>(s.states + units * a.S * a.S) : nullptr;
  s.m = nullptr;
  return s;
}

// The bytes carve takes.
inline size_t carved_bytes(const GdnArgs& a, bool apart) {
  const size_t units = static_cast<size_t>(a.B) * a.Hv * chunk_count(a);
  const size_t states = apart ? units * (sizeof(float) * a.S * a.S + sizeof(int) * (a.S / kTileV)) : 0;
  return units * C * (sizeof(double) + sizeof(float) * (2 * a.S + C)) + states;
}

// Rows [0, C) of kCols floats, src_stride apart in global memory, into shared rows `ld` apart, as
// asynchronous copies (16 bytes where the addresses allow); rows from n on are zeroed (with the
// 16-byte copies, by zero-filling copies that land with the others). The caller commits the group
// and waits for it. kNT threads take part, tid the caller's index among them.
template <int kCols, int kNT = kThreads>
__device__ __forceinline__ void load_rows_async(float* dst, int ld, const float* src, int64_t src_stride, int n,
                                                int tid = static_cast<int>(threadIdx.x)) {
  static_assert(kCols % 4 == 0, "rows are copied in quads where they can be");
  const bool wide = (reinterpret_cast<uintptr_t>(src) & 15) == 0 && src_stride % 4 == 0 && ld % 4 == 0;
  if (wide) {
    // A thread copies the same quad of every kStep-th row: its row, column and both addresses are
    // worked out once, and each copy after that is an offset from them (a general idx / kQuads
    // loop cost about 25 instructions a copy in the scan's PTX).
    constexpr int kQuads = kCols / 4, kStep = kNT / kQuads;
    static_assert(kNT % kQuads == 0 && C % kStep == 0, "every thread copies whole rows' quads");
    const int t0 = tid / kQuads, i = 4 * (tid % kQuads);
    const float* s = src + t0 * src_stride + i;
    float* d = dst + t0 * ld + i;
    const int64_t s_step = kStep * src_stride;
#pragma unroll
    for (int r = 0; r < C / kStep; ++r, s += s_step, d += kStep * ld)
      copy_async_16_or_zero(d, s, t0 + r * kStep < n);
  } else {
    for (int idx = tid; idx < C * kCols; idx += kNT) {
      const int t = idx / kCols, i = idx % kCols;
      if (t < n) copy_async_4(dst + t * ld + i, src + t * src_stride + i);
      else dst[t * ld + i] = 0.0f;
    }
  }
}

// A chunk's betas and cumulative log-gates G, in two steps that every thread calls: fetch, before
// the chunk's copies are issued, loads two gates a lane into warp 0 and two betas a lane into
// warp 1, so that the loads' latency passes while the copies issue; publish writes the betas and
// G to shared memory, G summed in double by a warp-wide scan (a chain of five shuffles instead of
// one thread's 64 additions after a barrier). Far into a chunk of harsh gates G reaches -1000,
// where a float's spacing would spoil the short-range decays that matter. The caller's next
// barrier publishes both.
struct ChunkGates {
  float x0 = 0.0f, x1 = 0.0f;  // tokens 2 lane and 2 lane + 1 (zero past n)
  __device__ __forceinline__ void fetch(const GdnArgs& a, int b, int h, int64_t t0, int n) {
    const int warp = threadIdx.x >> 5, t = 2 * (threadIdx.x & 31);
    if (warp > 1) return;
    const float* src = (warp == 0 ? a.g : a.beta) + (b * a.T + t0 + t) * a.Hv + h;
    x0 = t < n ? src[0] : 0.0f;
    x1 = t + 1 < n ? src[a.Hv] : 0.0f;
  }
  __device__ __forceinline__ void publish(float* betas, double* gs) const {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (warp == 1) {
      betas[2 * lane] = x0;
      betas[2 * lane + 1] = x1;
    }
    if (warp != 0) return;
    // Exclusive prefix of the lanes' pair sums: at each step `block` is the sum of this lane's
    // aligned block of `off` lanes, and the partner block below is added to `before`.
    const double pair = static_cast<double>(x0) + x1;
    double before = 0.0, block = pair;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const double other = __shfl_xor_sync(0xffffffffu, block, off);
      if (lane & off) before += other;
      block += other;
    }
    gs[2 * lane] = before + x0;
    gs[2 * lane + 1] = before + pair;
  }
};

// The first row of the chunk at token t0 (n rows) whose state is a snapshot (slot T - 1 - token below
// K), or n if none is: only the last chunks have any. With a loop that tested every row of every
// chunk, K = 8 cost v3 (32 x d128 on the H200) 55 us more than K = 1 at 1024 tokens and 185 us
// more at 4096, in proportion to the chunks; starting at this row, 17 us more at 1024 tokens, and
// 4096 tokens with K = 8 went from 816.4 to 660.5 us.
__device__ __forceinline__ int first_snapshot(const GdnArgs& a, int64_t t0, int n) {
  const int64_t first = a.T - a.K - t0;
  return first <= 0 ? 0 : first >= n ? n : static_cast<int>(first);
}

// A scan CTA's D x kCols state tile from and to the engine's layout (column-major: S[i][j] at
// j D + i, so consecutive threads take consecutive rows of a column), by kNT threads, tid the
// caller's index among them (v2 and v3 pass their producer warp as `idle`; the test sits in the
// loop's condition, which keeps v3's machine code as measured). A scan that splits its tile's
// columns between groups of threads passes a group's threads and its first column (cc0).
template <int D, int kCols, int kNT = kThreads, class Tile>
__device__ __forceinline__ void load_state(const Tile& st, const float* src, int col0, bool idle = false,
                                           int tid = static_cast<int>(threadIdx.x), int cc0 = 0) {
  for (int idx = tid; !idle && idx < D * kCols; idx += kNT) {
    const int cc = cc0 + idx / D, i = idx % D;
    st.set(i, cc, src[int64_t{col0 + cc} * D + i]);
  }
}
template <int D, int kCols, int kNT = kThreads, class Tile>
__device__ __forceinline__ void store_state(float* dst, const Tile& st, int col0, bool idle = false,
                                            int tid = static_cast<int>(threadIdx.x), int cc0 = 0) {
  for (int idx = tid; !idle && idx < D * kCols; idx += kNT) {
    const int cc = cc0 + idx / D, i = idx % D;
    dst[int64_t{col0 + cc} * D + i] = st.get(i, cc);
  }
}
// The first `rows` rows of a kCols-wide tile to row-major dst, rows D floats apart (for gdn_out:
// each chunk's starting state, U), by the first kThreads threads.
template <int D, int kCols, class Tile>
__device__ __forceinline__ void store_rows(float* dst, const Tile& m, int rows) {
  for (int idx = threadIdx.x; idx < rows * kCols; idx += kThreads) {
    const int i = idx / kCols, cc = idx % kCols;
    dst[i * D + cc] = m.get(i, cc);
  }
}

// A chunk's decays from its log-gates g (n rows): ge[t] = e^{G_t} and gtail[t] = e^{G_{n-1} - G_t}
// (zero from n on), by the threads whose index (tid: in the block, or in a group of threads) is
// below C; the caller's next barrier publishes them.
__device__ __forceinline__ void chunk_decays(const double* g, int n, float* ge, float* gtail,
                                             int tid = static_cast<int>(threadIdx.x)) {
  if (tid < C) {
    ge[tid] = expf(static_cast<float>(g[tid]));
    gtail[tid] = tid < n ? expf(static_cast<float>(g[n - 1] - g[tid])) : 0.0f;
  }
}

// decay[u] = e^{G_t - G_u} for u <= t, zero past t, by the threads whose index is below C.
__device__ __forceinline__ void decays_to(const double* g, int t, float* decay,
                                          int tid = static_cast<int>(threadIdx.x)) {
  if (tid < C) decay[tid] = tid <= t ? expf(static_cast<float>(g[t] - g[tid])) : 0.0f;
}
// decays_to between two barriers: the previous snapshot is done with decay[] before, every thread
// sees the new one after.
__device__ __forceinline__ void snapshot_decays(const double* g, int t, float* decay) {
  __syncthreads();
  decays_to(g, t, decay);
  __syncthreads();
}

// Launches one of these kernels with its shared-memory opt-in (asked once per device: `ready`,
// the caller's static), plainly or (kEarly) started early.
template <bool kEarly = false, typename Kernel>
cudaError_t start(Kernel* kernel, dim3 grid, size_t bytes, std::atomic<uint64_t>& ready, cudaStream_t stream,
                  const GdnArgs& a, const Scratch& s, int threads = kThreads) {
  cudaError_t e = allow_dynamic_shared(kernel, static_cast<int>(bytes), ready);
  if (e != cudaSuccess) return e;
  if constexpr (kEarly) e = LAUNCH_EARLY(kernel, grid, threads, bytes, stream, a, s);
  else LAUNCH(kernel, grid, threads, bytes, stream, a, s);
  return e == cudaSuccess ? cudaGetLastError() : e;
}

}  // namespace
}  // namespace gdn
