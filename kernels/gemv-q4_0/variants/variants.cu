// Every variant, in the order the driver runs them: the engine's (kernel.cuh) among those that lost.
#include "variants.h"

namespace gemv {

const std::vector<Variant>& variants() {
  static const std::vector<Variant> all = {
      {"v1", "dp4a, a warp per row", gemv_v1},
      {"v1-batch4", "dp4a, a warp per row, four blocks a lane in flight", gemv_v1_batch4},
      {"v2", "int8 mma m16n8k32, 16 rows a CTA, k over 8 warps", gemv_v2},
      {"v2-wide", "int8 mma m16n8k32, 32 rows a CTA, k over 8 warps", gemv_v2_wide},
      {"v3", "v2 fed by a 4-stage cp.async ring, 16 rows a CTA", gemv_v3},
      {"v3-wide", "v2 fed by a 4-stage cp.async ring, 32 rows a CTA", gemv_v3_wide},
      {"v3-tall", "v2 fed by a 2-stage cp.async ring, 64 rows a CTA", gemv_v3_tall},
      {"v4", "v3 with warp-level stage barriers, 16 rows a CTA", gemv_v4},
      {"v4-wide", "v3 with warp-level stage barriers, 32 rows a CTA", gemv_v4_wide},
      {"v5", "v4-wide with a 2-stage ring, two CTAs an SM, up to 16 columns", gemv_v5, kMaxCols},
      {"v5-narrow", "v5 with 16 rows a CTA", gemv_v5_narrow},
      {"v6", "v5 with persistent CTAs: one wave, the ring kept filled across row tiles", gemv_v6},
      {"v7", "one column, a row a lane (8 rows a warp, 4 octets a stage), dp4a on 16-byte shared loads", gemv_v7, 1},
      {"v7-r16", "v7 with 16 rows a warp, 2 octets a stage", gemv_v7_r16, 1},
      {"v7-r32", "v7 with 32 rows a warp, 1 octet a stage", gemv_v7_r32, 1},
      {"v7-direct", "v7 loading its octets straight from global memory, no ring", gemv_v7_direct, 1},
      {"v7-r32-direct", "v7-r32 loading its octets straight from global memory, no ring", gemv_v7_r32_direct, 1},
  };
  return all;
}

}  // namespace gemv
