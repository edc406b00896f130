// What every kernel package's driver shares: the contract's options, a one-line error and exit on
// any CUDA failure, and host vectors put on the device.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
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

// The middle value (the upper one of an even count).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// [--bench-mode] [--filter TEXT] [--variant NAME] [--reps N] [--no-engine]
struct DriverOptions {
  bool bench = false;   // time the real shapes (cold L2), ours and the engine's
  bool engine = true;   // time the engine's kernel too
  std::string filter;   // only cases whose name (without the variant) holds this
  std::string variant;  // only this variant of the kernel
  int reps = 20;
};

// Parses the options; anything else prints the usage line and exits with status 2.
inline DriverOptions parse_driver_options(int argc, char** argv, const char* program) {
  DriverOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--bench-mode") o.bench = true;
    else if (a == "--no-engine") o.engine = false;
    else if (a == "--filter" && i + 1 < argc) o.filter = argv[++i];
    else if (a == "--variant" && i + 1 < argc) o.variant = argv[++i];
    else if (a == "--reps" && i + 1 < argc) o.reps = std::max(3, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--bench-mode] [--filter TEXT] [--variant NAME] [--reps N] [--no-engine]\n",
                   program);
      std::exit(2);
    }
  }
  return o;
}

}  // namespace kernels
