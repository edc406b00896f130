// v6: v5 with persistent CTAs (one wave walking row tiles). At most 3% over v5 on the H200: 128.3 against 131.9 us.
// That is the 151936 x 4096 output head at 1 column; 14336 x 4096 took 19.7 against 20.3 us, the
// same at 8 columns (2026-11-30): refilling the ring per tile was not what held v5 back
// (program.md).
//
// v5 (32 rows a row tile, each warp streaming its share of k through its
// own 2-stage cp.async ring, warp-level stage barriers) with persistent CTAs. v5 launches a CTA
// per row tile, so each warp's stream is only nb / 64 stages long (2 at k = 4096, 7 at 14336)
// and its ring fills and drains once per tile. Here about one wave of CTAs is launched (SMs
// times CTAs an SM, asked of the runtime once per device), and each walks row tiles blockIdx.x,
// + gridDim.x, ... back to back: a warp issues the first stage of the next tile while it
// multiplies the last one of this tile, so its ring fills once per CTA. It does not remove wave
// quantisation: a CTA walks the floor or the ceiling of tiles / CTAs whole tiles.
//
// Work items are whole row tiles, so no sums cross CTAs: the CTA meets once per tile to add up
// its warps' sums, as v5 does once per CTA, into one of two shared buffers by tile parity (a
// buffer is written again only after the next tile's barrier, which every reader of it passed).
// The arithmetic and its order are v5's: the results are bit-identical.
//
// Shapes with fewer row tiles than a wave launch a CTA per tile and run as v5 (4096 rows: 128
// tiles, where the H200 holds 264 CTAs at two an SM). Like v5 it needs k a positive multiple of
// 256 and 16-byte aligned W, and k at most 2^26 (a tile's byte offsets are ints); other shapes go
// to v2.
#include <cuda_fp16.h>

#include "../kernel.cuh"
#include "../q4_device.cuh"
#include "device.cuh"
#include "variants.h"

namespace gemv {
namespace persistent {  // named: kernel_emu.cc compiles every variant in one unit

// As in staged.cuh: 8 warps over k, a stage of 8 blocks (144 bytes) of each of a tile's rows.
constexpr int kWarps = 8;
constexpr int kSuper = 8;
constexpr int kRowBytes = kSuper * sizeof(BlockQ4_0);
constexpr int kPieces = kRowBytes / 16;

struct XFrag {
  int q[kSuper][2];
  float d[kSuper][2];
};

template <int kTiles, int kStages>
constexpr size_t smem_bytes() {
  return size_t{kWarps} * kStages * 16 * kTiles * kRowBytes;
}

// 128 registers: two CTAs an SM, as v5.
template <int kTiles, int kStages>
__global__ void __launch_bounds__(kWarps * 32) gemv_persistent(const BlockQ4_0* __restrict__ w,
                                                               const BlockQ8_1* __restrict__ x, int64_t x_stride,
                                                               float* __restrict__ out, int64_t rows, int64_t nb,
                                                               int cols) {
  constexpr int kRows = 16 * kTiles;
  constexpr int kStageBytes = kRows * kRowBytes;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  // The launch has no more CTAs than tiles: every CTA has at least one.
  const int64_t tiles = (rows + kRows - 1) / kRows;
  const int64_t my_tiles = (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x;

  DYNAMIC_SHARED(uint4, smem);
  uint8_t* ring = reinterpret_cast<uint8_t*>(smem) + static_cast<size_t>(warp) * kStages * kStageBytes;
  __shared__ float partial[2][kWarps][kRows][8];

  // The warp's super-blocks of every tile, as v5: the same stage count `per` for every warp, so
  // that all of them reach the per-tile barrier together.
  const int supers = static_cast<int>(nb / kSuper);
  const int per = (supers + kWarps - 1) / kWarps;
  const int first = warp * per;
  const int count = first >= supers ? 0 : (supers - first < per ? supers - first : per);
  const int row_bytes = static_cast<int>(nb) * static_cast<int>(sizeof(BlockQ4_0));

  // A lane's pieces of a stage: piece k lands at 16 * (lane + 32k) in it (a stage is its rows'
  // 144 bytes back to back) and comes from tile_src + piece_off[k] + the stage's kRowBytes;
  // both are worked out again once per tile. Byte offsets within a tile fit an int, which keeps
  // the ring's addresses in fewer registers than v5's 64-bit pointer per piece.
  constexpr int kLanePieces = (kRows * kPieces + 31) / 32;
  const uint8_t* tile_src;
  int piece_off[kLanePieces];
  auto aim = [&](int64_t tile) {
    const int64_t row0 = tile * kRows;
    tile_src = reinterpret_cast<const uint8_t*>(w) + row0 * row_bytes + static_cast<int64_t>(first) * kRowBytes;
    const int last = rows - row0 < kRows ? static_cast<int>(rows - row0) - 1 : kRows - 1;  // past it: unused
#pragma unroll
    for (int k = 0; k < kLanePieces; ++k) {
      const int i = lane + 32 * k;
      const int r = i / kPieces < last ? i / kPieces : last;
      piece_off[k] = r * row_bytes + 16 * (i % kPieces);
    }
  };
  aim(blockIdx.x);

  // The copies run kStages - 1 stages ahead of the multiplies, across tile boundaries: issue_*
  // is where they are (the CTA's tile, the stage in it, the ring slot).
  int64_t issue_tile = 0;
  int issue_j = 0, issue_slot = 0;
  auto issue = [&] {
    if (issue_tile < my_tiles && issue_j < count) {
      uint8_t* dst = ring + issue_slot * kStageBytes + 16 * lane;
      const uint8_t* src = tile_src + issue_j * kRowBytes;
#pragma unroll
      for (int k = 0; k < kLanePieces; ++k)
        if (kRows * kPieces % 32 == 0 || lane + 32 * k < kRows * kPieces)
          copy_async_16(dst + 512 * k, src + piece_off[k]);
    }
    async_commit();
    issue_slot = issue_slot + 1 == kStages ? 0 : issue_slot + 1;
    if (++issue_j == per) {
      issue_j = 0;
      if (++issue_tile < my_tiles) aim(blockIdx.x + issue_tile * gridDim.x);
    }
  };

  const bool b_ok = g < cols, s0_ok = 2 * t < cols, s1_ok = 2 * t + 1 < cols;
  const BlockQ8_1* xb = x + (b_ok ? g : 0) * x_stride;
  const BlockQ8_1* xs0 = x + (s0_ok ? 2 * t : 0) * x_stride;
  const BlockQ8_1* xs1 = x + (s1_ok ? 2 * t + 1 : 0) * x_stride;
  // Branch-free as in v5: absent columns read column 0, a stage past the warp's range blocks 0..7;
  // neither is used. The activations depend on the stage only, not on the tile.
  auto load_x = [&](XFrag& f, int j) {
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

  for (int j = 0; j < kStages - 1; ++j) issue();
  XFrag cur, next;
  load_x(cur, 0);
  int slot = 0;
  for (int64_t i = 0; i < my_tiles; ++i) {
    float acc[kTiles][4] = {};
    for (int j = 0; j < per; ++j) {
      issue();
      load_x(next, j + 1 < per ? j + 1 : 0);  // the next tile starts at the same k
      async_wait<kStages - 1>();
      __syncwarp();  // every lane's pieces of this stage have landed
      if (j < count) {
        const uint8_t* stage = ring + slot * kStageBytes;
#pragma unroll
        for (int u = 0; u < kSuper; ++u)
#pragma unroll
          for (int m = 0; m < kTiles; ++m) {
            int wq[2];
            float dw[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              // Row 16m + 8h + g's block u: an f16 scale, then 16 bytes of quants; 2-byte aligned.
              const uint16_t* b16 = reinterpret_cast<const uint16_t*>(stage + (16 * m + 8 * h + g) * kRowBytes +
                                                                      u * sizeof(BlockQ4_0));
              dw[h] = half_bits(b16[0]);
              wq[h] = quants_at(reinterpret_cast<const uint8_t*>(b16 + 1), t);
            }
            add_block_mma(acc[m], wq[0], wq[1], dw[0], dw[1], cur.q[u], cur.d[u][0], cur.d[u][1]);
          }
      }
      cur = next;
      slot = slot + 1 == kStages ? 0 : slot + 1;
      __syncwarp();  // this stage's slot is read by all its readers before it is filled again
    }

    // The warps' sums of this tile, added up in v5's order (store_warp_sums).
    float(&sums)[kWarps][kRows][8] = partial[i & 1];
#pragma unroll
    for (int m = 0; m < kTiles; ++m) {
      sums[warp][16 * m + g][2 * t] = acc[m][0];
      sums[warp][16 * m + g][2 * t + 1] = acc[m][1];
      sums[warp][16 * m + g + 8][2 * t] = acc[m][2];
      sums[warp][16 * m + g + 8][2 * t + 1] = acc[m][3];
    }
    __syncthreads();
    const int64_t row0 = (blockIdx.x + i * gridDim.x) * kRows;
    for (int e = threadIdx.x; e < kRows * 8; e += kWarps * 32) {
      const int r = e / 8, c = e % 8;
      float sum = 0;
#pragma unroll
      for (int v = 0; v < kWarps; ++v) sum += sums[v][r][c];
      if (row0 + r < rows && c < cols) out[c * rows + row0 + r] = sum;
    }
  }
}

// CTAs resident at once on the current device for `kernel`: SMs times CTAs an SM at its threads
// and shared memory, asked once per device (the queries cost host time, and launches of a short
// kernel come back to back).
template <typename Kernel>
cudaError_t one_wave(Kernel* kernel, int threads, int bytes, std::atomic<int> (&cache)[64], int& ctas) {
#ifdef CUDA_EMU
  (void)kernel, (void)threads, (void)bytes, (void)cache;
  ctas = 3;  // the emulator has no SMs: a few CTAs, each of them walking several tiles
  return cudaSuccess;
#else
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  if (device < 64 && (ctas = cache[device].load(std::memory_order_relaxed)) > 0) return cudaSuccess;
  int sms = 0, per_sm = 0;
  e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, bytes);
  if (e != cudaSuccess) return e;
  ctas = sms * (per_sm > 0 ? per_sm : 1);
  if (device < 64) cache[device].store(ctas, std::memory_order_relaxed);
  return cudaSuccess;
#endif
}

template <int kTiles, int kStages>
cudaError_t launch(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                   int cols, cudaStream_t stream) {
  if (k % kBlock != 0 || cols < 1 || cols > 8 || rows < 1) return cudaErrorInvalidValue;
  const int64_t nb = k / kBlock;
  if (nb < kSuper || nb % kSuper != 0 || nb > (1 << 21) || reinterpret_cast<uintptr_t>(w) % 16 != 0)
    return gemv_v2(w, x, x_stride, out, rows, k, cols, stream);
  auto* kernel = gemv_persistent<kTiles, kStages>;
  constexpr int bytes = static_cast<int>(smem_bytes<kTiles, kStages>());
  static std::atomic<uint64_t> ready{0};
  cudaError_t e = allow_dynamic_shared(kernel, bytes, ready);  // first: the occupancy query sees the opt-in
  if (e != cudaSuccess) return e;
  static std::atomic<int> waves[64];
  int wave = 0;
  e = one_wave(kernel, kWarps * 32, bytes, waves, wave);
  if (e != cudaSuccess) return e;
  const int64_t tiles = (rows + 16 * kTiles - 1) / (16 * kTiles);
  const int64_t ctas = tiles < wave ? tiles : wave;
  LAUNCH(kernel, static_cast<unsigned>(ctas), kWarps * 32, bytes, stream, w, x, x_stride, out, rows, nb, cols);
  return cudaGetLastError();
}

}  // namespace persistent

cudaError_t gemv_v6(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                    int cols, cudaStream_t stream) {
  return persistent::launch<2, 2>(w, x, x_stride, out, rows, k, cols, stream);
}

}  // namespace gemv
