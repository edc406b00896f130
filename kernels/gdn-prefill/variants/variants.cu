// The list of every variant (variants.h): the engine's four through gdn_prefill, then the rest.
#include "variants.h"

namespace gdn {
namespace {

template <Variant v>
size_t engine_scratch_bytes(const GdnArgs& a) {
  return gdn_prefill_scratch_bytes(a, v);
}
template <Variant v>
cudaError_t engine_run(const GdnArgs& a, void* scratch, cudaStream_t stream) {
  return gdn_prefill(a, scratch, stream, v);
}
template <Variant v>
KernelVariant engine_variant() {
  return {variant_name(v), engine_scratch_bytes<v>, engine_run<v>};
}

}  // namespace

const std::vector<KernelVariant>& kernel_variants() {
  static const std::vector<KernelVariant> all = {
      engine_variant<Variant::kSimt>(),
      engine_variant<Variant::kTensorCores>(),
      engine_variant<Variant::kTensorCoresSplit>(),
      engine_variant<Variant::kOutputApart>(),
      kWgmma,
      kPrepAlongside,
      kLookAhead,
      kPairChains,
      kPairChainsStaggered,
      kFolded,
  };
  return all;
}

}  // namespace gdn
