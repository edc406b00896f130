// gdn-prefill: the chunked (WY / UT) form in two or three kernels, in ten variants: v1 does every
// product in float32 SIMT arithmetic; v2 does the matrix products on TF32 tensor cores with the
// 3xTF32 split (each operand a TF32 high part plus a TF32 remainder; hi*hi + hi*lo + lo*hi keeps
// float accuracy), mma.m16n8k8 fragments straight from shared memory; v3 is v2 with the scan's
// state tile and U kept split in shared memory (Cells<true>), two prep CTAs per SM and the K > 1
// snapshots as tensor-core products; v4 is v3 with O taken out of the scan (below); v5 is v4 with
// the scan's products on wgmma (sm_90a), every operand split once in shared memory; v6 is v3 with
// prep as a persistent kernel running beside the scan (gdn_prep_alongside); v7 is v4 with a
// look-ahead scan; v8 and v9 are v3 with the scan's columns as two chains on two warp groups; v10
// is v3 with prep folding its transform into the scan's other operands (fold_operands).
//
//   prep  grid (chunks, Hv, B): each chunk's own quantities, independent of the state and so all
//         chunks at once: G (cumulative log-gates, in double), A = strictly lower
//         beta_t e^{G_t - G_u} k_t.k_u, W and U' by forward substitution of (I + A) X = rhs,
//         P = e^{G_t - G_u} q_t.k_u (u <= t). Written to scratch.
//   scan  grid (S / 32, Hv, B): a CTA owns 32 value columns of one head's state (columns of the
//         delta rule are independent) and walks the chunks in order:
//         U = U' - W S;  O = scale (e^{G} Q S + P U);  snapshots;  S <- e^{G_last} S + K~^T U.
//   v4    the scan's sequential chain without O, on 16 columns a CTA (two CTAs an SM): it writes
//         U and each chunk's starting state S_c to scratch, and out, grid (chunks x Hv x S / 32,
//         B), computes every chunk's O = scale (e^{G} Q S_c + P U). out starts while the scan
//         runs and takes each chunk as soon as its scan CTAs have signalled it (ready counters).
//
// The kernels move their inputs with cp.async, every load of a chunk in flight at once: with one
// CTA per SM nothing else hides a global load's latency. The scan of v1 and v4 loads the next
// chunk's W and U' while it computes O (v4: while it waits for K), its Q and P (v1) during the
// snapshots and the state update, and its K during the next chunk's U. v2 and v3 leave every copy
// to a ninth warp (kProducer), which issues them while the other eight compute.
#include <type_traits>

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
  float* states;   // v4, v5, v7: [B][Hv][chunks][S][S], the state each chunk starts from (row i, column j)
  int* ready;      // v4, v5, v7: [B][Hv][chunks][S / 32], scan CTAs done with a chunk's 32 columns;
                   // v6: [B][Hv][chunks], prep done with a unit (v1-v3: states and ready are nullptr)
  float* m;        // v7: [B][Hv][chunks][C][C], M(c) = W(c) K~(c - 1)^T (chunk 0's unused); else nullptr
  int64_t chunks;
};

int64_t chunk_count(const GdnArgs& a) { return (a.T + C - 1) / C; }


// Whether a variant's scan hands each chunk's starting state and U to gdn_out (ready flags).
bool output_apart(Variant v) {
  return v == Variant::kOutputApart || v == Variant::kWgmma || v == Variant::kLookAhead;
}

Scratch carve(const GdnArgs& a, void* base, Variant v) {
  Scratch s;
  s.chunks = chunk_count(a);
  const int64_t units = int64_t{a.B} * a.Hv * s.chunks;
  s.g = static_cast<double*>(base);
  s.w = reinterpret_cast<float*>(s.g + units * C);
  s.u = s.w + units * C * a.S;
  s.p = s.u + units * C * a.S;
  const bool apart = output_apart(v);
  s.states = apart ? s.p + units * C * C : nullptr;
  s.ready = apart ? reinterpret_cast<int*>(s.states + units * a.S * a.S)
            : v == Variant::kPrepAlongside ? reinterpret_cast<int*>(s.p + units * C * C)
                                           : nullptr;
  // After the flags, 16-byte aligned (the scan copies M in 16-byte pieces).
  s.m = v == Variant::kLookAhead ? reinterpret_cast<float*>(s.ready) + (units * (a.S / kTileV) + 3) / 4 * 4 : nullptr;
  return s;
}


// a b on TF32 tensor cores with float accuracy: a = ah + al and b = bh + bl with ah, bh the
// nearest TF32 values, and a b = ah bh + al bh + ah bl (al bl is below float's precision). The
// rests al, bl are passed unrounded: the mma reads a TF32 operand's top 19 bits, so it truncates
// them, an error of under 2^-10 of a rest, itself under 2^-11 of its value. Rounding them first
// cost a conversion an element; without it the emulator's cases moved by -2.7 to +3.9 dB, the
// lowest at 129.7 dB.
// An operand fragment is split once (Split) and then serves every product it takes part in (the
// compiler shared the splits already when each product split its own: same instruction counts).
// The products go to two accumulators, ah bh to one and both rest products chained into the other
// (Acc): with a third for each, prep's K K^T loop spilled under its 128-register cap, and on the
// H200 two beat three in prep and mma_rows (v3 195.9 -> 187.6 us at 32 x d128 x 1024; program.md).
template <int N>
struct Split {
  float h[N], l[N];
  Split() = default;  // for arrays of splits, assigned before use
  __device__ __forceinline__ explicit Split(const float (&x)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      h[i] = to_tf32(x[i]);
      l[i] = x[i] - h[i];
    }
  }
  // Already split: h TF32 values, l the rest.
  __device__ __forceinline__ Split(const float (&hi)[N], const float (&lo)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      h[i] = hi[i];
      l[i] = lo[i];
    }
  }
};

struct Acc {
  float hh[4] = {}, rest[4] = {};
  __device__ __forceinline__ void add(const Split<4>& a, const Split<2>& b) {
    mma_tf32_m16n8k8(rest, a.l[0], a.l[1], a.l[2], a.l[3], b.h[0], b.h[1], rest);
    mma_tf32_m16n8k8(hh, a.h[0], a.h[1], a.h[2], a.h[3], b.h[0], b.h[1], hh);
    mma_tf32_m16n8k8(rest, a.h[0], a.h[1], a.h[2], a.h[3], b.l[0], b.l[1], rest);
  }
  __device__ __forceinline__ float sum(int e) const { return hh[e] + rest[e]; }
};

// A shared-memory matrix the scan keeps (the state tile, U): plain floats, or (v3) each value as
// the pair (its TF32 high part, the exact rest), split once when written rather than by every
// warp at every fragment it loads. get() gives the float back exactly either way.
template <bool kSplit>
struct Cells;
template <>
struct Cells<false> {
  float* m;
  int ld;
  __device__ __forceinline__ float get(int i, int c) const { return m[i * ld + c]; }
  __device__ __forceinline__ void set(int i, int c, float v) const { m[i * ld + c] = v; }
  // Cells (i, c) and (i, c + 1), c and ld even: a C fragment's neighbours in one store.
  __device__ __forceinline__ void set_pair(int i, int c, float v0, float v1) const {
    *reinterpret_cast<float2*>(m + i * ld + c) = float2{v0, v1};
  }
  // The B fragment of mma.m16n8k8 at rows k0.., columns col0.., split.
  __device__ __forceinline__ Split<2> load_b(int k0, int col0, int lane) const {
    const int r = lane >> 2, q = lane & 3;
    const float b[2] = {m[(k0 + q) * ld + col0 + r], m[(k0 + q + 4) * ld + col0 + r]};
    return Split<2>(b);
  }
};
template <>
struct Cells<true> {
  float2* m;
  int ld;
  __device__ __forceinline__ float get(int i, int c) const { return m[i * ld + c].x + m[i * ld + c].y; }
  __device__ __forceinline__ void set(int i, int c, float v) const {
    const float hi = to_tf32(v);
    m[i * ld + c] = float2{hi, v - hi};
  }
  // As one 16-byte store: with ld = kCols + 4 a quarter warp's stores of a C fragment meet 2 ways
  // on a bank, where ncu counted 3.6-way conflicts for the 8-byte stores of set.
  __device__ __forceinline__ void set_pair(int i, int c, float v0, float v1) const {
    const float hi0 = to_tf32(v0), hi1 = to_tf32(v1);
    *reinterpret_cast<float4*>(m + i * ld + c) = float4{hi0, v0 - hi0, hi1, v1 - hi1};
  }
  __device__ __forceinline__ Split<2> load_b(int k0, int col0, int lane) const {
    const int r = lane >> 2, q = lane & 3;
    const float2 b0 = m[(k0 + q) * ld + col0 + r], b1 = m[(k0 + q + 4) * ld + col0 + r];
    const float hi[2] = {b0.x, b1.x}, lo[2] = {b0.y, b1.y};
    return Split<2>(hi, lo);
  }
};

// Fragments of mma.m16n8k8 (PTX ISA): with r = lane / 4 and q = lane % 4, A holds (r, q),
// (r + 8, q), (r, q + 4), (r + 8, q + 4); B holds (q, r), (q + 4, r); C holds (r, 2q), (r, 2q + 1),
// (r + 8, 2q), (r + 8, 2q + 1). Row-major m[row * ld + col]; "t" loads the transpose.
// Where element e (0..3) of a lane's C fragment of the 16 x 8 tile at (row0, 8 tile) lies.
__device__ __forceinline__ int c_row(int row0, int lane, int e) { return row0 + (lane >> 2) + 8 * (e >> 1); }
__device__ __forceinline__ int c_col(int tile, int lane, int e) { return 8 * tile + 2 * (lane & 3) + (e & 1); }
// Stores scale times a lane's C fragment of the 16 x 8 tile at (row0, 8 tile) to m[row * ld + col]
// for the rows below n, as two 8-byte stores (elements 0, 1 and 2, 3 are neighbours in a row): a
// warp's store then fills whole 32-byte sectors (v3 158.4 -> 157.4 us against four 4-byte stores,
// which used half of each). m + 8 tile and ld must be even.
__device__ __forceinline__ void store_c_scaled(float* m, int64_t ld, const float (&acc)[4], float scale, int row0,
                                               int tile, int n, int lane) {
#pragma unroll
  for (int e = 0; e < 4; e += 2) {
    const int t = c_row(row0, lane, e);
    if (t < n) *reinterpret_cast<float2*>(m + t * ld + c_col(tile, lane, e)) = {acc[e] * scale, acc[e + 1] * scale};
  }
}
__device__ __forceinline__ void load_a(float (&a)[4], const float* m, int ld, int row0, int k0, int lane) {
  const int r = lane >> 2, q = lane & 3;
  a[0] = m[(row0 + r) * ld + k0 + q];
  a[1] = m[(row0 + r + 8) * ld + k0 + q];
  a[2] = m[(row0 + r) * ld + k0 + q + 4];
  a[3] = m[(row0 + r + 8) * ld + k0 + q + 4];
}
__device__ __forceinline__ void load_b_t(float (&b)[2], const float* m, int ld, int k0, int col0, int lane) {
  const int r = lane >> 2, q = lane & 3;
  b[0] = m[(col0 + r) * ld + k0 + q];
  b[1] = m[(col0 + r) * ld + k0 + q + 4];
}

// acc[m][j] += A_m[row0 .. row0 + 16)[k_begin .. k_end) B[k_begin .. k_end)[8 (tile0 + j) .. + 8) for
// m < kM, j < kN, on tensor cores: a chunk's rows (W, Q) times the state tile, or P times U. The
// range is a multiple of 8 kPar: kPar consecutive k steps go to separate accumulators, for more
// independent work, and the loop is unrolled four times, as is rank_update's (twice: v3 165.4 ->
// 162.5 us; four times: 154.6 -> 153.3, with 8 snapshots at 4096 tokens 583.8 -> 570.4; eight
// times lost). Several A operands over one B (the scan's W S with Q S) share B's fragments, and
// their chains interleave (v3 185.9 -> 179.9 us at 32 x d128 x 1024 against W S and Q S one after
// the other).
template <int kLdA, int kPar, class B, int kM, int kN>
__device__ __forceinline__ void mma_rows(float (&acc)[kM][kN][4], const float* const (&a)[kM], const B& b, int row0,
                                         int tile0, int k_begin, int k_end, int lane) {
  Acc part[kM][kPar][kN];  // [operand][k step within kPar][j]
#pragma unroll 4
  for (int k0 = k_begin; k0 < k_end; k0 += 8 * kPar) {
#pragma unroll
    for (int p = 0; p < kPar; ++p) {
      Split<4> sa[kM];
#pragma unroll
      for (int m = 0; m < kM; ++m) {
        float fa[4];
        load_a(fa, a[m], kLdA, row0, k0 + 8 * p, lane);
        sa[m] = Split<4>(fa);
      }
#pragma unroll
      for (int j = 0; j < kN; ++j) {
        const Split<2> sb = b.load_b(k0 + 8 * p, 8 * (tile0 + j), lane);
#pragma unroll
        for (int m = 0; m < kM; ++m) part[m][p][j].add(sa[m], sb);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < kM; ++m)
#pragma unroll
    for (int j = 0; j < kN; ++j)
#pragma unroll
      for (int p = 0; p < kPar; ++p)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[m][j][e] += part[m][p][j].sum(e);
}

// The same for one A operand over [0, k_end), a multiple of 16, even and odd k steps apart.
template <int kLdA, class B, int kN>
__device__ __forceinline__ void mma_rows(float (&acc)[kN][4], const float* a, const B& b, int row0, int tile0,
                                         int k_end, int lane) {
  float one[1][kN][4];
#pragma unroll
  for (int j = 0; j < kN; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) one[0][j][e] = acc[j][e];
  mma_rows<kLdA, 2>(one, {a}, b, row0, tile0, 0, k_end, lane);
#pragma unroll
  for (int j = 0; j < kN; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = one[0][j][e];
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

// v10 folds a chunk (prep writes P' and W2 instead of P, W and U'; see gdn_prep) unless it holds
// a snapshot, which needs the chunk's U itself.
__device__ __forceinline__ bool folds(const GdnArgs& a, int64_t t0, int n) {
  return a.K == 1 || first_snapshot(a, t0, n) == n;
}

// A[t][u] = beta_t e^{G_t - G_u} k_t.k_u (u < t) and P[t][u] = e^{G_t - G_u} q_t.k_u (u <= t), from
// the products k_t.k_u and q_t.k_u; zero elsewhere and in rows from n on. P's rows are ldp apart.
__device__ __forceinline__ void store_a_p(float* as, int lda, float* p, int ldp, const double* gs, const float* betas,
                                          int n, int t, int u, float kk, float qk) {
  const float decay = u <= t && t < n ? expf(static_cast<float>(gs[t] - gs[u])) : 0.0f;
  as[t * lda + u] = u < t ? betas[t] * decay * kk : 0.0f;
  p[t * ldp + u] = decay * qk;
}

// One row of a forward substitution: y - at[0, t) x[0, t), with four partial sums so that the
// multiply-adds do not wait on each other (at is 16-byte aligned when kLdA is a multiple of 4).
// Called with t known at compile time (unrolled loops), it keeps x in registers.
template <int kLdA, int N>
__device__ __forceinline__ float substitute_row(const float* at, const float (&x)[N], int t, float y) {
  float r0 = y, r1 = 0, r2 = 0, r3 = 0;
  int u = 0;
  if constexpr (kLdA % 4 == 0) {
#pragma unroll
    for (; u + 4 <= t; u += 4) {
      const float4 a4 = *reinterpret_cast<const float4*>(at + u);
      r0 -= a4.x * x[u];
      r1 -= a4.y * x[u + 1];
      r2 -= a4.z * x[u + 2];
      r3 -= a4.w * x[u + 3];
    }
  }
#pragma unroll
  for (; u < t; ++u) r0 -= at[u] * x[u];
  return (r0 + r1) + (r2 + r3);
}

// Forward substitution of (I + A) x = scale rhs for one column of W or U', in place: x holds the
// column of rhs on entry. The column lives in registers and the loops unroll completely.
template <int kLdA>
__device__ __forceinline__ void forward_substitute(float (&x)[C], const float* as, const float* scale) {
#pragma unroll
  for (int t = 0; t < C; ++t) x[t] = substitute_row<kLdA>(as + t * kLdA, x, t, scale[t] * x[t]);
}

// The kB rows from r0 of a column of X (xc, rows ld apart) solved in place against A's diagonal
// block at r0, and (kOut) those below n stored to out (rows out_ld apart). Loads, solve, stores
// apart: with a store between them the compiler could not move the next row's loads of A ahead
// (as and xc may alias, as far as it knows).
template <int kLdA, int kB, bool kOut>
__device__ __forceinline__ void solve_block_column(float* xc, int ld, const float* as, int r0, float* out = nullptr,
                                                   int out_ld = 0, int n = 0) {
  float x[kB];
#pragma unroll
  for (int i = 0; i < kB; ++i) x[i] = xc[(r0 + i) * ld];
#pragma unroll
  for (int i = 0; i < kB; ++i) x[i] = substitute_row<kLdA>(as + (r0 + i) * kLdA + r0, x, i, x[i]);
#pragma unroll
  for (int i = 0; i < kB; ++i) {
    xc[(r0 + i) * ld] = x[i];
    if (kOut && r0 + i < n) out[(r0 + i) * out_ld] = x[i];
  }
}

// (I + A) X = diag(scale) R for W (R = K in ks, scale wscale) and U' (R = V in vs, scale betas)
// together, X over R in shared memory and out to w_out / u_out, in blocks of 16 rows: block b's
// rows first take R_b scaled minus A[b][0, 16b) X[0, 16b) as a 3xTF32 product (the warps over
// column tiles), then a thread per column solves the block's own 16 rows. The serial work per
// column is four 16-row solves instead of one of 64 rows: about a quarter of the scalar
// multiply-adds, the rest on tensor cores (prep 54-55 -> 50 us at 32 x d128 x 1024 on the H200).
template <int D, int kLdX, int kLdA>
__device__ __forceinline__ void blocked_substitute(float* ks, float* vs, const float* as, const float* wscale,
                                                   const float* betas, float* w_out, float* u_out, int n, int warp,
                                                   int lane) {
  constexpr int kB = 16;                     // rows a block
  constexpr int kWarpCols = 2 * D / kWarps;  // the columns of the product a warp takes
  constexpr int kT = kWarpCols / 8;
  static_assert(D % kWarpCols == 0 && kT >= 1 && 2 * D <= kThreads, "a warp's columns lie in K or in V");
  const int c0 = warp * kWarpCols;
  float* const xw = c0 < D ? ks + c0 : vs + (c0 - D);  // this warp's first column
  const float* const sw = c0 < D ? wscale : betas;
  const int r = lane >> 2, q = lane & 3;
#pragma unroll 1
  for (int r0 = 0; r0 < C; r0 += kB) {
    // Y = scale R - A[r0.., 0..r0) X[0..r0, ..) for this block's rows, in place of R.
    Acc part[kT];
    for (int k0 = 0; k0 < r0; k0 += 8) {
      float fa[4];
      load_a(fa, as, kLdA, r0, k0, lane);
      const Split<4> sa(fa);
#pragma unroll
      for (int j = 0; j < kT; ++j) {
        const float fb[2] = {xw[(k0 + q) * kLdX + 8 * j + r], xw[(k0 + q + 4) * kLdX + 8 * j + r]};
        part[j].add(sa, Split<2>(fb));
      }
    }
#pragma unroll
    for (int j = 0; j < kT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int t = c_row(r0, lane, e), cc = c_col(j, lane, e);
        xw[t * kLdX + cc] = sw[t] * xw[t * kLdX + cc] - part[j].sum(e);
      }
    __syncthreads();
    // The block's own rows, a column a thread.
    if (threadIdx.x < 2 * D) {
      const int col = threadIdx.x % D;
      solve_block_column<kLdA, kB, true>((threadIdx.x < D ? ks : vs) + col, kLdX, as, r0,
                                         (threadIdx.x < D ? w_out : u_out) + col, D, n);
    }
    __syncthreads();  // X's block is there for the next blocks' products
  }
}

// v10 (Variant::kFolded): prep folds the chunk's transform into the scan's other operands instead
// of writing W and U'. With T' = (I + A)^{-1} diag(beta),
//   U = U' - W S = T' (V - diag(e^{G}) K S),
// so prep writes P' = P T' for O and W2 = T'^T K~ for the state update, and the scan takes
// Y = V - diag(e^{G}) K S from K and V as they come: O = scale (e^{G} Q S + P' Y) and
// S <- e^{G_last} S + W2^T Y. The scan's chain keeps its products and barriers; prep loses V, U'
// and the substitution's 2 D right-hand sides, and solves for T' (C columns) instead.

// T' rows are kLdT floats apart: the B fragments read T' by rows (k) on 32 distinct banks.
constexpr int kLdT = C + 8;

// acc[j] += K~^T U over the chunk rows below k_end (a multiple of 8), K~[u][i] = w[u] K[u][i]: the
// D x kCols state's tiles of 16 x 8, kN of them in a row per warp from (srow0, scol0).
template <int kLdK, class U, int kN>
__device__ __forceinline__ void rank_update(Acc (&acc)[kN], const float* w, const float* kx, const U& us,
                                            int srow0, int scol0, int k_end, int lane) {
  const int r = lane >> 2, q = lane & 3;
#pragma unroll 4
  for (int k0 = 0; k0 < k_end; k0 += 8) {
    float fa[4];
    fa[0] = w[k0 + q] * kx[(k0 + q) * kLdK + srow0 + r];
    fa[1] = w[k0 + q] * kx[(k0 + q) * kLdK + srow0 + r + 8];
    fa[2] = w[k0 + q + 4] * kx[(k0 + q + 4) * kLdK + srow0 + r];
    fa[3] = w[k0 + q + 4] * kx[(k0 + q + 4) * kLdK + srow0 + r + 8];
    const Split<4> sa(fa);
#pragma unroll
    for (int j = 0; j < kN; ++j) acc[j].add(sa, us.load_b(k0, 8 * (scol0 + j), lane));
  }
}

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

// kTwoPerSm (v3): V is loaded into Q's buffer once Q K^T is done, so that the shared memory of
// two CTAs fits one SM and one CTA's waits overlap the other's work. kFold (v10) adds T'.
template <int D, bool kTC, bool kTwoPerSm, bool kFold = false>
constexpr size_t prep_smem() {
  return sizeof(float) *
         ((kTwoPerSm ? 2 : 3) * C * Strides<D, kTC>::kX + C * Strides<D, kTC>::kA + (kFold ? C * kLdT : 0));
}

template <int D, bool kTC, bool kTwoPerSm, bool kFold = false>
__global__ void __launch_bounds__(kThreads, kTwoPerSm ? 2 : 1) gdn_prep(GdnArgs a, Scratch s) {
  static_assert(!kFold || (kTC && kTwoPerSm), "v10 builds on v3");
  using L = Strides<D, kTC>;
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
  float* vs = kTwoPerSm ? qs : qs + C * L::kX;         // [C][kX]
  float* as = (kTwoPerSm ? qs : vs) + C * L::kX;       // [C][kA]
  float* xs = as + C * L::kA;                          // kFold: [C][kLdT], T'
  // kFold: this unit's P stays in shared memory, in Q's place once the products are done.
  const bool folded = kFold && folds(a, t0, n);
  __shared__ double gs[C];
  __shared__ float betas[C], wscale[C];

  ChunkGates gates;
  gates.fetch(a, b, h, t0, n);
  const float* v_rows = a.v + b * a.v_seq + h * a.v_head + t0 * a.v_token;
  // K and Q in two groups of column halves (V with the second, where it comes early): the
  // tensor-core products start on the first half while the second lands (prep 46.5 -> 45.7 us).
  const float* k_rows = a.k + bqk * a.k_seq + hk * a.k_head + t0 * a.k_token;
  const float* q_rows = a.q + bqk * a.q_seq + hk * a.q_head + t0 * a.q_token;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    load_rows_async<D / 2>(ks + half * (D / 2), L::kX, k_rows + half * (D / 2), a.k_token, n);
    load_rows_async<D / 2>(qs + half * (D / 2), L::kX, q_rows + half * (D / 2), a.q_token, n);
    if (!kTwoPerSm && half == 1) load_rows_async<D>(vs, L::kX, v_rows, a.v_token, n);
    async_commit();
  }
  gates.publish(betas, gs);
  if constexpr (kTC) async_wait<1>();
  else async_wait<0>();
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
  if constexpr (kTC) {
    // K K^T and Q K^T: 4 x 8 tiles of 16 x 8 each, kP of them in a row per warp.
    constexpr int kP = 32 / kWarps;
    const int row0 = 16 * (warp / (8 / kP)), col_tile0 = (warp % (8 / kP)) * kP;
    Acc kk[kP], qk[kP];
    // Tiles wholly above the diagonal stay zero (A and P are lower triangular): warps whose
    // tiles all are skip the products.
    const int k_end = 8 * col_tile0 < row0 + 16 ? D : 0;
    auto products = [&](int k_begin, int k_stop) {
#pragma unroll 2
      for (int k0 = k_begin; k0 < k_stop; k0 += 8) {
        float fk[4], fq[4];
        load_a(fk, ks, L::kX, row0, k0, lane);
        load_a(fq, qs, L::kX, row0, k0, lane);
        const Split<4> sk(fk), sq(fq);
#pragma unroll
        for (int j = 0; j < kP; ++j) {
          float fb[2];
          load_b_t(fb, ks, L::kX, k0, 8 * (col_tile0 + j), lane);
          const Split<2> sb(fb);
          kk[j].add(sk, sb);
          qk[j].add(sq, sb);
        }
      }
    };
    products(0, k_end / 2);
    async_wait<0>();  // the second half (and V without kTwoPerSm)
    __syncthreads();
    products(k_end / 2, k_end);
    if (folded) __syncthreads();  // every warp is done reading Q
#pragma unroll
    for (int j = 0; j < kP; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        store(c_row(row0, lane, e), c_col(col_tile0 + j, lane, e), kk[j].sum(e), qk[j].sum(e));
  } else {
    for (int idx = threadIdx.x; idx < C * C; idx += kThreads) {
      const int t = idx / C, u = idx % C;
      float kk = 0, qk = 0;
      if (u <= t && t < n)
        for (int i = 0; i < D; ++i) {
          const float ku = ks[u * L::kX + i];
          kk += ks[t * L::kX + i] * ku;
          qk += qs[t * L::kX + i] * ku;
        }
      store(t, u, kk, qk);
    }
  }
  if (threadIdx.x < C) s.g[unit * C + threadIdx.x] = gs[threadIdx.x];
  // Before the scan, which starts after prep.
  if (s.ready != nullptr && threadIdx.x < D / kTileV) s.ready[unit * (D / kTileV) + threadIdx.x] = 0;
  if (kTwoPerSm && !folded) {
    __syncthreads();  // every warp is done with Q
    load_rows_async<D>(vs, L::kX, v_rows, a.v_token, n);
    async_commit();
    async_wait<0>();
  }
  __syncthreads();

  if constexpr (kTC) {
    if (folded) {
      invert_transform<L::kA>(xs, as, betas, warp, lane);
      fold_operands<D, L::kX, L::kA>(xs, qs, ks, wscale, s.p + unit * C * C, s.w + unit * C * D, warp, lane);
      return;
    }
    blocked_substitute<D, L::kX, L::kA>(ks, vs, as, wscale, betas, s.w + unit * C * D, s.u + unit * C * D, n, warp,
                                        lane);
    return;
  }
  // Forward substitution, one column of W (threads 0..D-1) or of U' (D..2D-1) per thread.
  if (threadIdx.x < 2 * D) {
    const bool is_w = threadIdx.x < D;
    const int col = threadIdx.x % D;
    const float* rhs = is_w ? ks : vs;
    float x[C];
#pragma unroll
    for (int t = 0; t < C; ++t) x[t] = rhs[t * L::kX + col];
    forward_substitute<L::kA>(x, as, is_w ? wscale : betas);
    float* dst = (is_w ? s.w : s.u) + unit * C * D + col;
#pragma unroll
    for (int t = 0; t < C; ++t)
      if (t < n) dst[t * D] = x[t];
  }
}

// v6: prep alongside the scan. A persistent kernel of one CTA per SM walks the units chunk by chunk
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

// A scan CTA's D x kCols state tile from and to the engine's layout (column-major: S[i][j] at
// j D + i, so consecutive threads take consecutive rows of a column), by kNT threads, tid the
// caller's index among them (v2 and v3 pass their producer warp as `idle`; the test sits in the
// loop's condition, which keeps v3's machine code as measured). v8 passes a warp group's threads
// and its columns' first (cc0) within the tile.
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
// (zero from n on; with `folded` one below n, as v10's W2 holds the decays), by the threads whose
// index (tid: in the block, or v8's in its group) is below C; the caller's next barrier publishes
// them.
__device__ __forceinline__ void chunk_decays(const double* g, int n, float* ge, float* gtail,
                                             int tid = static_cast<int>(threadIdx.x), bool folded = false) {
  if (tid < C) {
    ge[tid] = expf(static_cast<float>(g[tid]));
    gtail[tid] = tid < n ? (folded ? 1.0f : expf(static_cast<float>(g[n - 1] - g[tid]))) : 0.0f;
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
// chains half as long. v6 keeps one warp per tile: the exchange would not leave prep room.
template <bool kTC, bool kApart, bool kAlongside>
constexpr bool kHalvesK = kTC && !kApart && !kAlongside;
constexpr int kSwapFloats = 16;  // per thread: 2 operands x 2 column tiles x 4

// v2, v3: a ninth warp (the producer) issues every copy, so that the eight that compute never
// stall issuing them. Issuing Q and P alone held each of v3's warps 1406 of a chunk's 12800
// cycles (clock64 stamps, 32 x d128 x 1024), as long with 4 heads as with 32: the SM's intake of
// 16-byte copies (about 35 bytes a cycle), not L2. The producer issues P and K while the others
// compute W S and Q S, the next Q once they are done with it, the next W U' G during the state
// update, and waits for each group before the barrier ahead of its first use (v3 174.8 -> 165.5
// us; the next Q after W S Q S rather than in the state update's window: 165.4 -> 161.6 us).
template <bool kTC, bool kApart, bool kAlongside>
constexpr bool kProducer = kHalvesK<kTC, kApart, kAlongside>;
template <bool kTC, bool kApart, bool kAlongside>
constexpr int kScanThreads = kThreads + (kProducer<kTC, kApart, kAlongside> ? 32 : 0);

template <int D, bool kTC, bool kSplit, bool kApart, bool kAlongside = false>
constexpr size_t scan_smem() {
  constexpr int kCols = kScanCols<kApart>;
  using L = Strides<D, kTC, kCols>;
  const size_t kept =
      kSplit ? sizeof(float2) * (D + C) * kSplitLd<kCols> : sizeof(float) * (D + C) * L::kS;
  const size_t swap = kHalvesK<kTC, kApart, kAlongside> ? sizeof(float) * kThreads * kSwapFloats : 0;
  return kept + swap + sizeof(float) * (C * L::kS + (kApart ? 2 : 3) * C * L::kX + (kApart ? 0 : C * L::kA));
}

// Snapshot S_t = e^{G_t} S + K~^T U of a split state (v3, v4, v6, v7), with decay[u] the decays to
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

// Two CTAs an SM's worth of registers (128 a thread) for v4, whose CTAs pair up, and for v6, whose
// CTA shares the SM with a prep CTA of the same size (121 used, no spills, against 165 uncapped).
// kFold (v10): v3 on folded chunks (see fold_operands): K in W's buffer, V in U''s and W2 in K's.
template <int D, bool kTC, bool kSplit, bool kApart, bool kAlongside = false, bool kFold = false>
__global__ void __launch_bounds__(kScanThreads<kTC, kApart, kAlongside>, kApart || kAlongside ? 2 : 1)
    gdn_scan(GdnArgs a, Scratch s) {
  constexpr int kCols = kScanCols<kApart>;
  static_assert(kTC || !kSplit, "only the tensor-core form keeps split operands");
  static_assert(kTC || kCols == 32, "v1 gives each lane a column");
  static_assert(!kApart || kSplit, "v4 builds on v3");
  static_assert(!kAlongside || (kSplit && !kApart), "v6 is v3 with prep alongside");
  static_assert(!kFold || (kSplit && !kApart && !kAlongside), "v10 builds on v3");
  using L = Strides<D, kTC, kCols>;
  constexpr int kRowsT = C / kWarps;  // chunk rows per warp
  constexpr int kRowsI = D / kWarps;  // state rows per warp
  const int h = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int col0 = blockIdx.x * kCols;
  const int hk = h % a.Hk, bqk = b / (a.B / a.Bqk);
  constexpr bool kProd = kProducer<kTC, kApart, kAlongside>;
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
    const bool folded = folded_at(c);
    // W, U', G of this chunk (kProducer: and Q, whose Q S goes with W S; P comes before O).
    if constexpr (kProd) {
      if (producer) async_wait<0>();
    } else {
      async_wait<(kTC && !kApart) ? 1 : 2>();
    }
    __syncthreads();  // ... for every thread; the previous chunk is done with ge, gtail, decay
    chunk_decays(g, n, ge, gtail, static_cast<int>(threadIdx.x), folded);
    if constexpr (kApart) {
      // The state this chunk starts from, for gdn_out.
      store_rows<D, kCols>(s.states + (unit0 + c) * D * D + col0, st, D);
    }

    // U = U' - W S (v2, v3: with Q S for O); folded, Y = V - e^{G} K S in its place.
    [[maybe_unused]] float qs_acc[kN][4] = {};
    if constexpr (kTC) {
      float acc[kN][4] = {};
      if constexpr (kApart) {
        mma_rows<L::kX>(acc, ws, st, trow0, tcol0, D, lane);
      } else if constexpr (kHalvesK<kTC, kApart, kAlongside>) {
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
      } else {
        float ws_qs[2][kN][4] = {};
        mma_rows<L::kX, 2>(ws_qs, {ws, qx}, st, trow0, tcol0, 0, D, lane);
#pragma unroll
        for (int j = 0; j < kN; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[j][e] = ws_qs[0][j][e], qs_acc[j][e] = ws_qs[1][j][e];
      }
      float* u_out = s.u + (unit0 + c) * C * D + col0;  // kApart: U over U', which only this CTA read
#pragma unroll
      for (int j = 0; j < kN && !producer; ++j)
#pragma unroll
        for (int e = 0; e < 4; e += 2) {
          const int t = c_row(trow0, lane, e), cc = c_col(tcol0 + j, lane, e);
          const float u0 = t < n ? up[t * L::kS + cc] - (folded ? ge[t] * acc[j][e] : acc[j][e]) : 0.0f;
          const float u1 = t < n ? up[t * L::kS + cc + 1] - (folded ? ge[t] * acc[j][e + 1] : acc[j][e + 1]) : 0.0f;
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
    else if constexpr (kAlongside) wait_prep(c + 1);
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
        float (&acc)[kN][4] = qs_acc;
#pragma unroll
        for (int j = 0; j < kN; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[j][e] *= ge[c_row(trow0, lane, e)];
        // P is lower triangular: columns past this row tile's last row add nothing.
        if (!producer) mma_rows<L::kA>(acc, ps, us, trow0, tcol0, trow0 + 16, lane);
#pragma unroll
        for (int j = 0; j < kN && !producer; ++j) store_c_scaled(ob, o_token, acc[j], scale, trow0, tcol0 + j, n, lane);
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
      for (int t = first_snapshot(a, t0, n); t < n; ++t) {
        const int64_t slot = a.T - 1 - (t0 + t);
        snapshot_decays(g, t, decay);
        float* dst = head_out + slot * a.slot_stride;
        if (producer) continue;  // after both barriers of the iteration
        if constexpr (kSplit) {
          write_snapshot<D, L::kX, kTiles>(dst, ge[t], decay, kx, st, us, t, col0, srow0, scol0, lane);
        } else {
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
  // v6 started early: the stream's next kernel comes after prep too.
  if constexpr (kAlongside) wait_for_primary();
}

// v5: v4's sequential chain on wgmma (sm_90a). A CTA owns 32 value columns of one head, as in v3;
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

// v4's and v5's output, every chunk of every head at once: O = scale (e^{G} Q S_c + P U) for 32
// value columns of one chunk, from the starting state and U the scan wrote. It starts while the
// scan runs (LAUNCH_EARLY), in the shared memory and registers the scan leaves free on each SM
// (v4's two 16-column scan CTAs an SM leave room for one; v5's one at d128 leaves none, so there
// it runs beside the scan only on SMs without a scan CTA), and
// waits for the scan CTAs of its 32 columns before it reads their output. Chunks are the slowest
// grid index: the CTAs that start first are the ones whose chunks the scan reaches first.
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

// v7: the look-ahead chain (program.md, idea 1) on v4's split, O left to gdn_out. With
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

// v8: v3's scan as two independent chains a CTA (program.md, idea 8). The CTA's 32 value columns
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

template <int D, bool kTC, bool kSplit, bool kFold = false>
cudaError_t start_prep(const GdnArgs& a, const Scratch& s, cudaStream_t stream) {
  static std::atomic<uint64_t> ready{0};
  return start(gdn_prep<D, kTC, kSplit, kFold>, dim3(static_cast<unsigned>(s.chunks), a.Hv, a.B),
               prep_smem<D, kTC, kSplit, kFold>(), ready, stream, a, s);
}

// The output kernel of v4 and v5, started early (it waits for the scan chunk by chunk).
template <int D, int kSignals>
cudaError_t start_out(const GdnArgs& a, const Scratch& s, cudaStream_t stream) {
  static std::atomic<uint64_t> ready{0};
  return start<true>(gdn_out<D, kSignals>, dim3(static_cast<unsigned>(s.chunks * a.Hv * (D / kTileV)), a.B),
                     out_smem<D>(), ready, stream, a, s);
}

template <int D, bool kTC, bool kSplit, bool kApart = false, bool kFold = false>
cudaError_t launch(const GdnArgs& a, const Scratch& s, cudaStream_t stream) {
  static std::atomic<uint64_t> scan_ready{0};
  cudaError_t e = start_prep<D, kTC, kSplit, kFold>(a, s, stream);
  if (e == cudaSuccess)
    e = start(gdn_scan<D, kTC, kSplit, kApart, false, kFold>, dim3(D / kScanCols<kApart>, a.Hv, a.B),
              scan_smem<D, kTC, kSplit, kApart>(), scan_ready, stream, a, s, kScanThreads<kTC, kApart, false>);
  if constexpr (kApart)
    if (e == cudaSuccess) e = start_out<D, kTileV / kTileV4>(a, s, stream);
  return e;
}

// v5: v3's prep, the wgmma scan, v4's output.
template <int D>
cudaError_t launch_wg(const GdnArgs& a, const Scratch& s, cudaStream_t stream) {
  static std::atomic<uint64_t> scan_ready{0};
  cudaError_t e = start_prep<D, true, true>(a, s, stream);
  if (e == cudaSuccess)
    e = start(gdn_scan_wg<D>, dim3(D / kTileV5, a.Hv, a.B), wg_scan_smem<D>(), scan_ready, stream, a, s);
  return e == cudaSuccess ? start_out<D, kTileV / kTileV5>(a, s, stream) : e;
}

// v7: v3's prep, M, the look-ahead scan, v4's output.
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

// v8, v9: v3's prep, the scan of two chains a CTA.
template <int D, bool kStagger>
cudaError_t launch_pair(const GdnArgs& a, const Scratch& s, cudaStream_t stream) {
  static std::atomic<uint64_t> scan_ready{0};
  cudaError_t e = start_prep<D, true, true>(a, s, stream);
  if (e == cudaSuccess)
    e = start(gdn_scan_pair<D, kStagger>, dim3(D / kTileV, a.Hv, a.B), pair_smem<D>(), scan_ready, stream, a, s,
              kThreads + 32);
  return e;
}

// v6: the ready flags cleared, prep on one CTA per SM (fewer for short inputs), then v3's scan
// started early beside it.
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
    e = start<true>(gdn_scan<D, true, true, false, true>, dim3(D / kTileV, a.Hv, a.B),
                    scan_smem<D, true, true, false, true>(), scan_ready, stream, a, s);
  return e;
}

}  // namespace

bool gdn_prefill_supported(const GdnArgs& a) {
  // Heads and sequences are grid dimensions y and z (at most 65535 each).
  return (a.S == 64 || a.S == 128) && a.Hk > 0 && a.Hv > 0 && a.Hv <= 65535 && a.Hv % a.Hk == 0 && a.Bqk > 0 &&
         a.B > 0 && a.B <= 65535 && a.B % a.Bqk == 0 && a.T > 0 && a.K >= 1;
}

size_t gdn_prefill_scratch_bytes(const GdnArgs& a, Variant v) {
  const size_t units = static_cast<size_t>(a.B) * a.Hv * chunk_count(a);
  const size_t apart = output_apart(v) ? units * (sizeof(float) * a.S * a.S + sizeof(int) * (a.S / kTileV)) : 0;
  const size_t flags = v == Variant::kPrepAlongside ? units * sizeof(int) : 0;
  const size_t m = v == Variant::kLookAhead ? 16 + units * sizeof(float) * C * C : 0;
  return units * C * (sizeof(double) + sizeof(float) * (2 * a.S + C)) + apart + flags + m;
}

cudaError_t gdn_prefill(const GdnArgs& a, void* scratch, cudaStream_t stream, Variant v) {
  // The scan copies scratch in 16-byte pieces.
  if (!gdn_prefill_supported(a) || reinterpret_cast<uintptr_t>(scratch) % 16 != 0) return cudaErrorInvalidValue;
  const Scratch s = carve(a, scratch, v);
  switch (v) {
    case Variant::kTensorCores:
      return a.S == 128 ? launch<128, true, false>(a, s, stream) : launch<64, true, false>(a, s, stream);
    case Variant::kTensorCoresSplit:
      return a.S == 128 ? launch<128, true, true>(a, s, stream) : launch<64, true, true>(a, s, stream);
    case Variant::kOutputApart:
      return a.S == 128 ? launch<128, true, true, true>(a, s, stream) : launch<64, true, true, true>(a, s, stream);
    case Variant::kWgmma:
      return a.S == 128 ? launch_wg<128>(a, s, stream) : launch_wg<64>(a, s, stream);
    case Variant::kPrepAlongside:
      return a.S == 128 ? launch_alongside<128>(a, s, stream) : launch_alongside<64>(a, s, stream);
    case Variant::kLookAhead:
      return a.S == 128 ? launch_ahead<128>(a, s, stream) : launch_ahead<64>(a, s, stream);
    case Variant::kPairChains:
      return a.S == 128 ? launch_pair<128, false>(a, s, stream) : launch_pair<64, false>(a, s, stream);
    case Variant::kPairChainsStaggered:
      return a.S == 128 ? launch_pair<128, true>(a, s, stream) : launch_pair<64, true>(a, s, stream);
    case Variant::kFolded:
      return a.S == 128 ? launch<128, true, true, false, true>(a, s, stream)
                        : launch<64, true, true, false, true>(a, s, stream);
    case Variant::kSimt:
      break;
  }
  return a.S == 128 ? launch<128, false, false>(a, s, stream) : launch<64, false, false>(a, s, stream);
}

}  // namespace gdn
