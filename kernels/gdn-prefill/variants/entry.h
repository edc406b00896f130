// What every variant's entry point does before its launch: the checks gdn_prefill makes (the
// arguments it takes, scratch 16-byte aligned: the scan copies it in 16-byte pieces), then
// launch(D) for the head size D (a std::integral_constant).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "../kernel.cuh"

namespace gdn {

template <class Launch>
cudaError_t run_checked(const GdnArgs& a, const void* scratch, const Launch& launch) {
  if (!gdn_prefill_supported(a) || reinterpret_cast<uintptr_t>(scratch) % 16 != 0) return cudaErrorInvalidValue;
  return a.S == 128 ? launch(std::integral_constant<int, 128>{}) : launch(std::integral_constant<int, 64>{});
}

}  // namespace gdn
