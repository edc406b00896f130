// What a kernel package's CUDA source uses of sm_90 (wgmma, thread-block clusters) and of named
// barriers between warps, beyond device.cuh, so the same source also runs under the CPU emulator
// (emu/cuda_emu.h). The engine's kernels use none of it; the variants and probes that do include it.
//   named_barrier_sync(id, count), named_barrier_arrive(id, count)   bar.sync / bar.arrive: barrier
//                                            id (1 to 15; 0 is __syncthreads') completes a phase
//                                            when `count` threads (whole warps) have arrived;
//                                            sync waits for that, arrive does not. Writes before
//                                            an arrival are visible to the waiters after it
//   shared_descriptor(at, lbo, sbo)          wgmma's descriptor of a K-major operand without
//                                            swizzle at `at` (dynamic shared memory): 8-row core
//                                            matrices of 16-byte rows, the two of a k step lbo
//                                            bytes apart, 8-row groups sbo apart
//   wgmma_tf32<N>(d, a, b, accumulate)       wgmma m64nNk8 f32.tf32 (N 16 or 32), every thread of
//                                            the warpgroup: d (N / 2 floats) = A B^T (+ d), both
//                                            from descriptors; sm_90a only (elsewhere a trap)
//   wgmma_fence(d), wgmma_commit(), wgmma_wait<N>(d)   before a batch on accumulator d (after
//                                            d was touched), close the batch, wait until at most
//                                            N batches are in flight (before reading d or
//                                            reusing the operands); both pin only the d they are
//                                            given: a batch on two accumulators names each
//   fence_proxy_async()                      after writing wgmma operands with ordinary stores
//                                            or cp.async, before the barrier ahead of the wgmma
//   wgmma_index(row, k, cols), wgmma_kmajor(base, row0, k0, cols)   where an operand's element
//                                            goes in that layout, and its descriptor at a k step
//   wgmma_row(t, e), wgmma_col(t, e)         where accumulator register e of thread t lies
//   LAUNCH_CLUSTER(kernel, grid, block, shared_bytes, stream, cluster_x, args...)   LAUNCH with
//                                            thread-block clusters of cluster_x blocks along x (1 to
//                                            8, dividing grid.x; sm_90), whose blocks run at once
//                                            and reach each other's shared memory; returns the
//                                            launch's cudaError_t
//   cluster_rank(), cluster_size()           the block's rank in its cluster, the cluster's blocks
//                                            (0 and 1 without clusters)
//   cluster_sync()                           every thread of every block of the cluster arrives,
//                                            then waits for the rest: writes before it, to any
//                                            block's shared memory, are visible after it. A block
//                                            whose shared memory others read must not end before
//                                            they did: end with one too
//   cluster_map_shared(p, rank)              the address of the byte at p (the block's dynamic
//                                            shared memory) in block `rank`'s shared memory, which
//                                            plain loads and stores use
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "device.cuh"

#ifdef CUDA_EMU

inline uint64_t shared_descriptor(const void* at, uint32_t lbo, uint32_t sbo) {
  return ::cuda_emu::shared_descriptor(at, lbo, sbo);
}
template <int N>
inline void wgmma_tf32(float (&d)[N / 2], uint64_t a, uint64_t b, bool accumulate) {
  ::cuda_emu::wgmma_tf32(d, N, a, b, accumulate);
}
template <int R>
inline void wgmma_fence(float (&)[R]) {
  ::cuda_emu::wgmma_fence();
}
inline void wgmma_commit() { ::cuda_emu::wgmma_commit(); }
template <int N, int R>
inline void wgmma_wait(float (&)[R]) {
  ::cuda_emu::wgmma_wait(N);
}
inline void fence_proxy_async() {}
inline void named_barrier_sync(int id, int count) { ::cuda_emu::named_barrier_sync(id, count); }
inline void named_barrier_arrive(int id, int count) { ::cuda_emu::named_barrier_arrive(id, count); }
#define LAUNCH_CLUSTER(kernel, grid, block, shared_bytes, stream, cluster_x, ...)                      \
  ::cuda_emu::launch(reinterpret_cast<const void*>(kernel), grid, block, shared_bytes, \
                     [&] { kernel(__VA_ARGS__); }, cluster_x)
inline unsigned cluster_rank() { return ::cuda_emu::cluster_rank(); }
inline unsigned cluster_size() { return ::cuda_emu::cluster_size(); }
inline void cluster_sync() { ::cuda_emu::cluster_sync(); }
inline void* cluster_map_shared(const void* p, int rank) { return ::cuda_emu::cluster_map_shared(p, rank); }

#else

__device__ __forceinline__ void named_barrier_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}

// wgmma exists only on sm_90a (ptxas refuses it for plain sm_90): elsewhere a trap, and callers
// dispatch to it only on a build for sm_90a.
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define ONEBIT_SM90A_ONLY(...) __VA_ARGS__
#else
#define ONEBIT_SM90A_ONLY(...) __trap()
#endif
__device__ __forceinline__ uint64_t shared_descriptor(const void* at, uint32_t lbo, uint32_t sbo) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(at));
  return uint64_t{(a & 0x3FFFF) >> 4} | (uint64_t{(lbo & 0x3FFFF) >> 4} << 16) | (uint64_t{(sbo & 0x3FFFF) >> 4} << 32);
}
template <int N>
__device__ __forceinline__ void wgmma_tf32(float (&d)[N / 2], uint64_t a, uint64_t b, bool accumulate);
template <>
__device__ __forceinline__ void wgmma_tf32<16>(float (&d)[8], uint64_t a, uint64_t b, bool accumulate) {
  ONEBIT_SM90A_ONLY(asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(a), "l"(b), "r"(int{accumulate})));
}
template <>
__device__ __forceinline__ void wgmma_tf32<32>(float (&d)[16], uint64_t a, uint64_t b, bool accumulate) {
  ONEBIT_SM90A_ONLY(asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k8.f32.tf32.tf32 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1;\n}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(a), "l"(b), "r"(int{accumulate})));
}
// The empty asm ties each accumulator register to the fence or wait beside it, so the compiler
// moves no ordinary access of d across them.
template <int R>
__device__ __forceinline__ void pin_registers(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
template <int R>
__device__ __forceinline__ void wgmma_fence(float (&d)[R]) {
  pin_registers(d);
  ONEBIT_SM90A_ONLY(asm volatile("wgmma.fence.sync.aligned;" ::: "memory"));
  pin_registers(d);
}
__device__ __forceinline__ void wgmma_commit() {
  ONEBIT_SM90A_ONLY(asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"));
}
template <int N, int R>
__device__ __forceinline__ void wgmma_wait(float (&d)[R]) {
  ONEBIT_SM90A_ONLY(asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"));
  pin_registers(d);
}
// The proxy fence exists from sm_90 on (not only sm_90a); before it there is no wgmma to order.
__device__ __forceinline__ void fence_proxy_async() {
#if __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// A launch with clusters fails before sm_90 (cudaLaunchKernelEx returns the error).
template <typename... Params, typename... Args>
inline cudaError_t launch_cluster(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                                  cudaStream_t stream, unsigned cluster_x, Args... args) {
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = cluster_x;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  const cudaLaunchConfig_t config = launch_config(grid, block, shared_bytes, stream, &attr, 1);
  return cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}
#define LAUNCH_CLUSTER(kernel, grid, block, shared_bytes, stream, cluster_x, ...) \
  launch_cluster(kernel, grid, block, shared_bytes, stream, cluster_x, __VA_ARGS__)

// Clusters exist from sm_90 on (not only sm_90a). Before it every launch is a cluster of one block,
// which is what these compile to there: rank 0 of 1, the block barrier, the block's own address.
__device__ __forceinline__ unsigned cluster_rank() {
#if __CUDA_ARCH__ >= 900
  unsigned rank;
  asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
#else
  return 0;
#endif
}
__device__ __forceinline__ unsigned cluster_size() {
#if __CUDA_ARCH__ >= 900
  unsigned size;
  asm("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
  return size;
#else
  return 1;
#endif
}
__device__ __forceinline__ void cluster_sync() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
#else
  __syncthreads();
#endif
}
// mapa on a generic address gives a generic one, into the shared::cluster window.
__device__ __forceinline__ void* cluster_map_shared(const void* p, int rank) {
#if __CUDA_ARCH__ >= 900
  uint64_t mapped;
  asm("mapa.u64 %0, %1, %2;" : "=l"(mapped) : "l"(p), "r"(rank));
  return reinterpret_cast<void*>(mapped);
#else
  return const_cast<void*>(p);
#endif
}

#endif

// wgmma's K-major layout without swizzle as our kernels store it: element (row, k) of an operand
// with `cols` k-columns sits in 8 x 4 core matrices of 128 bytes, the cores of an 8-row group in k
// order and the groups cols / 4 cores apart. A k step's two cores are then 128 bytes apart (the
// descriptor's lbo) and the 8-row groups cols * 32 bytes (its sbo).
__host__ __device__ inline int wgmma_index(int row, int k, int cols) {
  return ((row >> 3) * (cols >> 2) + (k >> 2)) * 32 + (row & 7) * 4 + (k & 3);
}
// The descriptor of the rows from row0 at k step k0 of such an operand stored at `base`.
__device__ inline uint64_t wgmma_kmajor(const float* base, int row0, int k0, int cols) {
  return shared_descriptor(base + wgmma_index(row0, k0, cols), 128, static_cast<uint32_t>(cols) * 32);
}
// Where register e of an m64nN accumulator lies for thread t (0..127) of the warpgroup: the PTX
// ISA's layout, warp t / 32 holding rows 16 (t / 32) .. + 16 and the m16n8 C fragment for each
// 8 columns.
__host__ __device__ inline int wgmma_row(int t, int e) { return 16 * (t >> 5) + ((t & 31) >> 2) + 8 * ((e >> 1) & 1); }
__host__ __device__ inline int wgmma_col(int t, int e) { return 8 * (e >> 2) + 2 * (t & 3) + (e & 1); }
