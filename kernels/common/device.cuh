// What a kernel package's CUDA source uses beyond plain CUDA C++, so the same source also runs
// under the CPU emulator (emu/cuda_emu.h):
//   DYNAMIC_SHARED(T, name)   the block's dynamic shared memory as T* name
//   LAUNCH(kernel, grid, block, shared_bytes, stream, args...)   kernel<<<...>>>(args...)
//   mma_s8_m16n8k32(d, a0..a3, b0, b1, c)   the int8 tensor-core instruction (PTX fragment layout)
//   mma_tf32_m16n8k8(d, a0..a3, b0, b1, c)  the TF32 one: operands are floats already rounded to
//                                           TF32 (to_tf32), accumulation in float
//   to_tf32(x)                              x rounded to TF32 (cvt.rna.tf32.f32), as a float
#pragma once

#include <cuda_runtime.h>

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

#else

#define DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#define LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
  kernel<<<grid, block, shared_bytes, stream>>>(__VA_ARGS__)

__device__ __forceinline__ void mma_s8_m16n8k32(int (&d)[4], int a0, int a1, int a2, int a3, int b0, int b1,
                                                const int (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
}

__device__ __forceinline__ void mma_tf32_m16n8k8(float (&d)[4], float a0, float a1, float a2, float a3, float b0,
                                                 float b1, const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(__float_as_uint(a0)), "r"(__float_as_uint(a1)), "r"(__float_as_uint(a2)), "r"(__float_as_uint(a3)),
        "r"(__float_as_uint(b0)), "r"(__float_as_uint(b1)), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

__device__ __forceinline__ float to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

#endif
