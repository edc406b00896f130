// Every variant the driver and the emulator check run: the four the engine dispatches (kernel.cuh,
// dispatch.cu) and those that lost to them (this folder, which the engine patch does not carry).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "../kernel.cuh"

namespace gdn {

struct KernelVariant {
  const char* name;  // v1 .. v10: the driver's and the emulator check's case names start with it
  size_t (*scratch_bytes)(const GdnArgs& a);
  cudaError_t (*run)(const GdnArgs& a, void* scratch, cudaStream_t stream);  // as gdn_prefill
};

// v1 to v10, in order.
const std::vector<KernelVariant>& kernel_variants();

// The variants that lost.
extern const KernelVariant kWgmma;                // v5, wgmma.cu
extern const KernelVariant kPrepAlongside;        // v6, prep_alongside.cu
extern const KernelVariant kLookAhead;            // v7, look_ahead.cu
extern const KernelVariant kPairChains;           // v8, pair_chains.cu
extern const KernelVariant kPairChainsStaggered;  // v9, pair_chains.cu
extern const KernelVariant kFolded;               // v10, folded.cu

}  // namespace gdn
