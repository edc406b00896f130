// Every variant, in the order the driver runs them: the engine's (kernel.cuh) among those that lost.
#include "variants.h"

namespace gemv {

const std::vector<Variant>& variants() {
  static const std::vector<Variant> all = [] {
    std::vector<Variant> v = {
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
    };
    for (const Variant& r : row_lanes_variants()) v.push_back(r);
    return v;
  }();
  return all;
}

}  // namespace gemv
