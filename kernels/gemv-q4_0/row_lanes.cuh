// v7: Q4_0 weights times one Q8_1 column, a row a lane, dp4a on whole octets taken out of shared
// memory 16 bytes at a time; the one-column product the engine's ONEBIT_GEMV_ONE_COL gives it
// (docs/results.md, "gemv-q4_0 v7"), with the epilogues of the engine's one-column fusions.
//
// The unit is an octet: 8 Q4_0 blocks, 144 bytes, exactly nine 16-byte lines, so a row of k
// values is k / 256 octets and every octet starts 16-byte aligned. Each warp holds kR rows; lane
// (r, g) = (lane % kR, lane / kR) sums row r over the g-th octet of each group of 32 / kR
// consecutive octets (a stage). Stages come through a per-warp cp.async ring (the warp fills and
// reads its own ring), copied as the rows' contiguous 16-byte lines; each lane then reads its
// octet with nine 16-byte shared loads, conflict-free (rows kRowStride bytes apart), and takes the
// blocks apart in registers: an odd block's quants are word-aligned, an even block's start two
// bytes into a word and are realigned with byte_perm. The octet's activations (8 Q8_1 blocks, 288
// contiguous bytes, 16-byte aligned) are read straight from global memory, 16 bytes at a time;
// every lane of a group reads the same ones. The sum per block is exact integers from dp4a, then
// one multiply-add with the two scales.
//
// A CTA's warps split k for the same kR rows. Each lane adds its octets in k order, a row's lanes
// meet in shuffles and the warps in shared memory, always in the same order: the result does not
// depend on scheduling.
//
// The epilogue (Epi) turns a row's sum into what is stored. A gated one (Epi::kGated: gate and up
// with their GLU) reads a second matrix of the same shape against the same column: a warp's ring
// then holds kR / 2 rows of each, and the CTA stores kR / 2 rows, epi(row, sum, gate_sum); every
// row's two sums are bit for bit the plain kernel's.
//
// The weights never depend on the kernels before this one, so a CTA asks for them before it waits
// for those (programmatic dependent launch, LAUNCH_EARLY): the first stages of its ring and, with
// kL2, the rest of its rows from L2. It lets the next kernel launch right after its wait; every
// kernel still waits for the whole of the one before it before it reads what that one wrote.
#pragma once

#include <cuda_fp16.h>

#include <atomic>
#include <cstdint>

#include "blocks.h"
#include "device.cuh"
#include "q4_device.cuh"

namespace gemv {
namespace row_lanes {

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
  static constexpr int kGroupBlocks = 8 * kGroups;                // Q4_0 blocks of a row in a stage
};

template <int kR, int kWarps, int kStages>
constexpr size_t smem_bytes() {
  return size_t{kWarps} * kStages * Geometry<kR>::kStageBytes;
}

// The plain product: the row's sum.
struct Plain {
  static constexpr bool kGated = false;
  __device__ float operator()(int64_t, float sum, float) const { return sum; }
};

#ifdef CUDA_EMU
inline void prefetch_l2(const void*) {}
#else
__device__ __forceinline__ void prefetch_l2(const void* p) {
  ONEBIT_SM80_ONLY(asm volatile("prefetch.global.L2 [%0];" ::"l"(p)));
}
#endif

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

// Ends a CTA: ring row r's groups meet in shuffles, then the warps in shared memory, in a fixed
// order, and the CTA's rows are written through the epilogue (a gated one pairs ring rows r and
// r + kR / 2).
template <int kR, int kWarps, class Epi>
__device__ __forceinline__ void store_rows(float acc, int64_t row0, int64_t rows, float* out, const Epi& epi) {
  constexpr int kOut = Epi::kGated ? kR / 2 : kR;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int off = kR; off < 32; off <<= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  __shared__ float partial[kWarps][kR];
  if (lane < kR) partial[warp][lane] = acc;
  __syncthreads();
  if (threadIdx.x < kOut && row0 + threadIdx.x < rows) {
    float sum = 0.0f, gate_sum = 0.0f;
#pragma unroll
    for (int v = 0; v < kWarps; ++v) sum += partial[v][threadIdx.x];
    if constexpr (Epi::kGated) {
#pragma unroll
      for (int v = 0; v < kWarps; ++v) gate_sum += partial[v][threadIdx.x + kOut];
    }
    out[row0 + threadIdx.x] = epi(row0 + threadIdx.x, sum, gate_sum);
  }
}

// x and out are not __restrict__: read-only loads of x could otherwise be placed before the wait
// for the kernel that writes it.
template <int kR, int kWarps, int kStages, class Epi, bool kL2>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_row_lanes(const BlockQ4_0* __restrict__ w, const BlockQ4_0* __restrict__ gate, const BlockQ8_1* x, float* out,
                   int64_t rows, int64_t nb, Epi epi) {
  using G = Geometry<kR>;
  constexpr int kOut = Epi::kGated ? kR / 2 : kR;  // rows of W (and of gate) a CTA stores
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int r = lane % kR, g = lane / kR;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kOut;

  DYNAMIC_SHARED(uint4, smem);
  uint8_t* ring = reinterpret_cast<uint8_t*>(smem) + static_cast<size_t>(warp) * kStages * G::kStageBytes;

  // The warp's stages: a contiguous range of the row's k / (256 * kGroups) stages.
  const WarpStages<kWarps> range(nb / G::kGroupBlocks, warp);
  const int64_t first = range.first, count = range.count;
  constexpr int64_t kStageSrcBytes = int64_t{G::kGroups} * kOctetBytes;  // a stage's bytes of one row

  // Ring row pr holds row row0 + pr % kOut of W, or of gate for pr >= kOut when gated (rows past
  // the end read the last row, unused). This lane's copies: piece i of a stage is line
  // i % (9 kGroups) of ring row i / (9 kGroups), at a 32-bit offset from the warp's first stage
  // of row row0 in its matrix.
  const int64_t row_bytes = nb * static_cast<int64_t>(sizeof(BlockQ4_0));
  const uint8_t* base_w = reinterpret_cast<const uint8_t*>(w + row0 * nb) + first * kStageSrcBytes;
  const uint8_t* base_g =
      Epi::kGated ? reinterpret_cast<const uint8_t*>(gate + row0 * nb) + first * kStageSrcBytes : base_w;
  auto source_row = [&](int pr) -> int64_t {
    const int64_t row = pr % kOut;
    return row0 + row < rows ? row : rows - 1 - row0;
  };
  int piece_src[G::kLanePieces], piece_dst[G::kLanePieces];
  unsigned from_gate = 0;  // bit k: piece k is gate's
#pragma unroll
  for (int k = 0; k < G::kLanePieces; ++k) {
    const int i = lane + 32 * k;
    const int pr = i / (kLines * G::kGroups), p = i % (kLines * G::kGroups);
    piece_src[k] = static_cast<int>(source_row(pr) * row_bytes) + 16 * p;
    piece_dst[k] = pr * G::kRowStride + 16 * p;
    if (Epi::kGated && pr >= kOut) from_gate |= 1u << k;
  }
  auto issue = [&](int64_t j) {
    if (j < count) {
      uint8_t* dst = ring + (j % kStages) * G::kStageBytes;
#pragma unroll
      for (int k = 0; k < G::kLanePieces; ++k)
        copy_async_16(dst + piece_dst[k], ((from_gate >> k) & 1 ? base_g : base_w) + j * kStageSrcBytes + piece_src[k]);
    }
    async_commit();
  };

  if constexpr (kL2) {
    // The warp's rows past the ring's first stages, asked of L2 in 128-byte lines.
    for (int pr = 0; pr < kR; ++pr) {
      const uintptr_t row = reinterpret_cast<uintptr_t>(pr >= kOut ? base_g : base_w) + source_row(pr) * row_bytes;
      const uintptr_t begin = (row + (kStages - 1) * kStageSrcBytes) >> 7, end = (row + count * kStageSrcBytes) >> 7;
      for (uintptr_t line = begin + lane; line < end; line += 32) prefetch_l2(reinterpret_cast<const void*>(line << 7));
    }
  }
  for (int j = 0; j < kStages - 1; ++j) issue(j);
  wait_for_primary();  // x is the kernel before's output
  launch_dependents();

  float acc = 0.0f;
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

  store_rows<kR, kWarps>(acc, row0, rows, out, epi);
}

// Whether v7 with kR rows a warp takes a product: k whole stages of octets, W (and gate) and x
// 16-byte aligned, a warp's rows addressable in 32 bits.
template <int kR>
inline bool takes(const void* w, const void* gate, const void* x, int64_t rows, int64_t k) {
  if (rows < 1 || k < 1 || k % kBlock != 0) return false;
  const int64_t nb = k / kBlock;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return nb % Geometry<kR>::kGroupBlocks == 0 && nb * static_cast<int64_t>(sizeof(BlockQ4_0)) * kR <= INT32_MAX &&
         aligned(w) && aligned(x) && (gate == nullptr || aligned(gate));
}

// As many warps a CTA as give each about two stages or more: k = 4096 rows (4 stages of 8 rows)
// take 2, k = 14336 (14 stages) 4, longer rows 8 (with a shallower ring, so that two CTAs fit an SM).
inline int warps_for(int64_t stages) { return stages >= 24 ? 8 : stages >= 8 ? 4 : 2; }

template <int kR, int kWarps, int kStages, class Epi, bool kL2>
cudaError_t launch_with(const BlockQ4_0* w, const BlockQ4_0* gate, const BlockQ8_1* x, float* out, int64_t rows,
                        int64_t nb, const Epi& epi, bool early, cudaStream_t stream) {
  auto* kernel = gemv_row_lanes<kR, kWarps, kStages, Epi, kL2>;
  constexpr int bytes = static_cast<int>(smem_bytes<kR, kWarps, kStages>());
  static std::atomic<uint64_t> ready{0};
  const cudaError_t e = allow_dynamic_shared(kernel, bytes, ready);
  if (e != cudaSuccess) return e;
  constexpr int kOut = Epi::kGated ? kR / 2 : kR;
  const unsigned grid = static_cast<unsigned>((rows + kOut - 1) / kOut);
  if (early) {
    const cudaError_t l = LAUNCH_EARLY(kernel, grid, kWarps * 32, bytes, stream, w, gate, x, out, rows, nb, epi);
    if (l != cudaSuccess) return l;
  } else {
    LAUNCH(kernel, grid, kWarps * 32, bytes, stream, w, gate, x, out, rows, nb, epi);
  }
  return cudaGetLastError();
}

// warps_for's warps a CTA, or kWarpsFixed where set. A product takes() refuses is
// cudaErrorInvalidValue. early: the launch may start while the kernel before it runs (sm_90).
template <int kR, class Epi = Plain, bool kL2 = false, int kWarpsFixed = 0>
cudaError_t launch(const BlockQ4_0* w, const BlockQ4_0* gate, const BlockQ8_1* x, float* out, int64_t rows, int64_t k,
                   const Epi& epi, bool early, cudaStream_t stream) {
  if (!takes<kR>(w, gate, x, rows, k) || (Epi::kGated && gate == nullptr)) return cudaErrorInvalidValue;
  const int64_t nb = k / kBlock;
  const int64_t stages = nb / Geometry<kR>::kGroupBlocks;
  const int warps = kWarpsFixed != 0 ? kWarpsFixed : warps_for(stages);
  if (warps == 8) return launch_with<kR, 8, 2, Epi, kL2>(w, gate, x, out, rows, nb, epi, early, stream);
  if (warps == 4) return launch_with<kR, 4, 3, Epi, kL2>(w, gate, x, out, rows, nb, epi, early, stream);
  return launch_with<kR, 2, 3, Epi, kL2>(w, gate, x, out, rows, nb, epi, early, stream);
}

}  // namespace row_lanes
}  // namespace gemv
