// Runs this project's CUDA kernels on the CPU, so that CI (no GPU) checks the kernels' own source:
// indexing, shared-memory layout, barriers, launch limits. Each block's threads run as fibers
// on one OS thread, switching at __syncthreads() and at warp-wide operations; blocks run one
// after another, except the blocks of a thread-block cluster (launch's cluster_x), which run
// together, each with its own shared memory (the static section is swapped between them): in the
// shuffled order their threads interleave; in the forward and reverse orders each block runs in
// turn as far as it can (to a cluster barrier or its end), so that a block which uses a
// __syncthreads where the cluster's barrier was needed reads its neighbours' memory unwritten.
// Kernels are compiled unchanged by the host compiler with this directory first on the include
// path (its cuda_runtime.h and cuda_fp16.h lead here), provided they launch through LAUNCH (or
// LAUNCH_CLUSTER), declare dynamic shared memory through DYNAMIC_SHARED and reach tensor cores
// through device.cuh (../device.cuh).
//
// What it checks while running: a barrier reached by only some threads of a block, or reached at
// different places; a named barrier that too few threads reach; a warp-wide operation not reached by the whole warp; a launch beyond CUDA's
// limits (block size, grid y/z, dynamic shared memory above the default 48 KB without the
// cudaFuncAttributeMaxDynamicSharedMemorySize opt-in, or above 227 KB; clusters of more than 8
// blocks or not dividing grid x); a cluster barrier that some threads of the cluster never reach,
// or that waits for a block barrier; cluster_map_shared outside the dynamic shared memory.
// Running the threads in another order (set_order) and comparing results exposes most
// shared-memory races. Dynamic shared memory starts as NaN, and so do static __shared__ arrays, at every block (they are placed
// in one linker section that is filled with 0xff bytes). That needs clang, which make test builds
// with: GCC keeps the arrays of template functions out of the section (cuda_emu_test fails then)
// and refuses a __shared__ array in a non-template inline function beside another ("section type
// conflict"). Floating-point results differ from the GPU's in the last bits
// (host expf, no fused multiply-add unless the compiler contracts). Asynchronous copies (cp.async)
// land at the wait that covers them, or at once in the shuffled order (copy_async below).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>

#define CUDA_EMU 1

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};

using cudaError_t = int;
constexpr cudaError_t cudaSuccess = 0;
constexpr cudaError_t cudaErrorInvalidValue = 1;
constexpr cudaError_t cudaErrorInvalidConfiguration = 9;
constexpr cudaError_t cudaErrorLaunchFailure = 719;
using cudaStream_t = struct CUstream_emu*;
enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9
};
enum cudaSharedCarveout { cudaSharedmemCarveoutMaxShared = 100 };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };

namespace cuda_emu {

struct Index {
  unsigned x, y, z;
};
extern Index thread_index, block_index;
extern dim3 block_dim, grid_dim;

enum class Order { kForward, kReverse, kShuffled };
// The order in which each round runs a block's threads (and a cluster's blocks: by rank, reversed,
// or all threads of the cluster shuffled together); kShuffled draws a fresh order per round.
void set_order(Order order, uint64_t seed = 1);

// What went wrong so far, as one line per problem (empty when nothing did).
const std::string& problems();
void clear_problems();

cudaError_t set_max_dynamic_shared(const void* kernel, int bytes);
// Runs the grid; `body` runs one thread of one block (thread_index and block_index set). With
// cluster_x > 1 the grid is cut along x into clusters of that many blocks (1 to 8, dividing grid.x,
// or the launch is refused), and the blocks of each cluster run together.
cudaError_t launch(const void* kernel, dim3 grid, dim3 block, size_t dynamic_shared, const std::function<void()>& body,
                   unsigned cluster_x = 1);
cudaError_t take_last_error();

// A barrier; __syncthreads() passes its place in the source, which tells barriers apart.
void syncthreads(const char* file, int line);
// Named barriers (bar.sync / bar.arrive with ids 1 to 15): a phase completes when `count`
// threads (whole warps) have arrived, waiting (sync) or not (arrive); the waiting ones then run
// on. Reported: a bad id or count, two counts in one phase, and threads left waiting at one.
void named_barrier_sync(int id, int count);
void named_barrier_arrive(int id, int count);
void* dynamic_shared();

// Thread-block clusters. A cluster barrier waits for every thread of every block of the cluster;
// threads left waiting at it by threads that ended, or by threads of their block at a
// __syncthreads, are reported. cluster_map_shared gives the same byte of block `rank`'s dynamic
// shared memory; an address outside the block's own dynamic shared memory (a static __shared__
// one included) or a rank outside the cluster is reported (and p comes back). A block's dynamic
// shared memory turns NaN when its last thread ends, as its successor on the GPU may overwrite
// it: reads from a block of the cluster that already ended (no cluster_sync before the end) show.
unsigned cluster_rank();
unsigned cluster_size();
void cluster_sync();
void* cluster_map_shared(const void* p, int rank);

// Warp-wide operations: every thread of the warp must arrive (wgmma_tf32: of the warpgroup).
void syncwarp();
float shfl_xor(float v, int mask);
int shfl_xor(int v, int mask);
// __shfl_sync (from lane src % 32), __shfl_up_sync (lanes below delta keep their own) and
// __ballot_sync, over the whole warp.
int shfl_idx(int v, int src);
int shfl_up(int v, unsigned delta);
uint32_t ballot(bool pred);
// mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 with the PTX ISA's fragment layout.
void mma_s8_m16n8k32(int (&d)[4], int a0, int a1, int a2, int a3, int b0, int b1, const int (&c)[4]);

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: the operands' low 13 mantissa bits are
// ignored, as the hardware does; products are exact in float, summed in k order onto C.
void mma_tf32_m16n8k8(float (&d)[4], float a0, float a1, float a2, float a3, float b0, float b1, const float (&c)[4]);
// wgmma.mma_async.sync.aligned.m64nNk8.f32.tf32.tf32 with both operands in dynamic shared memory:
// D (64 x n) = A (64 x 8) B^T (B given as n rows of 8), plus D when `accumulate`. A and B are
// K-major without swizzle: 8-row core matrices of 16-byte rows, the two of a k step `lbo` bytes
// apart and the 8-row groups `sbo` apart, as the descriptors (shared_descriptor) say. Every thread
// of a warpgroup (four warps from a multiple of four) calls it with the same descriptors; thread
// t's d[i] is row 16 (t / 32 % 4) + t % 32 / 4 + 8 (i / 2 % 2), column 8 (i / 4) + 2 (t % 4) +
// i % 2. Operands are read as TF32 (low bits dropped) and summed in k order in float. The last
// thread of the warpgroup to arrive computes it at once, before the rest of the block runs on, so
// operands other threads store after it (a missing barrier) are read unwritten. The result lands
// in d at the wgmma_wait that covers it (d reads NaN until then), and it is reported when a
// thread's wgmma has no wgmma_fence since its last wait, when an operand changes in shared memory
// before the wait, and when a thread ends with a wgmma it never waited for.
uint64_t shared_descriptor(const void* at, uint32_t lbo, uint32_t sbo);
void wgmma_tf32(float* d, int n, uint64_t a, uint64_t b, bool accumulate);
void wgmma_fence();
void wgmma_commit();
void wgmma_wait(int pending);  // until at most `pending` committed groups are in flight

// cvt.rna.tf32.f32's rounding: 10 mantissa bits, ties away from zero (device.cuh's integer steps).
float round_to_tf32(float x);

float half_bits_to_float(uint16_t h);

// cp.async: a copy from global to shared memory that may land any time between its issue and the
// wait that covers it. Copies are grouped by commit; wait(n) completes all but the n newest
// groups. In the forward and reverse orders a copy lands at that wait, so a read before the wait
// sees what was there before (dynamic shared memory starts as NaN); in the shuffled order it
// lands at once, so a copy issued while other threads still read its destination shows too.
// Both need the results of the orders compared. A copy at an address not aligned to its size is
// reported, as the GPU would fault. With read_src false the copy lands zeros instead (cp.async
// with a source size of 0); src must still be aligned.
void copy_async(void* dst, const void* src, int bytes, bool read_src = true);
void copy_async_commit();
void copy_async_wait(int pending);

// Hand-over between blocks through a counter (device.cuh's ready_signal / ready_wait): blocks and
// kernels run one after another here, so a counter below its count at a wait is reported: the
// producer would never have signalled. Since the producer has always finished by then, a signal
// given before the writes it stands for is not caught here.
void ready_signal(int* counter);
void ready_wait(const int* counter, int count);

}  // namespace cuda_emu

#define threadIdx (::cuda_emu::thread_index)
#define blockIdx (::cuda_emu::block_index)
#define blockDim (::cuda_emu::block_dim)
#define gridDim (::cuda_emu::grid_dim)
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ __attribute__((section("cuda_emu_shared"))) static
#define __syncthreads() ::cuda_emu::syncthreads(__FILE__, __LINE__)

template <typename T>
cudaError_t cudaFuncSetAttribute(T* kernel, cudaFuncAttribute attr, int value) {
  // The carveout is a hint about the SM's L1 / shared split: nothing to emulate.
  if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return value >= 0 && value <= 100 ? cudaSuccess : cudaErrorInvalidValue;
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaErrorInvalidValue;
  return ::cuda_emu::set_max_dynamic_shared(reinterpret_cast<const void*>(kernel), value);
}
inline cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
// A few SMs: kernels that size their grid by the SM count then loop over their work.
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int) {
  if (attr != cudaDevAttrMultiProcessorCount) return cudaErrorInvalidValue;
  *value = 3;
  return cudaSuccess;
}
// Kernels run when launched, so a memset on a stream is done at once.
inline cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t = nullptr) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaGetLastError() { return ::cuda_emu::take_last_error(); }
const char* cudaGetErrorString(cudaError_t e);

// The device functions our kernels use.
template <typename T>
inline T min(T a, T b) { return b < a ? b : a; }
template <typename T>
inline T max(T a, T b) { return a < b ? b : a; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline int __vsubss4(int a, int b) {
  int r = 0;
  for (int i = 0; i < 4; ++i) {
    int d = static_cast<int8_t>(a >> (8 * i)) - static_cast<int8_t>(b >> (8 * i));
    d = d < -128 ? -128 : d > 127 ? 127 : d;
    r |= (d & 0xff) << (8 * i);
  }
  return r;
}
// Byte i of the result is byte (s >> 4i) & 7 of the eight bytes y:x (x the low four).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t bytes = x | (static_cast<uint64_t>(y) << 32);
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<unsigned>((bytes >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return r;
}
inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i) c += static_cast<int8_t>(a >> (8 * i)) * static_cast<int8_t>(b >> (8 * i));
  return c;
}
inline void __syncwarp(unsigned = 0xffffffffu) { ::cuda_emu::syncwarp(); }
inline float __shfl_xor_sync(unsigned, float v, int mask) { return ::cuda_emu::shfl_xor(v, mask); }
inline int __shfl_xor_sync(unsigned, int v, int mask) { return ::cuda_emu::shfl_xor(v, mask); }
inline int __shfl_sync(unsigned, int v, int src) { return ::cuda_emu::shfl_idx(v, src); }
inline unsigned __shfl_sync(unsigned, unsigned v, int src) {
  return static_cast<unsigned>(::cuda_emu::shfl_idx(static_cast<int>(v), src));
}
inline float __shfl_sync(unsigned m, float v, int src) {
  unsigned u;
  std::memcpy(&u, &v, 4);
  u = __shfl_sync(m, u, src);
  std::memcpy(&v, &u, 4);
  return v;
}
// 64-bit values move as two 32-bit halves, as the GPU's shfl does them: move32 moves one half.
template <typename T, typename Move32>
inline T by_halves(T v, Move32 move32) {
  const uint64_t bits = static_cast<uint64_t>(v);
  const uint64_t lo = static_cast<uint32_t>(move32(static_cast<int>(bits & 0xffffffffu)));
  const uint64_t hi = static_cast<uint32_t>(move32(static_cast<int>(bits >> 32)));
  return static_cast<T>(lo | (hi << 32));
}
template <typename T, typename = std::enable_if_t<std::is_integral_v<T> && sizeof(T) == 8>>
inline T __shfl_sync(unsigned, T v, int src) {
  return by_halves(v, [src](int half) { return ::cuda_emu::shfl_idx(half, src); });
}
inline int __shfl_up_sync(unsigned, int v, unsigned delta) { return ::cuda_emu::shfl_up(v, delta); }
template <typename T, typename = std::enable_if_t<std::is_integral_v<T> && sizeof(T) == 8>>
inline T __shfl_up_sync(unsigned, T v, unsigned delta) {
  return by_halves(v, [delta](int half) { return ::cuda_emu::shfl_up(half, delta); });
}
inline unsigned __ballot_sync(unsigned, bool pred) { return ::cuda_emu::ballot(pred); }
inline int __ffs(unsigned x) { return __builtin_ffs(static_cast<int>(x)); }
inline unsigned __float_as_uint(float x) {
  unsigned u;
  std::memcpy(&u, &x, 4);
  return u;
}
// A double moves as its two 32-bit halves, as on the GPU.
inline double __shfl_xor_sync(unsigned m, double v, int mask) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  const uint32_t lo = static_cast<uint32_t>(__shfl_xor_sync(m, static_cast<int>(bits & 0xffffffffu), mask));
  const uint32_t hi = static_cast<uint32_t>(__shfl_xor_sync(m, static_cast<int>(bits >> 32), mask));
  bits = uint64_t{hi} << 32 | lo;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

struct __half {
  uint16_t bits;
};
inline __half __ushort_as_half(uint16_t bits) { return {bits}; }
inline float __half2float(__half h) { return ::cuda_emu::half_bits_to_float(h.bits); }
