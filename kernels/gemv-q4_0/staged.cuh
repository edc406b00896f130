// The GEMV's cp.async ring (v3 to v5; v5-narrow in variants/shapes.cu): v2's arithmetic (one int8 mma.m16n8k32 per Q4_0 block of 16 rows x 8
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

template <int kTiles, int kStages, bool kWarpSync>
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

  const bool b_ok = g < cols, s0_ok = 2 * t < cols, s1_ok = 2 * t + 1 < cols;
  const BlockQ8_1* xb = x + (b_ok ? g : 0) * x_stride;
  const BlockQ8_1* xs0 = x + (s0_ok ? 2 * t : 0) * x_stride;
  const BlockQ8_1* xs1 = x + (s1_ok ? 2 * t + 1 : 0) * x_stride;
  // No branches: an absent column reads column 0's blocks and a stage past the warp's range reads
  // blocks 0..7; neither result is ever used (absent columns' outputs are not written, and a stage
  // past the range is not multiplied).
  auto load_x = [&](XFrag& f, int64_t j) {
    const int64_t bb0 = j < count ? (first + j) * kSuper : 0;
#pragma unroll
    for (int u = 0; u < kSuper; ++u) {
      const int* q = reinterpret_cast<const int*>(xb[bb0 + u].qs);
      f.q[u][0] = q[t];
      f.q[u][1] = q[4 + t];
      f.d[u][0] = half_bits(xs0[bb0 + u].d);
      f.d[u][1] = half_bits(xs1[bb0 + u].d);
    }
  };

  // Where a stage's copies become visible, and where its slot may be filled again.
  auto stage_barrier = [] {
    if constexpr (kWarpSync) __syncwarp();
    else __syncthreads();
  };

  float acc[kTiles][4] = {};
  for (int j = 0; j < kStages - 1; ++j) issue(j);
  XFrag cur, next;
  load_x(cur, 0);
  for (int64_t j = 0; j < per; ++j) {
    issue(j + kStages - 1);
    load_x(next, j + 1);
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
          add_block_mma(acc[m], wq[0], wq[1], dw[0], dw[1], cur.q[u], cur.d[u][0], cur.d[u][1]);
        }
    }
    cur = next;
    stage_barrier();  // stage j's slot is read by all its readers before it is filled again
  }

  store_warp_sums<kWarps, kTiles>(acc, row0, rows, cols, out);
}

template <int kTiles, int kStages, bool kWarpSync>
cudaError_t launch(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                   int cols, cudaStream_t stream) {
  if (k % kBlock != 0 || cols < 1 || cols > 8 || rows < 1) return cudaErrorInvalidValue;
  const int64_t nb = k / kBlock;
  if (nb < kSuper || nb % kSuper != 0 || reinterpret_cast<uintptr_t>(w) % 16 != 0)
    return gemv_v2(w, x, x_stride, out, rows, k, cols, stream);
  auto* kernel = gemv_staged<kTiles, kStages, kWarpSync>;
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
