// v7's shapes (../row_lanes.cuh, whose v7-r16 the engine runs): v7, v7-r16, v7-r32, v7-w2 and
// v7-r16-l2 through the ring; v7-direct and v7-r32-direct load each lane's octets straight from
// global memory.
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
// are empty, and their fragments come out of shared memory two bytes at a time. v7 asks whether
// the memory side can come near the floor when the arithmetic is plain dp4a and every load is 16
// bytes wide; v7-r16-l2 whether asking L2 for a CTA's whole rows up front feeds the ring sooner.
// Shapes v7 does not take (rows not whole groups of octets, W not 16-byte aligned) go to v1.
#include <cstdint>

#include "../kernel.cuh"
#include "../row_lanes.cuh"
#include "variants.h"

namespace gemv {
namespace row_lanes {

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
  const WarpStages<kWarps> range(nb / G::kGroupBlocks, warp);
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
  store_rows<kR, kWarps>(acc, row0, rows, out, Plain{});
}

template <int kR, int kWarps>
cudaError_t launch_direct_with(const BlockQ4_0* w, const BlockQ8_1* x, float* out, int64_t rows, int64_t nb,
                               cudaStream_t stream) {
  auto* kernel = gemv_row_lanes_direct<kR, kWarps>;
  LAUNCH(kernel, static_cast<unsigned>((rows + kR - 1) / kR), kWarps * 32, 0, stream, w, x, out, rows, nb);
  return cudaGetLastError();
}

// The ring's warp counts (warps_for) without the ring.
template <int kR>
cudaError_t launch_direct(const BlockQ4_0* w, const BlockQ8_1* x, float* out, int64_t rows, int64_t k,
                          cudaStream_t stream) {
  const int64_t nb = k / kBlock;
  const int warps = warps_for(nb / Geometry<kR>::kGroupBlocks);
  if (warps == 8) return launch_direct_with<kR, 8>(w, x, out, rows, nb, stream);
  if (warps == 4) return launch_direct_with<kR, 4>(w, x, out, rows, nb, stream);
  return launch_direct_with<kR, 2>(w, x, out, rows, nb, stream);
}

// The driver's and the emulator check's signature: one column, and v1 where v7 does not take the
// shape.
template <int kR, bool kDirect = false, bool kL2 = false, int kWarpsFixed = 0>
cudaError_t variant(const BlockQ4_0* w, const BlockQ8_1* x, int64_t x_stride, float* out, int64_t rows, int64_t k,
                    int cols, cudaStream_t stream) {
  if (k % kBlock != 0 || cols != 1 || rows < 1) return cudaErrorInvalidValue;
  if (!takes<kR>(w, nullptr, x, rows, k)) return gemv_v1(w, x, x_stride, out, rows, k, cols, stream);
  if constexpr (kDirect) return launch_direct<kR>(w, x, out, rows, k, stream);
  else return launch<kR, Plain, kL2, kWarpsFixed>(w, nullptr, x, out, rows, k, Plain{}, false, stream);
}

}  // namespace row_lanes

std::vector<Variant> row_lanes_variants() {
  return {
      {"v7", "one column, a row a lane (8 rows a warp, 4 octets a stage), dp4a on 16-byte shared loads",
       row_lanes::variant<8>, 1},
      {"v7-r16", "v7 with 16 rows a warp, 2 octets a stage (the engine's)", row_lanes::variant<16>, 1},
      {"v7-r32", "v7 with 32 rows a warp, 1 octet a stage", row_lanes::variant<32>, 1},
      {"v7-w2", "v7 with 2 warps a CTA at every row length", row_lanes::variant<8, false, false, 2>, 1},
      {"v7-r16-l2", "v7-r16 asking L2 for its CTA's rows before the ring starts", row_lanes::variant<16, false, true>,
       1},
      {"v7-direct", "v7 loading its octets straight from global memory, no ring", row_lanes::variant<8, true>, 1},
      {"v7-r32-direct", "v7-r32 loading its octets straight from global memory, no ring",
       row_lanes::variant<32, true>, 1},
  };
}

}  // namespace gemv
