// The variants under campaign, in the order the driver runs them.
#include "kernel.cuh"

namespace gemv {

const std::vector<Variant>& variants() {
  static const std::vector<Variant> all = {
      {"v1", "dp4a, a warp per row", gemv_v1},
      {"v2", "int8 mma m16n8k32, 16 rows a CTA, k over 8 warps", gemv_v2},
      {"v2-wide", "int8 mma m16n8k32, 32 rows a CTA, k over 8 warps", gemv_v2_wide},
  };
  return all;
}

}  // namespace gemv
