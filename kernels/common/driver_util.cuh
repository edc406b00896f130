// What every kernel package's driver needs from the CUDA runtime: stop with a one-line error on
// any failure, and put a host vector on the device.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace kernels {

// Exits with status 2 and "<program>: <what>: <CUDA's message>" when e is an error.
inline void check_cuda(cudaError_t e, const char* what, const char* program = "driver") {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s: %s\n", program, what, cudaGetErrorString(e));
    std::exit(2);
  }
}

template <typename T>
T* upload(const std::vector<T>& v) {
  T* d = nullptr;
  check_cuda(cudaMalloc(&d, v.size() * sizeof(T)), "cudaMalloc");
  check_cuda(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  return d;
}

}  // namespace kernels
