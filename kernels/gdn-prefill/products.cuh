// The matrix products of the chunked form on TF32 tensor cores with float accuracy (3xTF32), from
// mma.m16n8k8 fragments loaded straight from shared memory, and the shared-memory matrices the
// scan keeps (plain floats, or split once into TF32 parts).
#pragma once

#include <cstdint>

#include "device.cuh"

namespace gdn {
namespace {

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

}  // namespace
}  // namespace gdn
