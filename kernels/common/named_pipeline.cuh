// A warp-specialized hand-over through named barriers that both the emulator's test
// (emu/cuda_emu_test.cc) and the GPU check (probes/cluster_check.cu) run and check exactly: where
// both pass, the emulator's named barriers (named_barrier_sync / named_barrier_arrive) behave as
// bar.sync / bar.arrive do for this use.
#pragma once

#include <vector>

#include "device.cuh"
#include "device_sm90.cuh"

// 96 threads: warp 2 produces a round of 64 values, warps 0 and 1 consume it, four rounds
// through one shared buffer. The consumers' arrivals on barrier 1 free the buffer, the
// producer's on barrier 2 fill it; without the wait on barrier 2 (wait_full false) the consumers
// read before the producer wrote. `count` is both barriers' thread count (96 for this block).
__global__ void named_pipeline(int* out, bool wait_full, int count) {
  __shared__ int buf[64];
  const bool producer = threadIdx.x >= 64;
  int sum = 0;
  for (int round = 0; round < 4; ++round) {
    if (producer) {
      named_barrier_sync(1, count);
      for (int i = static_cast<int>(threadIdx.x) - 64; i < 64; i += 32) buf[i] = round * 100 + i;
      named_barrier_arrive(2, count);
    } else {
      named_barrier_arrive(1, count);
      if (wait_full) named_barrier_sync(2, count);
      sum += buf[threadIdx.x];
    }
  }
  if (!producer) out[threadIdx.x] = sum;
}

// What named_pipeline leaves in out[0, 64) when every round is handed over.
inline bool named_pipeline_right(const std::vector<int>& out) {
  for (int i = 0; i < 64; ++i)
    if (out[static_cast<size_t>(i)] != 600 + 4 * i) return false;
  return true;
}
