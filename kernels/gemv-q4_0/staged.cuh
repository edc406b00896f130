// The GEMV's cp.async ring (v3 to v5 and v5-narrow): v2's arithmetic (one int8 mma.m16n8k32 per Q4_0 block of 16 rows x 8
// columns, exact integer sums, one float multiply-add per result) fed the way HBM wants to be
// read. On the H200 v1 and v2 reached a third of the copy bandwidth: their loads are 2 bytes wide
// (a Q4_0 block is 18 bytes, so nothing in it is 4-byte aligned) and a warp had only a few hundred
// bytes in flight.
//
// Here each warp streams its share of k through a ring of shared-memory stages with cp.async:
// a stage is 8 consecutive blocks of each of the CTA's rows, 144 contiguous bytes a row, copied
// as nine 16-byte pieces, and kStages - 1 stages are always in flight while one is multiplied.
// Fragments are then read from shared memory. The activation fragments of the next stage are
// loaded into registers while the current one is multiplied.
//
// A warp's ring is its own: its lanes fill it and read it. v3 still meets the whole CTA at two
// barriers per stage, so every stage waits for the slowest warp's copies; v4 (kWarpSync) meets
// only its own warp there, and the CTA once, to add up the warps' sums at the end.
//
// v5 is v4-wide with a 2-stage ring: half the shared memory, so two CTAs fit an SM instead of
// one. On the H200 that beat every deeper ring (4096 x 14336, 8 columns: 20.3 us against
// v4-wide's 21.8; 151936 x 4096: 130 against 175 us at 1 column). Asking the compiler for 3 or 4
// CTAs an SM (80 and 64 registers, some spilling) was slower at every shape (26-37 us on
// 4096 x 14336).
//
// Up to 16 columns (kColTiles = 2, v5 only): a speculative step's verification of 9-16 tokens.
// Each weight fragment then meets two column tiles on two mma, so W is still read once. The
// second tile's activation fragments would not fit the registers twice over (two CTAs an SM
// leave 128 a thread), so such a kernel loads a stage's fragments at the stage's start instead
// of one stage ahead; the wait for the stage's weights covers their loads (they come from L2).
//
// Needs rows whose byte length is a multiple of 16 (k a positive multiple of 256) and 16-byte
// aligned W; other shapes go to v2, which computes the same sums.
#pragma once

#include <cuda_fp16.h>

#include <atomic>
#include <cstdint>

#include "device.cuh"
#include "kernel.cuh"
#include "q4_device.cuh"

namespace gemv {
namespace staged {  // named: kernel_emu.cc compiles every variant in one unit

constexpr int kWarps = 8;
constexpr int kSuper = 8;                              // blocks per stage
constexpr int kRowBytes = kSuper * sizeof(BlockQ4_0);  // 144: a stage's bytes of one row
constexpr int kPieces = kRowBytes / 16;                // its 16-byte copies

// A stage's activation fragments for one lane: column g's quants 4t.. and 16+4t.. of each
// block, and the scales of columns 2t and 2t+1.
struct XFrag {
  int q[kSuper][2];
  float d[kSuper][2];
};

template <int kTiles, int kStages>
constexpr size_t smem_bytes() {
  return size_t{kWarps} * kStages * 16 * kTiles * kRowBytes;
}

template <int kTiles, int kStages, bool kWarpSync, int kColTiles>
__global__ void __launch_bounds__(kWarps * 32) gemv_staged(const BlockQ4_0* __restrict__ w,
                                                           const BlockQ8_1* __restrict__ x, int64_t x_stride,
                                                           float* __restrict__ out, int64_t rows, int64_t nb,
                                                           int cols) {
  constexpr int kRows = 16 * kTiles;
  constexpr int kStageBytes = kRows * kRowBytes;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;

  DYNAMIC_SHARED(uint4, smem);
  uint8_t* ring = reinterpret_cast<uint8_t*>(smem) + static_cast<size_t>(warp) * kStages * kStageBytes;

  // The warp's super-blocks (kSuper blocks each): a contiguous range, the same count for every
  // warp so that all of them reach the block-wide barriers together.
  const int64_t supers = nb / kSuper;
  const int64_t per = (supers + kWarps - 1) / kWarps;
  const int64_t first = warp * per;
  const int64_t count = first >= supers ? 0 : (supers - first < per ? supers - first : per);

  // A lane's pieces of every stage: their places in a stage and their first source bytes, worked
  // out once (a stage moves each source on by kRowBytes).
  constexpr int kLanePieces = (kRows * kPieces + 31) / 32;
  const uint8_t* piece_src[kLanePieces];
  int piece_dst[kLanePieces];
#pragma unroll
  for (int k = 0; k < kLanePieces; ++k) {
    const int i = lane + 32 * k;
    const int r = i / kPieces, p = i % kPieces;
    const int64_t row = row0 + r < rows ? row0 + r : rows - 1;  // past the end: any real row, unused
    piece_src[k] = i < kRows * kPieces ? reinterpret_cast<const uint8_t*>(w + row * nb) + first * kRowBytes + 16 * p
                                       : nullptr;
    piece_dst[k] = r * kRowBytes + 16 * p;
  }
  auto issue = [&](int64_t j) {
    if (j < count) {
      uint8_t* dst = ring + (j % kStages) * kStageBytes;
#pragma unroll
      for (int k = 0; k < kLanePieces; ++k)
        if (piece_src[k] != nullptr) copy_async_16(dst + piece_dst[k], piece_src[k] + j * kRowBytes);
    }
    async_commit();
  };

  // Column tile n holds columns 8n..8n+7: this lane's B fragment is column 8n + g's, its scales
  // those of columns 8n + 2t and 8n + 2t + 1.
  const BlockQ8_1 *xb[kColTiles], *xs0[kColTiles], *xs1[kColTiles];
#pragma unroll
  for (int n = 0; n < kColTiles; ++n) {
    const int cb = 8 * n + g, c0 = 8 * n + 2 * t, c1 = c0 + 1;
    xb[n] = x + (cb < cols ? cb : 0) * x_stride;
    xs0[n] = x + (c0 < cols ? c0 : 0) * x_stride;
    xs1[n] = x + (c1 < cols ? c1 : 0) * x_stride;
  }
  // No branches: an absent column reads column 0's blocks and a stage past the warp's range reads
  // blocks 0..7; neither result is ever used (absent columns' outputs are not written, and a stage
  // past the range is not multiplied).
  auto load_x = [&](XFrag (&f)[kColTiles], int64_t j) {
    const int64_t bb0 = j < count ? (first + j) * kSuper : 0;
#pragma unroll
    for (int n = 0; n < kColTiles; ++n)
#pragma unroll
      for (int u = 0; u < kSuper; ++u) {
        const int* q = reinterpret_cast<const int*>(xb[n][bb0 + u].qs);
        f[n].q[u][0] = q[t];
        f[n].q[u][1] = q[4 + t];
        f[n].d[u][0] = half_bits(xs0[n][bb0 + u].d);
        f[n].d[u][1] = half_bits(xs1[n][bb0 + u].d);
      }
  };

  // Where a stage's copies become visible, and where its slot may be filled again.
  auto stage_barrier = [] {
    if constexpr (kWarpSync) __syncwarp();
    else __syncthreads();
  };

  constexpr bool kAhead = kColTiles == 1;  // activation fragments one stage ahead
  float acc[kColTiles][kTiles][4] = {};
  for (int j = 0; j < kStages - 1; ++j) issue(j);
  XFrag cur[kColTiles], next[kAhead ? kColTiles : 1];
  if constexpr (kAhead) load_x(cur, 0);
  for (int64_t j = 0; j < per; ++j) {
    issue(j + kStages - 1);
    if constexpr (kAhead) load_x(next, j + 1);
    else load_x(cur, j);
    async_wait<kStages - 1>();
    stage_barrier();  // every lane's pieces of stage j have landed
    if (j < count) {
      const uint8_t* stage = ring + (j % kStages) * kStageBytes;
#pragma unroll
      for (int u = 0; u < kSuper; ++u)
#pragma unroll
        for (int m = 0; m < kTiles; ++m) {
          int wq[2];
          float dw[2];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            // Row 16m + 8h + g's block u: an f16 scale, then 16 bytes of quants; 2-byte aligned.
            const uint16_t* b16 =
                reinterpret_cast<const uint16_t*>(stage + (16 * m + 8 * h + g) * kRowBytes + u * sizeof(BlockQ4_0));
            dw[h] = half_bits(b16[0]);
            wq[h] = quants_at(reinterpret_cast<const uint8_t*>(b16 + 1), t);
          }
#pragma unroll
          for (int n = 0; n < kColTiles; ++n)
            add_block_mma(acc[n][m], wq[0], wq[1], dw[0], dw[1], cur[n].q[u], cur[n].d[u][0], cur[n].d[u][1]);
        }
    }
    if constexpr (kAhead) cur[0] = next[0];
    stage_barrier();  // stage j's slot is read by all its readers before it is filled again
  }

#pragma unroll
  for (int n = 0; n < kColTiles; ++n) {
    if (n > 0) __syncthreads();  // the sums' shared memory is read before the next tile's fill it
    store_warp_sums<kWarps, kTiles>(acc[n], row0, rows, cols - 8 * n, out + 8 * n * rows);
  }
}

// cols up to 8 * kColTiles; shapes the ring does not take go to v2, 8 columns at a time.
template <int kTiles, int kStages, bool kWarpSync, int kColTiles = 1>
cudaError_t launch(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                   int cols, cudaStream_t stream) {
  if (k % kBlock != 0 || cols < 1 || cols > 8 * kColTiles || rows < 1) return cudaErrorInvalidValue;
  const int64_t nb = k / kBlock;
  if (nb < kSuper || nb % kSuper != 0 || reinterpret_cast<uintptr_t>(w) % 16 != 0) {
    for (int c = 0; c < cols; c += 8) {
      const cudaError_t e = gemv_v2(w, x + c * x_stride, x_stride, out + c * rows, rows, k, cols - c < 8 ? cols - c : 8,
                                    stream);
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  }
  auto* kernel = gemv_staged<kTiles, kStages, kWarpSync, kColTiles>;
  constexpr int bytes = static_cast<int>(smem_bytes<kTiles, kStages>());
  static std::atomic<uint64_t> ready{0};
  const cudaError_t e = allow_dynamic_shared(kernel, bytes, ready);
  if (e != cudaSuccess) return e;
  const int64_t ctas = (rows + 16 * kTiles - 1) / (16 * kTiles);
  LAUNCH(kernel, static_cast<unsigned>(ctas), kWarps * 32, bytes, stream, w, x, x_stride, out, rows, nb, cols);
  return cudaGetLastError();
}

}  // namespace staged
}  // namespace gemv
