// v7, v7-r16, v7-r32, v7-w2: one column, a row a lane, dp4a on whole octets taken out of shared
// memory 16 bytes at a time; v7-direct and v7-r32-direct load them straight from global memory.
//
// H100, 2026-12-07, cold L2, one column (docs/results.md, "gemv-q4_0 v7"): on the output head
// 151936 x 4096 v7 takes 120 us, 1.06x the read floor (113 us) and 96% of the copy bandwidth,
// against v5's 136 (the engine's `auto` choice there) and MMVQ's 159 (with its quantization); on
// 14336 x 4096 16.4-16.8 us against MMVQ's 18.3 and a floor of 13.4; on 4096 x 14336 17.2-18.6
// against MMVQ's 17.1 and a floor of 13.5. Without the ring
// (v7-direct, v7-r32-direct) it is 7-43% slower; 8 warps a CTA lost everywhere (up to 2x on the
// head), 2 warps (v7-w2) won on the longest rows (5120 x 17408: 24.0 against 25.7 us).
//
// At one column (a decode step's every product) the engine's MMVQ reads W at about half the copy
// bandwidth: 17.0 us on 4096 x 14336 against a read floor of 10.5 us (H200, 2026-11-30). The
// tensor-core variants are no faster there (v5-narrow 17.1 us): seven of an mma's eight columns
// are empty, and their fragments come out of shared memory two bytes at a time. This variant asks
// whether the memory side can come near the floor when the arithmetic is plain dp4a and every load
// is 16 bytes wide.
//
// The unit is an octet: 8 Q4_0 blocks, 144 bytes, exactly nine 16-byte lines, so a row of k
// values is k / 256 octets and every octet starts 16-byte aligned. Each warp holds kR rows; lane
// (r, g) = (lane % kR, lane / kR) sums row r over the g-th octet of each group of 32 / kR
// consecutive octets (a stage). Stages come through a per-warp cp.async ring (as in v4: the warp
// fills and reads its own ring), copied as the rows' contiguous 16-byte lines; each lane then
// reads its octet with nine 16-byte shared loads, conflict-free (rows kRowStride bytes apart), and
// takes the blocks apart in registers: an odd block's quants are word-aligned, an even block's
// start two bytes into a word and are realigned with byte_perm. The octet's activations (8 Q8_1
// blocks, 288 contiguous bytes, 16-byte aligned) are read straight from global memory, 16 bytes
// at a time; every lane of a group reads the same ones. The sum per block is v1's: exact integers
// from dp4a, then one multiply-add with the two scales.
//
// A CTA's warps split k for the same kR rows. Each lane adds its octets in k order, a row's lanes
// meet in shuffles and the warps in shared memory, always in the same order: the result does not
// depend on scheduling. Shapes whose rows are not whole groups of octets, or W not 16-byte
// aligned, go to v1.
#include <cuda_fp16.h>

#include <atomic>
#include <cstdint>

#include "../kernel.cuh"
#include "../q4_device.cuh"
#include "device.cuh"
#include "variants.h"

namespace gemv {
namespace row_lanes {  // named: kernel_emu.cc compiles every variant in one unit

constexpr int kOctetBytes = 8 * sizeof(BlockQ4_0);  // 144
constexpr int kLines = kOctetBytes / 16;            // 9

template <int kR>
struct Geometry {
  static constexpr int kGroups = 32 / kR;  // octets of a row in one stage
  // 16 bytes of padding between rows when a row holds several octets: eight lanes reading 16
  // bytes each (rows 0-7 of one group) then meet 32 different banks.
  static constexpr int kRowStride = kGroups * kOctetBytes + (kGroups > 1 ? 16 : 0);
  static constexpr int kStageBytes = kR * kRowStride;
  static constexpr int kLanePieces = kR * kGroups * kLines / 32;  // 9: 16-byte copies a lane per stage
};

template <int kR, int kWarps, int kStages>
constexpr size_t smem_bytes() {
  return size_t{kWarps} * kStages * Geometry<kR>::kStageBytes;
}

__device__ __forceinline__ uint16_t low_half(uint32_t v) { return static_cast<uint16_t>(v & 0xffffu); }
__device__ __forceinline__ uint16_t high_half(uint32_t v) { return static_cast<uint16_t>(v >> 16); }

// Four blocks (4h..4h+3) of one octet against their activations: wd the octet's 36 words, xw the
// 36 words of activation blocks 4h..4h+3 (block j at word 9j: its f16 scale in the low half, its
// quants from word 9j + 1).
template <int h>
__device__ __forceinline__ void add_half_octet(float& acc, const uint32_t (&wd)[36], const uint32_t (&xw)[36]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int u = 4 * h + j;  // the block within the octet, at byte 18u
    float dw;
    int q[4];
    if (u % 2 == 1) {  // byte 18u is 2 bytes into word (9u - 1) / 2: scale in its high half, quants aligned
      dw = half_bits(high_half(wd[(9 * u - 1) / 2]));
#pragma unroll
      for (int i = 0; i < 4; ++i) q[i] = static_cast<int>(wd[(9 * u + 1) / 2 + i]);
    } else {  // byte 18u starts word 9u / 2: scale in its low half, quants 2 bytes into it
      dw = half_bits(low_half(wd[9 * u / 2]));
#pragma unroll
      for (int i = 0; i < 4; ++i) q[i] = static_cast<int>(__byte_perm(wd[9 * u / 2 + i], wd[9 * u / 2 + i + 1], 0x5432));
    }
    const int xb = 9 * j;
    int sumi = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      sumi = __dp4a(low_minus_8(q[i]), static_cast<int>(xw[xb + 1 + i]), sumi);
      sumi = __dp4a(high_minus_8(q[i]), static_cast<int>(xw[xb + 5 + i]), sumi);
    }
    acc += dw * half_bits(low_half(xw[xb])) * static_cast<float>(sumi);
  }
}

// Nine 16-byte lines (global, shared or registers) as 36 words: an octet of weights, or half an
// octet's activations (blocks 4h..4h+3 are its bytes 144h..144h+143).
__device__ __forceinline__ void words_of(uint32_t (&wd)[36], const uint4* lines) {
#pragma unroll
  for (int l = 0; l < kLines; ++l) {
    const uint4 v = lines[l];
    wd[4 * l] = v.x, wd[4 * l + 1] = v.y, wd[4 * l + 2] = v.z, wd[4 * l + 3] = v.w;
  }
}

// A CTA's warps split a row's stages into contiguous ranges: this warp's first and how many.
template <int kWarps>
struct WarpStages {
  int64_t first, count;
  __device__ WarpStages(int64_t stages, int warp) {
    const int64_t per = (stages + kWarps - 1) / kWarps;
    first = warp * per;
    count = first >= stages ? 0 : (stages - first < per ? stages - first : per);
  }
};

// Ends a CTA: row r's groups meet in shuffles, then the warps in shared memory, in a fixed order,
// and the CTA's kR rows are written.
template <int kR, int kWarps>
__device__ __forceinline__ void store_rows(float acc, int64_t row0, int64_t rows, float* out) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int off = kR; off < 32; off <<= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  __shared__ float partial[kWarps][kR];
  if (lane < kR) partial[warp][lane] = acc;
  __syncthreads();
  if (threadIdx.x < kR && row0 + threadIdx.x < rows) {
    float sum = 0.0f;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) sum += partial[v][threadIdx.x];
    out[row0 + threadIdx.x] = sum;
  }
}

template <int kR, int kWarps, int kStages>
__global__ void __launch_bounds__(kWarps * 32) gemv_row_lanes(const BlockQ4_0* __restrict__ w,
                                                              const BlockQ8_1* __restrict__ x,
                                                              float* __restrict__ out, int64_t rows, int64_t nb) {
  using G = Geometry<kR>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int r = lane % kR, g = lane / kR;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kR;

  DYNAMIC_SHARED(uint4, smem);
  uint8_t* ring = reinterpret_cast<uint8_t*>(smem) + static_cast<size_t>(warp) * kStages * G::kStageBytes;

  // The warp's stages: a contiguous range of the row's k / (256 * kGroups) stages.
  const WarpStages<kWarps> range(nb / (8 * G::kGroups), warp);
  const int64_t first = range.first, count = range.count;
  constexpr int64_t kStageSrcBytes = int64_t{G::kGroups} * kOctetBytes;  // a stage's bytes of one row

  // This lane's copies: piece i of a stage is line i % (9 kGroups) of row i / (9 kGroups), at a
  // 32-bit offset from the warp's first stage of row row0 (rows past the end read the last row,
  // unused).
  const uint8_t* src0 = reinterpret_cast<const uint8_t*>(w + row0 * nb) + first * kStageSrcBytes;
  const int64_t row_bytes = nb * static_cast<int64_t>(sizeof(BlockQ4_0));
  int piece_src[G::kLanePieces], piece_dst[G::kLanePieces];
#pragma unroll
  for (int k = 0; k < G::kLanePieces; ++k) {
    const int i = lane + 32 * k;
    const int pr = i / (kLines * G::kGroups), p = i % (kLines * G::kGroups);
    const int64_t row = row0 + pr < rows ? pr : rows - 1 - row0;
    piece_src[k] = static_cast<int>(row * row_bytes) + 16 * p;
    piece_dst[k] = pr * G::kRowStride + 16 * p;
  }
  auto issue = [&](int64_t j) {
    if (j < count) {
      uint8_t* dst = ring + (j % kStages) * G::kStageBytes;
      const uint8_t* src = src0 + j * kStageSrcBytes;
#pragma unroll
      for (int k = 0; k < G::kLanePieces; ++k) copy_async_16(dst + piece_dst[k], src + piece_src[k]);
    }
    async_commit();
  };

  float acc = 0.0f;
  for (int j = 0; j < kStages - 1; ++j) issue(j);
  for (int64_t j = 0; j < count; ++j) {
    issue(j + kStages - 1);
    // The octet's activations do not wait for the copies: they are asked for first.
    const uint4* xv = reinterpret_cast<const uint4*>(x + 8 * ((first + j) * G::kGroups + g));
    uint32_t xw[36];
    words_of(xw, xv);
    async_wait<kStages - 1>();
    __syncwarp();  // every lane's pieces of stage j have landed
    uint32_t wd[36];
    words_of(wd, reinterpret_cast<const uint4*>(ring + (j % kStages) * G::kStageBytes + r * G::kRowStride +
                                                g * kOctetBytes));
    __syncwarp();  // stage j's slot is read before the next iteration fills it again
    add_half_octet<0>(acc, wd, xw);
    words_of(xw, xv + kLines);
    add_half_octet<1>(acc, wd, xw);
  }
  async_wait<0>();  // no copy outlives the kernel (a past-the-range stage issues none)

  store_rows<kR, kWarps>(acc, row0, rows, out);
}

// v7-direct: the same lanes, sums and CTA shape, each lane loading its octet straight from global
// memory (nine 16-byte loads, the next stage's issued before the current one is summed) instead of
// through a ring. A warp's load then touches 32 rows at once, which the ring's copies avoid: this
// variant measures what that costs.
template <int kR, int kWarps>
__global__ void __launch_bounds__(kWarps * 32) gemv_row_lanes_direct(const BlockQ4_0* __restrict__ w,
                                                                     const BlockQ8_1* __restrict__ x,
                                                                     float* __restrict__ out, int64_t rows,
                                                                     int64_t nb) {
  using G = Geometry<kR>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int r = lane % kR, g = lane / kR;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kR;
  const WarpStages<kWarps> range(nb / (8 * G::kGroups), warp);
  const int64_t first = range.first, count = range.count;
  const int64_t row = row0 + r < rows ? row0 + r : rows - 1;  // past the end: any real row, unused
  const uint4* src = reinterpret_cast<const uint4*>(reinterpret_cast<const uint8_t*>(w + row * nb) +
                                                    (first * G::kGroups + g) * kOctetBytes);
  constexpr int64_t kStageLines = int64_t{G::kGroups} * kLines;  // a stage moves a lane on by this

  float acc = 0.0f;
  uint4 cur[kLines], next[kLines];
  if (count > 0) {
#pragma unroll
    for (int l = 0; l < kLines; ++l) cur[l] = src[l];
  }
  for (int64_t j = 0; j < count; ++j) {
    if (j + 1 < count) {
#pragma unroll
      for (int l = 0; l < kLines; ++l) next[l] = src[(j + 1) * kStageLines + l];
    }
    const uint4* xv = reinterpret_cast<const uint4*>(x + 8 * ((first + j) * G::kGroups + g));
    uint32_t wd[36], xw[36];
    words_of(wd, cur);
    words_of(xw, xv);
    add_half_octet<0>(acc, wd, xw);
    words_of(xw, xv + kLines);
    add_half_octet<1>(acc, wd, xw);
#pragma unroll
    for (int l = 0; l < kLines; ++l) cur[l] = next[l];
  }
  store_rows<kR, kWarps>(acc, row0, rows, out);
}

template <int kR, int kWarps, int kStages>
cudaError_t launch_with(const BlockQ4_0* w, const BlockQ8_1* x, float* out, int64_t rows, int64_t nb,
                        cudaStream_t stream) {
  auto* kernel = gemv_row_lanes<kR, kWarps, kStages>;
  constexpr int bytes = static_cast<int>(smem_bytes<kR, kWarps, kStages>());
  static std::atomic<uint64_t> ready{0};
  const cudaError_t e = allow_dynamic_shared(kernel, bytes, ready);
  if (e != cudaSuccess) return e;
  LAUNCH(kernel, static_cast<unsigned>((rows + kR - 1) / kR), kWarps * 32, bytes, stream, w, x, out, rows, nb);
  return cudaGetLastError();
}

template <int kR, int kWarps>
cudaError_t launch_direct_with(const BlockQ4_0* w, const BlockQ8_1* x, float* out, int64_t rows, int64_t nb,
                               cudaStream_t stream) {
  auto* kernel = gemv_row_lanes_direct<kR, kWarps>;
  LAUNCH(kernel, static_cast<unsigned>((rows + kR - 1) / kR), kWarps * 32, 0, stream, w, x, out, rows, nb);
  return cudaGetLastError();
}

// 8 warps a CTA get a 2-stage ring (two CTAs an SM), fewer a 3-stage one.
template <int kR, bool kDirect, int kWarps>
cudaError_t launch_shape(const BlockQ4_0* w, const BlockQ8_1* x, float* out, int64_t rows, int64_t nb,
                         cudaStream_t stream) {
  if constexpr (kDirect) return launch_direct_with<kR, kWarps>(w, x, out, rows, nb, stream);
  else return launch_with<kR, kWarps, kWarps == 8 ? 2 : 3>(w, x, out, rows, nb, stream);
}

// As many warps a CTA as give each about two stages or more: k = 4096 rows (4 stages of 8 rows)
// take 2, k = 14336 (14 stages) 4, longer rows 8 with a shallower ring so that two CTAs fit an SM;
// kWarpsFixed, where set, at every row length (v7-w2).
template <int kR, bool kDirect = false, int kWarpsFixed = 0>
cudaError_t launch(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                   int cols, cudaStream_t stream) {
  if (k % kBlock != 0 || cols != 1 || rows < 1) return cudaErrorInvalidValue;
  const int64_t nb = k / kBlock;
  constexpr int kGroupBlocks = 8 * Geometry<kR>::kGroups;
  if (nb % kGroupBlocks != 0 || nb * static_cast<int64_t>(sizeof(BlockQ4_0)) * kR > INT32_MAX ||
      reinterpret_cast<uintptr_t>(w) % 16 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0)
    return gemv_v1(w, x, x_stride, out, rows, k, cols, stream);
  const int64_t stages = nb / kGroupBlocks;
  const int warps = kWarpsFixed != 0 ? kWarpsFixed : stages >= 24 ? 8 : stages >= 8 ? 4 : 2;
  if (warps == 8) return launch_shape<kR, kDirect, 8>(w, x, out, rows, nb, stream);
  if (warps == 4) return launch_shape<kR, kDirect, 4>(w, x, out, rows, nb, stream);
  return launch_shape<kR, kDirect, 2>(w, x, out, rows, nb, stream);
}

}  // namespace row_lanes

std::vector<Variant> row_lanes_variants() {
  return {
      {"v7", "one column, a row a lane (8 rows a warp, 4 octets a stage), dp4a on 16-byte shared loads",
       row_lanes::launch<8>, 1},
      {"v7-r16", "v7 with 16 rows a warp, 2 octets a stage", row_lanes::launch<16>, 1},
      {"v7-r32", "v7 with 32 rows a warp, 1 octet a stage", row_lanes::launch<32>, 1},
      {"v7-w2", "v7 with 2 warps a CTA at every row length", row_lanes::launch<8, false, 2>, 1},
      {"v7-direct", "v7 loading its octets straight from global memory, no ring", row_lanes::launch<8, true>, 1},
      {"v7-r32-direct", "v7-r32 loading its octets straight from global memory, no ring", row_lanes::launch<32, true>,
       1},
  };
}

}  // namespace gemv
