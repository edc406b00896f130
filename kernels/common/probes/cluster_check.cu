// cluster_rotate.cuh's kernels on the GPU, checked exactly as the emulator's test checks them
// (clusters of 2 and 4 on 8 blocks, both cluster barriers in place), and named_pipeline.cuh's
// hand-over through named barriers. Passing, it shows that the emulator's models of clusters and
// named barriers are the GPU's for what our kernels use. Prints one line a check and
// "pass" or "fail"; the exit status says the same.
//
//   cluster_check
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "cluster_rotate.cuh"
#include "named_pipeline.cuh"

namespace {

bool ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "cluster_check: %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main() {
  constexpr int kBlocks = 8;
  const size_t bytes = sizeof(int) * 64 * kBlocks;
  int *out = nullptr, *own = nullptr;
  if (!ok(cudaMalloc(&out, bytes), "cudaMalloc") || !ok(cudaMalloc(&own, bytes), "cudaMalloc")) return 1;
  bool pass = true;
  std::vector<int> host_out(64 * kBlocks), host_own(64 * kBlocks);
  for (int cluster : {2, 4}) {
    bool right = ok(cudaMemset(out, 0xff, bytes), "cudaMemset") && ok(cudaMemset(own, 0xff, bytes), "cudaMemset") &&
                 ok(LAUNCH_CLUSTER(cluster_rotate, dim3(kBlocks), dim3(64), 64 * sizeof(int), nullptr, cluster, out, own,
                                   true, true, 7000),
                    "launch") &&
                 ok(cudaDeviceSynchronize(), "cluster_rotate") &&
                 ok(cudaMemcpy(host_out.data(), out, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy") &&
                 ok(cudaMemcpy(host_own.data(), own, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
    right = right && cluster_rotate_right(host_out, host_own, kBlocks, cluster);
    std::printf("cluster_rotate, clusters of %d: %s\n", cluster, right ? "exact" : "WRONG");
    pass = pass && right;
  }
  std::vector<int> ranks(kBlocks, -1);
  bool ranks_right = ok(LAUNCH_CLUSTER(cluster_rank_of, dim3(kBlocks), dim3(32), 0, nullptr, 4, out), "launch") &&
                     ok(cudaMemcpy(ranks.data(), out, sizeof(int) * kBlocks, cudaMemcpyDeviceToHost), "cudaMemcpy");
  for (int b = 0; b < kBlocks; ++b) ranks_right = ranks_right && ranks[b] == 400 + b % 4;
  std::printf("cluster_rank and cluster_size, clusters of 4: %s\n", ranks_right ? "exact" : "WRONG");
  pass = pass && ranks_right;
  std::vector<int> piped(64, -1);
  bool piped_right = ok(cudaMemset(out, 0xff, bytes), "cudaMemset");
  LAUNCH(named_pipeline, dim3(1), dim3(96), 0, nullptr, out, true, 96);
  piped_right = piped_right && ok(cudaGetLastError(), "launch") && ok(cudaDeviceSynchronize(), "named_pipeline") &&
                ok(cudaMemcpy(piped.data(), out, sizeof(int) * 64, cudaMemcpyDeviceToHost), "cudaMemcpy") &&
                named_pipeline_right(piped);
  std::printf("named_pipeline, named barriers between warps: %s\n", piped_right ? "exact" : "WRONG");
  pass = pass && piped_right;
  std::printf("%s\n", pass ? "pass" : "fail");
  return pass ? 0 : 1;
}
