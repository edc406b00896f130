// The scan's chain product on one SM, measured three ways, to decide whether the scan should move
// from mma.sync to wgmma (program.md, "Where the 10x target stands"):
//
//   U (64 x 32) += W (64 x 128) S (128 x 32), float accuracy through the 3xTF32 split, repeated R
//   times by one CTA, each repetition after the one before and a barrier (as the scan's chain is).
//
//   mma      the scan's way at 3a8c410 (v3 then, with three accumulators a tile):
//            8 warps of mma.sync m16n8k8, W's fragments loaded from shared memory and split per
//            fragment, S kept split as (high, rest) pairs.
//   regs     the same mma.sync instructions with operands that stay in registers: what mma.sync
//            costs when nothing else does (the tensor pipe's bound for this product).
//   wgmma    one warpgroup (128 threads) of wgmma m64n32k8 reading split W and S straight from
//            shared memory (no swizzle, K-major), three products a k step into one accumulator;
//            "1xTF32" the high parts alone (one product a k step: below the accuracy bar, for
//            the tensor rate).
//
// Every SM runs one CTA, as the scan does. Each variant's result (R = 1) is checked against a
// float64 product (SNR); the exit status says whether the mma form and 3xTF32 wgmma kept float
// accuracy (100 dB). Times: cycles per product (clock64 in each CTA, median over the CTAs) and the
// kernel's wall time.
//
// Its wgmma goes through device.cuh, as a kernel's would, and it also runs the emulator's own
// wgmma check (kernels/common/wgmma_pair.cuh: both widths the kernels use, two warpgroups, a first
// step that drops the accumulator) and compares it exactly. That shows the layouts and register
// mapping the emulator assumes are the GPU's; its small integers sum exactly, so it says nothing
// of rounding or summation order (the float64 checks above cover accuracy).
// Build and run on an sm_90a GPU (wgmma exists only there):
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I kernels/common \
//     -o .gpu/chain_product kernels/gdn-prefill/probes/chain_product.cu
//   .gpu/chain_product [REPS]
#include "device.cuh"
#include "device_sm90.cuh"
#include "driver_util.cuh"
#include "wgmma_pair.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

constexpr int M = 64, K = 128, N = 32;
constexpr int kLdW = K + 4;     // floats: v3's padded row stride for W
constexpr int kLdS = N + 4;     // pairs: v3's row stride for the split state
constexpr int kSms = 132;

void check(cudaError_t e, const char* what) { kernels::check_cuda(e, what, "chain_product"); }

// d += a b on one m16n8k8 (device.cuh's instruction, accumulating in place).
__device__ __forceinline__ void mma(float (&d)[4], const float (&a)[4], const float (&b)[2]) {
  mma_tf32_m16n8k8(d, a[0], a[1], a[2], a[3], b[0], b[1], d);
}

// out[blockIdx.x] gets the cycles per product since `start` (clock64()).
__device__ void record_cycles(long long start, long long* out, int reps) {
  if (threadIdx.x == 0) out[blockIdx.x] = (clock64() - start) / reps;
}

// mma / regs: 8 warps; warp w owns rows 16 (w / 2) .. + 16 and columns 16 (w % 2) .. + 16 of U.
template <bool kFromShared>
__global__ void __launch_bounds__(256, 1) mma_product(const float* w, const float* s, float* u, long long* cycles,
                                                       int reps) {
  extern __shared__ float4 smem4[];
  float* ws = reinterpret_cast<float*>(smem4);   // [M][kLdW]
  float2* ss = reinterpret_cast<float2*>(ws + M * kLdW);  // [K][kLdS] (high, rest)
  for (int i = threadIdx.x; i < M * K; i += blockDim.x) ws[(i / K) * kLdW + i % K] = w[i];
  for (int i = threadIdx.x; i < K * N; i += blockDim.x) {
    const float v = s[i], hi = to_tf32(v);
    ss[(i / N) * kLdS + i % N] = float2{hi, v - hi};
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, r = lane >> 2, q = lane & 3;
  const int row0 = 16 * (warp / 2), col0 = 16 * (warp % 2);
  float acc[2][2][3][4] = {};  // [k step parity][column tile][hh, lh, hl][element]
  // regs: one fragment of each operand, loaded once, stands for all of them.
  float ra[4], rb[2][2];
  for (int e = 0; e < 4; ++e) ra[e] = ws[(row0 + r + 8 * (e & 1)) * kLdW + q + 4 * (e >> 1)];
  for (int j = 0; j < 2; ++j) rb[j][0] = ss[q * kLdS + col0 + 8 * j + r].x, rb[j][1] = ss[(q + 4) * kLdS + col0 + 8 * j + r].x;
  const long long start = clock64();
  for (int rep = 0; rep < reps; ++rep) {
    for (int k0 = 0; k0 < K; k0 += 16) {
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const int k = k0 + 8 * p;
        float a[4], ah[4], al[4];
        if (kFromShared) {
          for (int e = 0; e < 4; ++e) a[e] = ws[(row0 + r + 8 * (e & 1)) * kLdW + k + q + 4 * (e >> 1)];
        } else {
          for (int e = 0; e < 4; ++e) a[e] = ra[e];
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) ah[e] = to_tf32(a[e]), al[e] = a[e] - ah[e];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          float bh[2], bl[2];
          if (kFromShared) {
            const float2 b0 = ss[(k + q) * kLdS + col0 + 8 * j + r], b1 = ss[(k + q + 4) * kLdS + col0 + 8 * j + r];
            bh[0] = b0.x, bh[1] = b1.x, bl[0] = b0.y, bl[1] = b1.y;
          } else {
            bh[0] = rb[j][0], bh[1] = rb[j][1], bl[0] = 0, bl[1] = 0;
          }
          mma(acc[p][j][0], ah, bh);
          mma(acc[p][j][1], al, bh);
          mma(acc[p][j][2], ah, bl);
        }
      }
    }
    __syncthreads();
  }
  record_cycles(start, cycles, reps);
  for (int j = 0; j < 2; ++j)
    for (int e = 0; e < 4; ++e) {
      float v = 0;
      for (int p = 0; p < 2; ++p) v += acc[p][j][0][e] + (acc[p][j][1][e] + acc[p][j][2][e]);
      u[(row0 + r + 8 * (e >> 1)) * N + col0 + 8 * j + 2 * q + (e & 1)] = v;
    }
}

// wgmma: one warpgroup, operands in device.cuh's K-major layout.
// kSplit false: the high parts alone (plain TF32, one product a k step), for the tensor rate.
template <bool kSplit>
__global__ void __launch_bounds__(128, 1) wgmma_product(const float* w, const float* s, float* u, long long* cycles,
                                                         int reps) {
  extern __shared__ float4 smem4[];
  float* wh = reinterpret_cast<float*>(smem4);  // W: M rows of K (K-major), high parts
  float* wl = wh + M * K;                        // ... and rests
  float* sh = wl + M * K;                        // S^T: N rows of K (K-major), high parts
  float* sl = sh + N * K;
  for (int i = threadIdx.x; i < M * K; i += blockDim.x) {
    const float v = w[i], hi = to_tf32(v);
    wh[wgmma_index(i / K, i % K, K)] = hi;
    wl[wgmma_index(i / K, i % K, K)] = v - hi;
  }
  for (int i = threadIdx.x; i < K * N; i += blockDim.x) {  // s is K x N row-major: element (k, n)
    const float v = s[i], hi = to_tf32(v);
    sh[wgmma_index(i % N, i / N, K)] = hi;
    sl[wgmma_index(i % N, i / N, K)] = v - hi;
  }
  fence_proxy_async();  // ordinary stores, read next by wgmma
  __syncthreads();
  float d[16] = {};
  const long long start = clock64();
  for (int rep = 0; rep < reps; ++rep) {
    wgmma_fence(d);
#pragma unroll
    for (int k = 0; k < K; k += 8) {
      if (kSplit) {
        wgmma_tf32<N>(d, wgmma_kmajor(wl, 0, k, K), wgmma_kmajor(sh, 0, k, K), true);
        wgmma_tf32<N>(d, wgmma_kmajor(wh, 0, k, K), wgmma_kmajor(sl, 0, k, K), true);
      }
      wgmma_tf32<N>(d, wgmma_kmajor(wh, 0, k, K), wgmma_kmajor(sh, 0, k, K), true);
    }
    wgmma_commit();
    wgmma_wait<0>(d);
    __syncthreads();
  }
  record_cycles(start, cycles, reps);
  for (int e = 0; e < N / 2; ++e) u[wgmma_row(threadIdx.x, e) * N + wgmma_col(threadIdx.x, e)] = d[e];
}

struct Result {
  double snr_db;
  double cycles;  // per product, median over the CTAs
  float ms;
};

template <class Launch>
Result run(Launch launch, const std::vector<double>& want, float* d_u, long long* d_cycles, int reps) {
  std::vector<float> got(M * N);
  launch(1);
  check(cudaGetLastError(), "launch");
  check(cudaMemcpy(got.data(), d_u, got.size() * sizeof(float), cudaMemcpyDeviceToHost), "result");
  double sig = 0, err = 0;
  for (int i = 0; i < M * N; ++i) sig += want[i] * want[i], err += (got[i] - want[i]) * (got[i] - want[i]);
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "event");
  check(cudaEventCreate(&e1), "event");
  launch(reps);  // warm
  check(cudaEventRecord(e0), "event");
  launch(reps);
  check(cudaEventRecord(e1), "event");
  check(cudaEventSynchronize(e1), "timing");
  Result r{err == 0 ? 999.0 : 10 * std::log10(sig / err), 0, 0};
  check(cudaEventElapsedTime(&r.ms, e0, e1), "elapsed");
  std::vector<long long> cycles(kSms);
  check(cudaMemcpy(cycles.data(), d_cycles, cycles.size() * sizeof(long long), cudaMemcpyDeviceToHost), "cycles");
  std::sort(cycles.begin(), cycles.end());
  r.cycles = static_cast<double>(cycles[kSms / 2]);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1000;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> w(M * K), s(K * N);
  for (float& x : w) x = normal(rng);
  for (float& x : s) x = normal(rng);
  std::vector<double> want(M * N, 0.0);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j)
      for (int k = 0; k < K; ++k) want[i * N + j] += double(w[i * K + k]) * s[k * N + j];

  float *d_w, *d_s, *d_u;
  long long* d_cycles;
  check(cudaMalloc(&d_w, w.size() * 4), "alloc");
  check(cudaMalloc(&d_s, s.size() * 4), "alloc");
  check(cudaMalloc(&d_u, M * N * 4), "alloc");
  check(cudaMalloc(&d_cycles, kSms * sizeof(long long)), "alloc");
  check(cudaMemcpy(d_w, w.data(), w.size() * 4, cudaMemcpyHostToDevice), "upload");
  check(cudaMemcpy(d_s, s.data(), s.size() * 4, cudaMemcpyHostToDevice), "upload");

  // At least 116 KB each, so that no SM holds two CTAs (the scan keeps one an SM).
  const int mma_smem = std::max(M * kLdW * 4 + K * kLdS * 8, 116 << 10);
  const int wgmma_smem = std::max(2 * (M + N) * K * 4, 116 << 10);
  check(cudaFuncSetAttribute(mma_product<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, mma_smem), "attr");
  check(cudaFuncSetAttribute(mma_product<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, mma_smem), "attr");
  check(cudaFuncSetAttribute(wgmma_product<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, wgmma_smem), "attr");
  check(cudaFuncSetAttribute(wgmma_product<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, wgmma_smem), "attr");

  std::printf("product %dx%dx%d, 3xTF32, %d repetitions a CTA, one CTA on each of %d SMs\n", M, K, N, reps, kSms);
  auto report = [&](const char* name, const Result& r, bool checked) {
    std::printf("%-16s snr %6.1f dB%s  cycles/product %8.0f  kernel %8.3f ms\n", name, r.snr_db,
                checked ? "" : " (regs: one fragment stands for all; not a product)", r.cycles, r.ms);
  };
  const Result mma = run([&](int n) { mma_product<true><<<kSms, 256, mma_smem>>>(d_w, d_s, d_u, d_cycles, n); },
                         want, d_u, d_cycles, reps);
  report("mma", mma, true);
  report("regs", run([&](int n) { mma_product<false><<<kSms, 256, mma_smem>>>(d_w, d_s, d_u, d_cycles, n); }, want,
                     d_u, d_cycles, reps),
         false);
  const Result wgmma = run([&](int n) { wgmma_product<true><<<kSms, 128, wgmma_smem>>>(d_w, d_s, d_u, d_cycles, n); },
                           want, d_u, d_cycles, reps);
  report("wgmma", wgmma, true);
  report("wgmma 1xTF32", run([&](int n) { wgmma_product<false><<<kSms, 128, wgmma_smem>>>(d_w, d_s, d_u, d_cycles, n); },
                             want, d_u, d_cycles, reps),
         true);
  // The emulator's own wgmma check (kernels/common/wgmma_pair.cuh) on the GPU: exact there too.
  WgmmaPair pair;
  float* pair_in[3] = {kernels::upload(pair.a), kernels::upload(pair.b0), kernels::upload(pair.b1)};
  float *d0, *d1;
  check(cudaMalloc(&d0, pair.d0.size() * 4), "alloc");
  check(cudaMalloc(&d1, pair.d1.size() * 4), "alloc");
  wgmma_pair<<<1, 256, kWgmmaPairBytes>>>(pair_in[0], pair_in[1], pair_in[2], d0, d1, 0);
  check(cudaGetLastError(), "launch");
  check(cudaMemcpy(pair.d0.data(), d0, pair.d0.size() * 4, cudaMemcpyDeviceToHost), "result");
  check(cudaMemcpy(pair.d1.data(), d1, pair.d1.size() * 4, cudaMemcpyDeviceToHost), "result");
  const bool pair_right = pair.right();
  std::printf("wgmma_pair (m64n32k8 and m64n16k8, two warpgroups, as the emulator runs it): %s\n",
              pair_right ? "exact" : "WRONG");

  // A check as well as a probe: the emulator's wgmma layouts are the GPU's, and the mma form and
  // wgmma keep float accuracy.
  const bool pass = pair_right && mma.snr_db >= 100 && wgmma.snr_db >= 100;
  std::printf("%s\n", pass ? "pass" : "FAIL: wgmma_pair, mma or wgmma");
  return pass ? 0 : 1;
}
