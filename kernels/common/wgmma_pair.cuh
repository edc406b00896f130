// One small wgmma kernel that both the emulator's test (emu/cuda_emu_test.cc) and the GPU probe
// (kernels/gdn-prefill/probes/chain_product.cu) run and check exactly: where both pass, the
// operand layout, descriptors and register mapping the emulator assumes are the GPU's (its small
// integers sum exactly, so rounding and summation order are not tested here). It covers what the kernels use: m64n32k8 and m64n16k8, two
// warpgroups at once with different operands, a first k step that drops the accumulator's old
// value (here NaN) and a second that adds to it.
//
// Warpgroup 0 multiplies A (64 x 16) by B0^T (B0 32 x 16), warpgroup 1 the same A by B1^T (B1
// 16 x 16); operands in device.cuh's K-major layout (wgmma_index, wgmma_kmajor). Inputs are small integers, so every sum is exact. `mode`
// breaks it for the emulator's own checks (the GPU runs mode 0 only): 1, one thread of warpgroup
// 0 gives another B descriptor; 2, warp 3 skips the wgmma; 3, A's descriptor points outside the
// dynamic shared memory; 4, no barrier between the operands' stores and the wgmma; 5, A changes
// before the wait; 6, no wgmma_fence; 7, no wait; 8, the accumulators are read before the wait.
#pragma once

#include <cmath>
#include <vector>

#include "device.cuh"
#include "device_sm90.cuh"

constexpr int kWgK = 16;
constexpr int kWgmmaPairBytes = (64 + 32 + 16) * kWgK * 4;

__device__ float wgmma_pair_not_shared[64];

__global__ void wgmma_pair(const float* a, const float* b0, const float* b1, float* d0, float* d1, int mode) {
  DYNAMIC_SHARED(float, sm);
  float* as = sm;
  float* bs0 = as + 64 * kWgK;
  float* bs1 = bs0 + 32 * kWgK;
  for (int i = threadIdx.x; i < 64 * kWgK; i += blockDim.x) as[wgmma_index(i / kWgK, i % kWgK, kWgK)] = a[i];
  for (int i = threadIdx.x; i < 32 * kWgK; i += blockDim.x) bs0[wgmma_index(i / kWgK, i % kWgK, kWgK)] = b0[i];
  for (int i = threadIdx.x; i < 16 * kWgK; i += blockDim.x) bs1[wgmma_index(i / kWgK, i % kWgK, kWgK)] = b1[i];
  fence_proxy_async();
  if (mode != 4) __syncthreads();
  const int group = threadIdx.x / 128, t = threadIdx.x % 128, warp = t / 32;
  if (mode == 2 && warp == 3) return;
  float acc32[16], acc16[8];
  for (float& x : acc32) x = NAN;
  for (float& x : acc16) x = NAN;
  if (mode != 6) {
    wgmma_fence(acc32);
    wgmma_fence(acc16);
  }
  for (int k = 0; k < kWgK; k += 8) {
    const uint64_t da = wgmma_kmajor(mode == 3 ? wgmma_pair_not_shared : as, 0, k, kWgK);
    if (group == 0) {
      const int skew = mode == 1 && t == 5 ? 32 : 0;
      wgmma_tf32<32>(acc32, da, wgmma_kmajor(bs0 + skew, 0, k, kWgK), k > 0);
    } else {
      wgmma_tf32<16>(acc16, da, wgmma_kmajor(bs1, 0, k, kWgK), k > 0);
    }
  }
  wgmma_commit();
  if (mode == 5) {
    __syncthreads();
    if (threadIdx.x == 0) as[0] += 1.0f;
    __syncthreads();
  }
  if (mode == 7) return;
  float* d = group == 0 ? d0 : d1;
  if (mode == 8 && t == 0) d[0] = group == 0 ? acc32[0] : acc16[0];
  wgmma_wait<0>(acc32);
  wgmma_wait<0>(acc16);
  const int n = group == 0 ? 32 : 16;
  for (int i = 0; i < n / 2; ++i) {
    const int row = wgmma_row(t, i), col = wgmma_col(t, i);
    if (mode != 8 || row + col > 0) d[row * n + col] = group == 0 ? acc32[i] : acc16[i];
  }
}

// The inputs, the outputs' room, and the exact check.
struct WgmmaPair {
  std::vector<float> a = fill(64, 7, 17), b0 = fill(32, 5, 13), b1 = fill(16, 3, 11);
  std::vector<float> d0 = std::vector<float>(64 * 32), d1 = std::vector<float>(64 * 16);

  static std::vector<float> fill(int rows, int step, int range) {
    std::vector<float> v(static_cast<size_t>(rows) * kWgK);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i * step % range) - range / 2);
    return v;
  }
  // Whether d0 and d1 are exactly A B0^T and A B1^T.
  bool right() const { return is_product(d0, b0, 32) && is_product(d1, b1, 16); }
  bool is_product(const std::vector<float>& d, const std::vector<float>& b, int n) const {
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < n; ++c) {
        float want = 0;
        for (int k = 0; k < kWgK; ++k) want += a[r * kWgK + k] * b[c * kWgK + k];
        if (d[r * n + c] != want) return false;
      }
    return true;
  }
};
