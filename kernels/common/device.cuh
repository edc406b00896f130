// What a kernel package's CUDA source uses beyond plain CUDA C++, so the same source also runs
// under the CPU emulator (emu/cuda_emu.h):
//   DYNAMIC_SHARED(T, name)   the block's dynamic shared memory as T* name
//   LAUNCH(kernel, grid, block, shared_bytes, stream, args...)   kernel<<<...>>>(args...)
//   mma_s8_m16n8k32(d, a0..a3, b0, b1, c)   the int8 tensor-core instruction (PTX fragment layout)
//   mma_tf32_m16n8k8(d, a0..a3, b0, b1, c)  the TF32 one: operands are floats already rounded to
//                                           TF32 (to_tf32), accumulation in float
//   to_tf32(x)                              x rounded to TF32 as cvt.rna.tf32.f32 rounds (nearest,
//                                           ties away), as a float, in two integer operations; a
//                                           NaN or inf x gives some high part h, but then x - h is
//                                           not finite either: a 3xTF32 split stays non-finite
//   copy_async_16(dst, src), copy_async_4    cp.async of 16 or 4 bytes, global to shared
//   copy_async_16_or_zero(dst, src, copy)    copy_async_16, or (copy false) 16 zero bytes that
//                                            land the same way, src not read
//   async_commit(), async_wait<N>()          close a group of them; wait until at most N groups
//                                            are in flight (then __syncthreads to share them)
//   allow_dynamic_shared(kernel, bytes, done[, carveout])   the shared-memory opt-in (and carveout),
//                                            once per device
//   LAUNCH_EARLY(kernel, grid, block, shared_bytes, stream, args...)   LAUNCH, but on sm_90 the
//                                            kernel may start while the one before it in the
//                                            stream still runs (programmatic dependent launch),
//                                            once every CTA of that one has called
//                                            launch_dependents(); some CTA of it must call
//                                            wait_for_primary() before it ends
//   launch_dependents()                      lets the next kernel of the stream start early
//   wait_for_primary()                       waits until the kernel before this one in the stream
//                                            has finished and its writes are visible
//   ready_signal(counter)                    the block's global writes so far are made visible,
//                                            then the counter goes up by one (all threads call it)
//   ready_wait(counter, count)               the block waits until the counter reaches count (all
//                                            threads call it); what the signalling blocks wrote
//                                            is then visible to loads that bypass L1 (cp.async.cg)
//
// device_sm90.cuh adds wgmma, thread-block clusters and named barriers: the variants and probes
// use them, no kernel the engine runs does.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#ifdef CUDA_EMU

#define DYNAMIC_SHARED(T, name) T* name = static_cast<T*>(::cuda_emu::dynamic_shared())
#define LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                                       \
  ::cuda_emu::launch(reinterpret_cast<const void*>(kernel), grid, block, shared_bytes, \
                     [&] { kernel(__VA_ARGS__); })

inline void mma_s8_m16n8k32(int (&d)[4], int a0, int a1, int a2, int a3, int b0, int b1, const int (&c)[4]) {
  ::cuda_emu::mma_s8_m16n8k32(d, a0, a1, a2, a3, b0, b1, c);
}
inline void mma_tf32_m16n8k8(float (&d)[4], float a0, float a1, float a2, float a3, float b0, float b1,
                             const float (&c)[4]) {
  ::cuda_emu::mma_tf32_m16n8k8(d, a0, a1, a2, a3, b0, b1, c);
}
inline float to_tf32(float x) { return ::cuda_emu::round_to_tf32(x); }
inline void copy_async_16(void* dst, const void* src) { ::cuda_emu::copy_async(dst, src, 16); }
inline void copy_async_16_or_zero(void* dst, const void* src, bool copy) {
  ::cuda_emu::copy_async(dst, src, 16, copy);
}
inline void copy_async_4(void* dst, const void* src) { ::cuda_emu::copy_async(dst, src, 4); }
inline void async_commit() { ::cuda_emu::copy_async_commit(); }
template <int N>
inline void async_wait() {
  ::cuda_emu::copy_async_wait(N);
}
// Blocks run one after another here, and kernels too: a waiting block's producers have all run.
#define LAUNCH_EARLY LAUNCH
inline void launch_dependents() {}
inline void wait_for_primary() {}
inline void ready_signal(int* counter) { ::cuda_emu::ready_signal(counter); }
inline void ready_wait(const int* counter, int count) { ::cuda_emu::ready_wait(counter, count); }

#else

#define DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#define LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
  kernel<<<grid, block, shared_bytes, stream>>>(__VA_ARGS__)

// The kernels need sm_80 (mma.sync on int8 and TF32, cp.async); the engine also compiles them for
// the local GPU, which may be older. There they compile to a trap, and the engine patches never
// dispatch them: they check the device's compute capability first.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define ONEBIT_SM80_ONLY(...) __VA_ARGS__
#else
#define ONEBIT_SM80_ONLY(...) __trap()
#endif

__device__ __forceinline__ void mma_s8_m16n8k32(int (&d)[4], int a0, int a1, int a2, int a3, int b0, int b1,
                                                const int (&c)[4]) {
  ONEBIT_SM80_ONLY(asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3])));
}

__device__ __forceinline__ void mma_tf32_m16n8k8(float (&d)[4], float a0, float a1, float a2, float a3, float b0,
                                                 float b1, const float (&c)[4]) {
  ONEBIT_SM80_ONLY(asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(__float_as_uint(a0)), "r"(__float_as_uint(a1)), "r"(__float_as_uint(a2)), "r"(__float_as_uint(a3)),
        "r"(__float_as_uint(b0)), "r"(__float_as_uint(b1)), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3])));
}

// cvt.rna.tf32.f32 itself compiles to four instructions on sm_90 (it tests for inf and NaN).
__device__ __forceinline__ float to_tf32(float x) {
  return __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xffffe000u);
}

__device__ __forceinline__ void copy_async_16(void* dst, const void* src) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  ONEBIT_SM80_ONLY(asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(src) : "memory"));
}
// src-size 0 fills the 16 bytes with zeros without reading src.
__device__ __forceinline__ void copy_async_16_or_zero(void* dst, const void* src, bool copy) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  ONEBIT_SM80_ONLY(asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src), "r"(copy ? 16 : 0)
                         : "memory"));
}
__device__ __forceinline__ void copy_async_4(void* dst, const void* src) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  ONEBIT_SM80_ONLY(asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(s), "l"(src) : "memory"));
}
__device__ __forceinline__ void async_commit() {
  ONEBIT_SM80_ONLY(asm volatile("cp.async.commit_group;" ::: "memory"));
}
template <int N>
__device__ __forceinline__ void async_wait() {
  ONEBIT_SM80_ONLY(asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"));
}

// cudaLaunchKernelEx's configuration of a launch with the attributes attrs[0, count) (the fields in
// the runtime's order: grid, block, dynamic shared memory, stream, attributes and their count).
inline cudaLaunchConfig_t launch_config(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                                        cudaLaunchAttribute* attrs, unsigned count) {
  return cudaLaunchConfig_t{grid, block, shared_bytes, stream, attrs, count};
}

// Before sm_90 there is no early start: the launch is a plain one.
template <typename... Params, typename... Args>
inline cudaError_t launch_early(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                                cudaStream_t stream, Args... args) {
  int device = 0, major = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (e != cudaSuccess) return e;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  const cudaLaunchConfig_t config = launch_config(grid, block, shared_bytes, stream, &attr, major >= 9 ? 1 : 0);
  return cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...);
}
#define LAUNCH_EARLY(kernel, grid, block, shared_bytes, stream, ...) \
  launch_early(kernel, grid, block, shared_bytes, stream, __VA_ARGS__)

// griddepcontrol exists from sm_90 on; before that the dependent kernel starts after this one ends.
__device__ __forceinline__ void launch_dependents() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_for_primary() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// The barrier orders the block's writes before thread 0's fence, which publishes them with the
// increment.
__device__ __forceinline__ void ready_signal(int* counter) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(counter, 1);
  }
}
__device__ __forceinline__ void ready_wait(const int* counter, int count) {
  // All of it sm_80 only: __nanosleep is not even declared before sm_70.
  ONEBIT_SM80_ONLY(if (threadIdx.x == 0) for (int seen;;) {
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
    if (seen >= count) break;
    __nanosleep(256);
  });
  __syncthreads();
}

#endif

// cudaFuncSetAttribute(kernel, MaxDynamicSharedMemorySize, bytes) on the current device unless
// `done` (the caller's static, one per kernel) says it was set there already: the call costs host
// time on every launch otherwise, and a short kernel's launches come back to back. A carveout
// (0-100, percent of the SM's memory as shared memory) is set with it when given.
template <typename Kernel>
inline cudaError_t allow_dynamic_shared(Kernel* kernel, int bytes, std::atomic<uint64_t>& done, int carveout = -1) {
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return e;
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit != 0 && (done.load(std::memory_order_relaxed) & bit) != 0) return cudaSuccess;
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess && carveout >= 0)
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, carveout);
  if (e == cudaSuccess) done.fetch_or(bit, std::memory_order_relaxed);
  return e;
}
