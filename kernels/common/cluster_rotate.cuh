// Small cluster kernels that both the emulator's test (emu/cuda_emu_test.cc) and the GPU check
// (probes/cluster_check.cu) run and check exactly: where both pass, the emulator's model of
// thread-block clusters (cluster_rank, cluster_size, cluster_sync, cluster_map_shared, static
// shared memory per block) is the GPU's for what our kernels rely on.
#pragma once

#include <vector>

#include "device.cuh"
#include "device_sm90.cuh"

// Each block of a cluster stores a cell per thread in its dynamic shared memory and in a static
// array, waits for the cluster (with_sync), then each thread reads a cell of the neighbour block
// (rank + 1 mod size) through cluster_map_shared, and one of its own static array: the cell after
// its lane partner's (a shuffle gives it, so warps stay warps within the cluster), written where
// the partner would. The last cluster_sync keeps every block's shared memory until its neighbour
// has read it, unless keep_alive is false. (The shuffle comes first: the emulator completes a warp
// operation once every thread of the cluster has stopped, which would hide a missing barrier.)
__global__ void cluster_rotate(int* out, int* own_out, bool with_sync, bool keep_alive, int salt) {
  DYNAMIC_SHARED(int, cells);
  __shared__ int own[64];
  const int t = static_cast<int>(threadIdx.x), b = static_cast<int>(blockIdx.x);
  const int next = __shfl_xor_sync(0xffffffffu, (t + 1) % 64, 1);
  cells[t] = 1000 * b + t + salt;
  own[t] = 1000 * b + t + salt;
  if (with_sync) cluster_sync();
  const int* theirs = static_cast<const int*>(cluster_map_shared(cells, static_cast<int>((cluster_rank() + 1) % cluster_size())));
  out[64 * b + (t ^ 1)] = theirs[next] - salt;
  own_out[64 * b + (t ^ 1)] = own[next] - salt;
  if (keep_alive) cluster_sync();
}

// What cluster_rotate writes: the neighbour's cells and the block's own.
inline bool cluster_rotate_right(const std::vector<int>& out, const std::vector<int>& own, int blocks, int cluster) {
  bool right = true;
  for (int b = 0; b < blocks; ++b) {
    const int neighbour = b / cluster * cluster + (b % cluster + 1) % cluster;
    for (int t = 0; t < 64; ++t) {
      right = right && out[64 * b + t] == 1000 * neighbour + (t + 1) % 64;
      right = right && own[64 * b + t] == 1000 * b + (t + 1) % 64;
    }
  }
  return right;
}

// 100 x the cluster size + the rank, a value per block.
__global__ void cluster_rank_of(int* out) {
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<int>(100 * cluster_size() + cluster_rank());
}
