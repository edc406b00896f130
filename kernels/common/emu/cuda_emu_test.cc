// The emulator's own checks: what it runs is what CUDA would compute, and what it must catch it
// catches. Small kernels written in CUDA C++ and run through the emulator.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_emu.h"
#include "device.cuh"
#include "device_sm90.cuh"
#include "cluster_rotate.cuh"
#include "named_pipeline.cuh"
#include "wgmma_pair.cuh"

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what.c_str());
    ++failures;
  }
}

bool problem_mentions(const char* text) { return cuda_emu::problems().find(text) != std::string::npos; }

// Hand-over between launches: `produce` writes a value per block and signals; `consume` waits
// for `count` signals and copies the values.
__global__ void produce(int* values, int* counter) {
  if (threadIdx.x == 0) values[blockIdx.x] = 10 + static_cast<int>(blockIdx.x);
  ready_signal(counter);
}
__global__ void consume(const int* values, const int* counter, int count, int* out) {
  ready_wait(counter, count);
  if (threadIdx.x == 0) out[blockIdx.x] = values[blockIdx.x];
}

// Each thread writes its index plus a salt, the block waits, then each reads its neighbour's:
// right only with the barrier, in every order.
__global__ void rotate(int* out, bool with_barrier, int salt) {
  __shared__ int cell[64];
  cell[threadIdx.x] = static_cast<int>(threadIdx.x) + salt;
  if (with_barrier) __syncthreads();
  out[blockIdx.x * 64 + threadIdx.x] = cell[(threadIdx.x + 1) % 64] - salt;
}

// The same within each warp of a 64-thread block: each lane reads the next lane of its own warp,
// which __syncwarp orders.
__global__ void rotate_in_warp(int* out, bool with_sync, int salt) {
  __shared__ int lanes[64];
  lanes[threadIdx.x] = static_cast<int>(threadIdx.x) + salt;
  if (with_sync) __syncwarp();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  out[threadIdx.x] = lanes[warp * 32 + (lane + 1) % 32] - salt;
}

// Only the first warp reaches a named barrier counted for two.
__global__ void named_half() {
  if (threadIdx.x < 32) named_barrier_sync(3, 64);
}

// Block 0 writes its static shared cell and reads it back; block 1 only reads: on a GPU it finds
// whatever was there, here NaN, never block 0's value.
__global__ void stale_static(float* out) {
  __shared__ float cell[1];
  if (blockIdx.x == 0) cell[0] = 5.0f;
  out[blockIdx.x] = cell[0];
}

// The same in a template, where every real kernel keeps its static shared arrays (GCC leaves
// these out of the section; clang does not).
template <int kCells>
__global__ void stale_static_template(float* out) {
  __shared__ float cell[kCells];
  if (blockIdx.x == 0) cell[0] = 5.0f;
  out[blockIdx.x] = cell[0];
}

__global__ void divergent(int* out) {
  if (threadIdx.x < 32) __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void two_barriers(int* out) {
  if (threadIdx.x % 2) {
    __syncthreads();
    out[threadIdx.x] = 1;
  } else {
    out[threadIdx.x] = 2;
    __syncthreads();
    out[threadIdx.x] += 3;
  }
}

__global__ void dynamic(float* out) {
  DYNAMIC_SHARED(float, buf);
  buf[threadIdx.x] = 2.0f * threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = buf[31 - threadIdx.x];
}

__global__ void reduce(float* out) {
  float v = static_cast<float>(threadIdx.x);
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  out[threadIdx.x] = v;
}

// Values no float holds exactly: the halves must both arrive.
__global__ void reduce_double(double* out) {
  double v = 1.0 + threadIdx.x * 1e-12;
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  out[threadIdx.x] = v;
}

// Lane l reads lane 31 - l, the lane below it (lane 0 its own), and which lanes are odd; a
// 64-bit value whose halves differ comes through whole.
__global__ void indexed_shuffles(uint64_t* from, uint64_t* up, unsigned* odd) {
  const unsigned l = threadIdx.x % 32;
  const uint64_t v = (uint64_t{l} << 40) | (0xabc00u + l);
  from[threadIdx.x] = __shfl_sync(0xffffffffu, v, static_cast<int>(31 - l));
  up[threadIdx.x] = __shfl_up_sync(0xffffffffu, v, 1);
  odd[threadIdx.x] = __ballot_sync(0xffffffffu, l % 2 == 1);
}

__global__ void half_warp_shuffle(float* out) {
  float v = 1.0f;
  if (threadIdx.x < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);
  out[threadIdx.x] = v;
}

__global__ void mma(const int8_t* a, const int8_t* b, int* d) {
  const int l = threadIdx.x, g = l / 4, t = l % 4;
  auto pack = [](const int8_t* p, int stride) {
    int r = 0;
    for (int i = 0; i < 4; ++i) r |= (static_cast<int>(p[i * stride]) & 0xff) << (8 * i);
    return r;
  };
  const int c[4] = {1, 2, 3, 4};
  int out[4];
  mma_s8_m16n8k32(out, pack(a + g * 32 + 4 * t, 1), pack(a + (g + 8) * 32 + 4 * t, 1), pack(a + g * 32 + 16 + 4 * t, 1),
                  pack(a + (g + 8) * 32 + 16 + 4 * t, 1), pack(b + (4 * t) * 8 + g, 8), pack(b + (16 + 4 * t) * 8 + g, 8), c);
  d[g * 8 + 2 * t] = out[0];
  d[g * 8 + 2 * t + 1] = out[1];
  d[(g + 8) * 8 + 2 * t] = out[2];
  d[(g + 8) * 8 + 2 * t + 1] = out[3];
}

__global__ void mma_tf32(const float* a, const float* b, float* d) {
  const int l = threadIdx.x, g = l / 4, t = l % 4;
  const float c[4] = {0.5f, 1.5f, 2.5f, 3.5f};
  float out[4];
  mma_tf32_m16n8k8(out, a[g * 8 + t], a[(g + 8) * 8 + t], a[g * 8 + t + 4], a[(g + 8) * 8 + t + 4], b[t * 8 + g],
                   b[(t + 4) * 8 + g], c);
  d[g * 8 + 2 * t] = out[0];
  d[g * 8 + 2 * t + 1] = out[1];
  d[(g + 8) * 8 + 2 * t] = out[2];
  d[(g + 8) * 8 + 2 * t + 1] = out[3];
}

// Two groups of asynchronous copies into shared memory; each thread reads its own cells after
// waiting for both groups (wait_all) or for all but the newest.
__global__ void async_copies(const float* src, float* out, bool wait_all) {
  DYNAMIC_SHARED(float, cells);
  copy_async_4(&cells[threadIdx.x], &src[threadIdx.x]);
  async_commit();
  copy_async_16(&cells[32 + 4 * threadIdx.x], &src[32 + 4 * threadIdx.x]);
  async_commit();
  if (wait_all) async_wait<0>();
  else async_wait<1>();
  out[threadIdx.x] = cells[threadIdx.x];
  out[32 + threadIdx.x] = cells[32 + 4 * threadIdx.x];
}

// Even threads copy their 16 bytes, odd ones zero-fill theirs; each reads its first and last cell,
// after the wait or before it.
__global__ void zero_fill_copies(const float* src, float* out, bool wait) {
  DYNAMIC_SHARED(float, cells);
  copy_async_16_or_zero(&cells[4 * threadIdx.x], &src[4 * threadIdx.x], threadIdx.x % 2 == 0);
  async_commit();
  if (wait) async_wait<0>();
  out[threadIdx.x] = cells[4 * threadIdx.x];
  out[32 + threadIdx.x] = cells[4 * threadIdx.x + 3];
  async_wait<0>();
}

// A bug on purpose: each thread copies into its neighbour's cell before the barrier after which
// the neighbour has read it. Landing at the wait (after that barrier) hides it; landing at issue,
// as the GPU may, shows it.
__global__ void early_copy(const float* src, float* out) {
  DYNAMIC_SHARED(float, cells);
  cells[threadIdx.x] = -1.0f;
  __syncthreads();
  copy_async_4(&cells[(threadIdx.x + 1) % 32], &src[threadIdx.x]);
  async_commit();
  const float seen = cells[threadIdx.x];
  __syncthreads();
  async_wait<0>();
  out[threadIdx.x] = seen;
}

__global__ void misaligned_copy(const float* src) {
  DYNAMIC_SHARED(float4, cells);
  copy_async_16(&cells[threadIdx.x], src + 1);
  async_commit();
  async_wait<0>();
}


// Maps a static __shared__ address, or a dynamic one to a rank past the cluster.
__global__ void cluster_map_wrong(int* out, bool static_address) {
  DYNAMIC_SHARED(int, cells);
  __shared__ int own[32];
  cells[threadIdx.x] = own[threadIdx.x] = 1;
  cluster_sync();
  const int* p = static_cast<const int*>(static_address ? cluster_map_shared(own, 0) : cluster_map_shared(cells, 2));
  out[threadIdx.x] = p[threadIdx.x];
  cluster_sync();
}

// Rank 1 ends without the cluster barrier rank 0 waits at (early_exit), or half of each block waits
// at the cluster barrier while the other half waits at the block's.
__global__ void cluster_stuck(int* out, bool early_exit) {
  if (early_exit) {
    if (cluster_rank() == 0) cluster_sync();
  } else if (threadIdx.x < 32) {
    cluster_sync();
  } else {
    __syncthreads();
  }
  out[64 * blockIdx.x + threadIdx.x] = 1;
}

}  // namespace

int main() {
  const cuda_emu::Order orders[] = {cuda_emu::Order::kForward, cuda_emu::Order::kReverse, cuda_emu::Order::kShuffled};
  for (cuda_emu::Order order : orders) {
    cuda_emu::set_order(order, 3);
    std::vector<int> out(3 * 64, -1);
    LAUNCH(rotate, 3, 64, 0, nullptr, out.data(), true, 1000);
    bool right = true;
    for (int i = 0; i < 3 * 64; ++i) right = right && out[i] == (i % 64 + 1) % 64;
    expect(right, "a barrier orders shared memory in every thread order");
  }
  // Without the barrier the forward order happens to work and the reverse does not: a race shows
  // as a difference between orders.
  std::vector<int> fwd(64), rev(64);
  cuda_emu::set_order(cuda_emu::Order::kForward);
  LAUNCH(rotate, 1, 64, 0, nullptr, fwd.data(), false, 2000);
  cuda_emu::set_order(cuda_emu::Order::kReverse);
  LAUNCH(rotate, 1, 64, 0, nullptr, rev.data(), false, 3000);
  expect(fwd != rev, "a missing barrier makes the result depend on the thread order");
  cuda_emu::set_order(cuda_emu::Order::kForward);

  std::vector<float> stale(2, 0.0f);
  LAUNCH(stale_static, 2, 1, 0, nullptr, stale.data());
  expect(stale[0] == 5.0f && std::isnan(stale[1]), "static shared memory starts as NaN in every block");
  std::vector<float> stale_t(2, 0.0f);
  LAUNCH(stale_static_template<2>, 2, 1, 0, nullptr, stale_t.data());
  expect(stale_t[0] == 5.0f && std::isnan(stale_t[1]), "... in a template's static shared memory too");

  for (cuda_emu::Order order : orders) {
    cuda_emu::set_order(order, 5);
    std::vector<int> out(64, -1);
    cuda_emu::clear_problems();
    LAUNCH(rotate_in_warp, 1, 64, 0, nullptr, out.data(), true, 4000);
    bool right = cuda_emu::problems().empty();
    for (int i = 0; i < 64; ++i) right = right && out[i] == (i / 32) * 32 + (i % 32 + 1) % 32;
    expect(right, "__syncwarp orders shared memory within a warp in every thread order");
  }
  cuda_emu::set_order(cuda_emu::Order::kForward);
  LAUNCH(rotate_in_warp, 1, 64, 0, nullptr, fwd.data(), false, 5000);
  cuda_emu::set_order(cuda_emu::Order::kReverse);
  LAUNCH(rotate_in_warp, 1, 64, 0, nullptr, rev.data(), false, 6000);
  expect(fwd != rev, "a missing __syncwarp makes the result depend on the thread order");
  cuda_emu::set_order(cuda_emu::Order::kForward);

  for (cuda_emu::Order order : orders) {
    cuda_emu::set_order(order, 9);
    std::vector<int> out(64, -1);
    cuda_emu::clear_problems();
    LAUNCH(named_pipeline, 1, 96, 0, nullptr, out.data(), true, 96);
    expect(cuda_emu::problems().empty() && named_pipeline_right(out),
           "named barriers hand a buffer between warps in every thread order");
  }
  cuda_emu::set_order(cuda_emu::Order::kForward);
  LAUNCH(named_pipeline, 1, 96, 0, nullptr, fwd.data(), false, 96);
  cuda_emu::set_order(cuda_emu::Order::kReverse);
  LAUNCH(named_pipeline, 1, 96, 0, nullptr, rev.data(), false, 96);
  expect(!named_pipeline_right(fwd) || !named_pipeline_right(rev),
         "without the wait on the filled buffer the consumers read it unwritten");
  cuda_emu::set_order(cuda_emu::Order::kForward);
  cuda_emu::clear_problems();
  LAUNCH(named_pipeline, 1, 96, 0, nullptr, fwd.data(), true, 128);
  expect(problem_mentions("named barrier 1 with a count of 128") && cudaGetLastError() != cudaSuccess,
         "a named barrier counted for more threads than the block has is reported");
  cuda_emu::clear_problems();
  LAUNCH(named_half, 1, 64, 0, nullptr);
  expect(problem_mentions("too few threads reach") && cudaGetLastError() != cudaSuccess,
         "a named barrier that too few threads reach is reported");

  std::vector<int> ones(64);
  cuda_emu::clear_problems();
  LAUNCH(divergent, 1, 64, 0, nullptr, ones.data());
  expect(problem_mentions("never reach") && cudaGetLastError() != cudaSuccess, "a barrier half the block skips is reported");
  cuda_emu::clear_problems();
  LAUNCH(two_barriers, 1, 64, 0, nullptr, ones.data());
  expect(problem_mentions("different barriers"), "two different barriers are reported");

  std::vector<float> f(32);
  cuda_emu::clear_problems();
  LAUNCH(dynamic, 1, 32, 64 * 1024, nullptr, f.data());
  expect(problem_mentions("dynamic shared memory") && cudaGetLastError() != cudaSuccess,
         "64 KB of dynamic shared memory without the opt-in is refused");
  cuda_emu::clear_problems();
  expect(cudaFuncSetAttribute(dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024) == cudaSuccess, "opt-in");
  LAUNCH(dynamic, 1, 32, 64 * 1024, nullptr, f.data());
  expect(cuda_emu::problems().empty() && cudaGetLastError() == cudaSuccess && f[0] == 62.0f && f[31] == 0.0f,
         "with the opt-in the launch runs");
  expect(cudaFuncSetAttribute(dynamic, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024) != cudaSuccess,
         "more than 227 KB is refused");
  cuda_emu::clear_problems();
  LAUNCH(rotate, dim3(1, 70000), 64, 0, nullptr, ones.data(), true, 0);
  expect(problem_mentions("grid"), "a grid y beyond 65535 is refused");

  std::vector<float> sums(64);
  cuda_emu::clear_problems();
  LAUNCH(reduce, 1, 64, 0, nullptr, sums.data());
  expect(sums[0] == 496.0f && sums[31] == 496.0f && sums[32] == 32 * 32 + 496.0f && cuda_emu::problems().empty(),
         "a butterfly of shuffles sums each warp");
  std::vector<double> dsums(32);
  cuda_emu::clear_problems();
  LAUNCH(reduce_double, 1, 32, 0, nullptr, dsums.data());
  expect(std::fabs(dsums[0] - (32.0 + 496e-12)) < 1e-14 && std::fabs(dsums[31] - dsums[0]) < 1e-14 &&
             cuda_emu::problems().empty(),
         "doubles shuffle whole");
  std::vector<uint64_t> from(64), up(64);
  std::vector<unsigned> odd(64);
  cuda_emu::clear_problems();
  LAUNCH(indexed_shuffles, 1, 64, 0, nullptr, from.data(), up.data(), odd.data());
  bool shuffled = cuda_emu::problems().empty();
  for (unsigned t = 0; t < 64; ++t) {
    const unsigned l = t % 32, below = l > 0 ? l - 1 : 0;
    shuffled = shuffled && from[t] == ((uint64_t{31 - l} << 40) | (0xabc00u + 31 - l)) &&
               up[t] == ((uint64_t{below} << 40) | (0xabc00u + below)) && odd[t] == 0xaaaaaaaau;
  }
  expect(shuffled, "__shfl_sync reads the lane named, __shfl_up_sync the lane below (lane 0 its own), __ballot_sync "
                   "gathers the warp");
  cuda_emu::clear_problems();
  LAUNCH(half_warp_shuffle, 1, 32, 0, nullptr, sums.data());
  expect(problem_mentions("warp-wide"), "a shuffle half the warp skips is reported");

  int8_t a[16 * 32], b[32 * 8];
  for (int i = 0; i < 16 * 32; ++i) a[i] = static_cast<int8_t>((i * 37) % 256 - 128);
  for (int i = 0; i < 32 * 8; ++i) b[i] = static_cast<int8_t>((i * 91 + 5) % 256 - 128);
  int d[16 * 8];
  cuda_emu::clear_problems();
  LAUNCH(mma, 1, 32, 0, nullptr, a, b, d);
  bool exact = cuda_emu::problems().empty();
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 8; ++c) {
      int want = 1 + (c % 2) + 2 * (r >= 8);
      for (int k = 0; k < 32; ++k) want += a[r * 32 + k] * b[k * 8 + c];
      exact = exact && d[r * 8 + c] == want;
    }
  expect(exact, "mma.m16n8k32 gives A B + C");

  // Small integers are exact in TF32, so A B + C is exact too.
  float fa[16 * 8], fb[8 * 8], fd[16 * 8];
  for (int i = 0; i < 16 * 8; ++i) fa[i] = static_cast<float>((i * 7) % 19 - 9);
  for (int i = 0; i < 8 * 8; ++i) fb[i] = static_cast<float>((i * 5) % 13 - 6);
  cuda_emu::clear_problems();
  LAUNCH(mma_tf32, 1, 32, 0, nullptr, fa, fb, fd);
  bool tf32_exact = cuda_emu::problems().empty();
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 8; ++c) {
      float want = 0.5f + (c % 2) + 2.0f * (r >= 8);
      for (int k = 0; k < 8; ++k) want += fa[r * 8 + k] * fb[k * 8 + c];
      tf32_exact = tf32_exact && fd[r * 8 + c] == want;
    }
  expect(tf32_exact, "mma.m16n8k8 tf32 gives A B + C");
  // 1 + 2^-11 is a tie between two TF32 values: away from zero. 1 + 2^-10 + 2^-12 rounds down.
  expect(to_tf32(1.0f + 0x1p-11f) == 1.0f + 0x1p-10f && to_tf32(-(1.0f + 0x1p-11f)) == -(1.0f + 0x1p-10f) &&
             to_tf32(1.0f + 0x1p-10f + 0x1p-12f) == 1.0f + 0x1p-10f,
         "cvt.rna.tf32 rounds to nearest, ties away");

  expect(__half2float(__ushort_as_half(0x3c00)) == 1.0f && __half2float(__ushort_as_half(0xc000)) == -2.0f &&
             __half2float(__ushort_as_half(0x0001)) == 5.9604644775390625e-8f,
         "half conversion");
  expect(__vsubss4(0x80017f08, 0x01ff8108) == static_cast<int>(0x80027f00), "__vsubss4 saturates per byte");
  expect(__dp4a(0x01020304, 0x01010101, 10) == 20, "__dp4a");
  expect(__byte_perm(0x33221100u, 0x77665544u, 0x5432) == 0x55443322u &&
             __byte_perm(0x33221100u, 0x77665544u, 0x0127) == 0x00112277u,
         "__byte_perm picks bytes of y:x");

  std::vector<float> src(32 * 5), got(64);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
  LAUNCH(async_copies, 1, 32, 160 * sizeof(float), nullptr, src.data(), got.data(), true);
  expect(got[5] == 5.0f && got[32 + 5] == 32.0f + 20.0f, "cp.async copies land at the wait");
  LAUNCH(async_copies, 1, 32, 160 * sizeof(float), nullptr, src.data(), got.data(), false);
  expect(got[5] == 5.0f && std::isnan(got[32 + 5]), "a copy of a group still in flight has not landed");

  cuda_emu::set_order(cuda_emu::Order::kForward);
  LAUNCH(zero_fill_copies, 1, 32, 128 * sizeof(float), nullptr, src.data(), got.data(), true);
  expect(got[4] == 16.0f && got[32 + 4] == 19.0f && got[5] == 0.0f && got[32 + 5] == 0.0f,
         "copy_async_16_or_zero copies, or fills with zeros");
  LAUNCH(zero_fill_copies, 1, 32, 128 * sizeof(float), nullptr, src.data(), got.data(), false);
  expect(std::isnan(got[4]) && std::isnan(got[5]), "its zeros land at the wait, as copies do");

  std::vector<float> seen(32);
  LAUNCH(early_copy, 1, 32, 32 * sizeof(float), nullptr, src.data(), seen.data());
  bool all_old = true;
  for (float v : seen) all_old = all_old && v == -1.0f;
  cuda_emu::set_order(cuda_emu::Order::kShuffled, 5);
  LAUNCH(early_copy, 1, 32, 32 * sizeof(float), nullptr, src.data(), seen.data());
  bool some_new = false;
  for (float v : seen) some_new = some_new || v != -1.0f;
  expect(all_old && some_new, "a copy issued before the barrier that frees its destination shows in the shuffled order");
  cuda_emu::set_order(cuda_emu::Order::kForward);
  cuda_emu::clear_problems();
  LAUNCH(misaligned_copy, 1, 4, 4 * sizeof(float4), nullptr, src.data());
  expect(problem_mentions("not aligned"), "a 16-byte cp.async from a 4-byte-aligned address is reported");
  cuda_emu::clear_problems();

  {
    int values[3] = {}, out[3] = {}, counter = 0;
    LAUNCH(produce, 3, 64, 0, nullptr, values, &counter);
    LAUNCH_EARLY(consume, 3, 64, 0, nullptr, values, &counter, 3, out);
    expect(counter == 3 && out[2] == 12 && cuda_emu::problems().empty(), "ready_wait passes once every block signalled");
    LAUNCH_EARLY(consume, 3, 64, 0, nullptr, values, &counter, 4, out);
    (void)cudaGetLastError();
    expect(problem_mentions("no block left to run can raise"), "a wait for a signal that never comes is reported");
    cuda_emu::clear_problems();
  }

  {
    WgmmaPair p;
    auto run = [&](int mode) {
      LAUNCH(wgmma_pair, 1, 256, kWgmmaPairBytes, nullptr, p.a.data(), p.b0.data(), p.b1.data(), p.d0.data(),
             p.d1.data(), mode);
    };
    for (cuda_emu::Order order : orders) {
      cuda_emu::set_order(order, 9);
      cuda_emu::clear_problems();
      run(0);
      expect(cuda_emu::problems().empty() && p.right(),
             "wgmma m64n32k8 and m64n16k8 give A B^T in the documented register layout, two warpgroups at once");
    }
    cuda_emu::set_order(cuda_emu::Order::kForward);
    cuda_emu::clear_problems();
    run(1);
    expect(problem_mentions("different operands"), "a warpgroup whose threads give one wgmma different descriptors is reported");
    cuda_emu::clear_problems();
    run(2);
    expect(problem_mentions("warp-wide"), "a wgmma one warp of the warpgroup skips is reported");
    cuda_emu::clear_problems();
    run(3);
    expect(problem_mentions("outside the dynamic shared memory"), "a wgmma operand outside shared memory is reported");
    cuda_emu::clear_problems();
    // The warpgroup's last thread computes the wgmma before the other warpgroup runs on, so it
    // reads operands that warpgroup has not stored yet: in one order or the other it goes wrong.
    bool all_right = true;
    for (cuda_emu::Order order : {cuda_emu::Order::kForward, cuda_emu::Order::kReverse}) {
      cuda_emu::set_order(order);
      run(4);
      all_right = all_right && p.right();
    }
    expect(!all_right, "a wgmma without the barrier after its operands' stores reads them unwritten");
    cuda_emu::set_order(cuda_emu::Order::kForward);
    cuda_emu::clear_problems();
    run(5);
    expect(problem_mentions("changed in shared memory while it was in flight"),
           "an operand stored to before the wait is reported");
    cuda_emu::clear_problems();
    run(6);
    expect(problem_mentions("without a wgmma_fence"), "a wgmma without wgmma_fence is reported");
    cuda_emu::clear_problems();
    run(7);
    expect(problem_mentions("never waited for"), "a thread that ends with a wgmma in flight is reported");
    cuda_emu::clear_problems();
    run(8);
    expect(std::isnan(p.d0[0]) && cuda_emu::problems().empty(), "accumulators read before the wait are NaN");
    cuda_emu::clear_problems();
  }

  {
    // Clusters of 2 and of 4 on 8 blocks, in every order.
    const int blocks = 8;
    std::vector<int> out(64 * blocks), own(64 * blocks);
    (void)cudaGetLastError();
    for (int cluster : {2, 4})
      for (cuda_emu::Order order : orders) {
        cuda_emu::set_order(order, 11);
        cuda_emu::clear_problems();
        std::fill(out.begin(), out.end(), -7);
        std::fill(own.begin(), own.end(), -7);
        const cudaError_t e = LAUNCH_CLUSTER(cluster_rotate, blocks, 64, 64 * sizeof(int), nullptr, cluster, out.data(),
                                             own.data(), true, true, 7000);
        expect(e == cudaSuccess && cudaGetLastError() == cudaSuccess && cuda_emu::problems().empty() &&
                   cluster_rotate_right(out, own, blocks, cluster),
               "blocks of a cluster of " + std::to_string(cluster) +
                   " read each other's shared memory after cluster_sync, in every thread order");
      }
    // Without the cluster barrier the neighbour's cells are read before or after it stores them,
    // depending on the order.
    std::vector<int> fwd_out(64 * blocks), rev_out(64 * blocks);
    cuda_emu::set_order(cuda_emu::Order::kForward);
    LAUNCH_CLUSTER(cluster_rotate, blocks, 64, 64 * sizeof(int), nullptr, 2, fwd_out.data(), own.data(), false, true, 8000);
    const bool fwd_right = cluster_rotate_right(fwd_out, own, blocks, 2);
    cuda_emu::set_order(cuda_emu::Order::kReverse);
    LAUNCH_CLUSTER(cluster_rotate, blocks, 64, 64 * sizeof(int), nullptr, 2, rev_out.data(), own.data(), false, true, 9000);
    const bool rev_right = cluster_rotate_right(rev_out, own, blocks, 2);
    expect(fwd_out != rev_out && !fwd_right && !rev_right,
           "a missing cluster_sync makes the result depend on the thread order");
    // Without the last cluster barrier a block may end before its neighbour reads its memory.
    bool all_right = true;
    for (cuda_emu::Order order : {cuda_emu::Order::kForward, cuda_emu::Order::kReverse}) {
      cuda_emu::set_order(order);
      LAUNCH_CLUSTER(cluster_rotate, blocks, 64, 64 * sizeof(int), nullptr, 2, out.data(), own.data(), true, false, 7000);
      all_right = all_right && cluster_rotate_right(out, own, blocks, 2);
    }
    expect(!all_right, "reading the shared memory of a block that ended shows in some order");
    cuda_emu::set_order(cuda_emu::Order::kForward);
    cuda_emu::clear_problems();

    std::vector<int> ranks(blocks, -1);
    LAUNCH_CLUSTER(cluster_rank_of, blocks, 32, 0, nullptr, 4, ranks.data());
    bool ranks_right = true;
    for (int b = 0; b < blocks; ++b) ranks_right = ranks_right && ranks[b] == 400 + b % 4;
    LAUNCH(cluster_rank_of, 2, 32, 0, nullptr, ranks.data());
    expect(ranks_right && ranks[0] == 100 && ranks[1] == 100, "cluster_rank and cluster_size, with and without clusters");

    expect(LAUNCH_CLUSTER(cluster_rotate, 6, 64, 64 * sizeof(int), nullptr, 4, out.data(), own.data(), true, true, 0) ==
                   cudaErrorInvalidConfiguration &&
               problem_mentions("clusters of 4 blocks"),
           "clusters that do not divide grid x are refused");
    cuda_emu::clear_problems();
    expect(LAUNCH_CLUSTER(cluster_rotate, 16, 64, 64 * sizeof(int), nullptr, 16, out.data(), own.data(), true, true, 0) ==
                   cudaErrorInvalidConfiguration &&
               problem_mentions("clusters of 16 blocks"),
           "clusters of more than 8 blocks are refused");
    cuda_emu::clear_problems();
    LAUNCH_CLUSTER(cluster_map_wrong, 4, 32, 32 * sizeof(int), nullptr, 2, out.data(), true);
    expect(problem_mentions("outside the block's dynamic shared memory") && cudaGetLastError() == cudaErrorLaunchFailure,
           "cluster_map_shared of a static __shared__ address is reported");
    cuda_emu::clear_problems();
    LAUNCH_CLUSTER(cluster_map_wrong, 4, 32, 32 * sizeof(int), nullptr, 2, out.data(), false);
    expect(problem_mentions("to rank 2 of a cluster of 2"), "cluster_map_shared to a rank past the cluster is reported");
    cuda_emu::clear_problems();
    LAUNCH_CLUSTER(cluster_stuck, 4, 64, 0, nullptr, 2, out.data(), true);
    expect(problem_mentions("wait at a cluster barrier that 64 finished threads never reach"),
           "a cluster barrier one block of the cluster skips is reported");
    cuda_emu::clear_problems();
    LAUNCH_CLUSTER(cluster_stuck, 4, 64, 0, nullptr, 2, out.data(), false);
    expect(problem_mentions("32 threads wait at a cluster barrier and 32 at a block barrier"),
           "a cluster barrier and a block barrier that wait for each other are reported");
    cuda_emu::clear_problems();
    (void)cudaGetLastError();
  }

  std::printf(failures ? "cuda_emu_test: %d failed\n" : "cuda_emu_test: all passed\n", failures);
  return failures ? 1 : 0;
}
