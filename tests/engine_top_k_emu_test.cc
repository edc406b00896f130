// Engine patch 0018's TOP_K kernel for k <= 128 (ggml-cuda/onebit-top-k-small.cuh, its source
// unchanged) on 1bit's CPU emulator of CUDA (kernels/common/emu), launched as top-k.cu launches it:
// the columns of the k largest of each row, in a stable descending sort's order, for one and for
// several blocks a row, with ties, -0 beside +0, -inf, and rows shorter than a warp; every warp
// operation reached by the whole warp, and the same result with the threads in another order.
#include "cuda_runtime.h"
#include "device.cuh"
#include "onebit-top-k-small.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

enum class Data { kNormal, kTies, kAscending, kZerosAndInfs };

std::vector<float> rows_of(Data data, int ncols, int nrows, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(ncols) * nrows);
  for (size_t i = 0; i < v.size(); ++i) {
    const int col = static_cast<int>(i % ncols);
    switch (data) {
      case Data::kNormal: v[i] = normal(rng); break;
      case Data::kTies: v[i] = std::floor(normal(rng)); break;
      case Data::kAscending: v[i] = 0.5f * col; break;
      case Data::kZerosAndInfs: {
        // nothing above zero, so that the k largest are zeros of both signs in column order
        const float pick[] = {0.0f, -0.0f, -INFINITY, -1.0f};
        v[i] = pick[rng() % 4];
        break;
      }
    }
  }
  return v;
}

// The k columns of a row a stable descending sort puts first (-0 and +0 compare equal).
std::vector<int> expected(const float* row, int ncols, int k) {
  std::vector<int> cols(ncols);
  std::iota(cols.begin(), cols.end(), 0);
  std::stable_sort(cols.begin(), cols.end(), [&](int a, int b) { return row[a] > row[b]; });
  cols.resize(k);
  return cols;
}

// The k largest of each row, launched as top-k.cu launches them (top_k_small_launch).
std::string run(const std::vector<float>& src, int ncols, int nrows, int k, std::vector<int>* dst) {
  dst->assign(static_cast<size_t>(nrows) * k, -1);
  std::vector<uint64_t> part(top_k_small_part_keys(ncols, nrows, k));
  cuda_emu::clear_problems();
  cudaError_t e = cudaSuccess;
  auto launch = [&](auto kernel, int ctas, auto... args) {
    if (e == cudaSuccess) e = LAUNCH(kernel, dim3(ctas), dim3(TOP_K_SMALL_WARPS * WARP_SIZE), 0, nullptr, args...);
  };
  top_k_small_launch(launch, src.data(), part.data(), dst->data(), ncols, nrows, k);
  if (e != cudaSuccess) return "launch failed: " + std::to_string(e) + "\n" + cuda_emu::problems();
  return cuda_emu::problems();
}

struct Case {
  int ncols, nrows, k;
  Data data;
};

TEST(EngineTopKEmu, TheKLargestInAStableSortsOrder) {
  const Case cases[] = {
      {1, 2, 1, Data::kNormal},          {5, 3, 5, Data::kTies},         {31, 2, 7, Data::kZerosAndInfs},
      {33, 2, 10, Data::kNormal},        {1000, 2, 40, Data::kTies},     {1000, 1, 128, Data::kAscending},
      {4096, 1, 64, Data::kZerosAndInfs}, {4097, 1, 10, Data::kNormal}, {9000, 2, 33, Data::kTies},
      {12289, 1, 100, Data::kAscending}, {12289, 1, 128, Data::kNormal},
  };
  int checked = 0;
  for (const Case& c : cases) {
    const std::vector<float> src = rows_of(c.data, c.ncols, c.nrows, 17u * c.ncols + c.k);
    for (cuda_emu::Order order : {cuda_emu::Order::kForward, cuda_emu::Order::kShuffled}) {
      cuda_emu::set_order(order, 5);
      std::vector<int> got;
      const std::string problems = run(src, c.ncols, c.nrows, c.k, &got);
      ASSERT_EQ(problems, "") << c.ncols << " x " << c.nrows << ", k " << c.k;
      for (int r = 0; r < c.nrows; ++r) {
        const std::vector<int> want = expected(src.data() + static_cast<size_t>(r) * c.ncols, c.ncols, c.k);
        const std::vector<int> row(got.begin() + static_cast<size_t>(r) * c.k, got.begin() + static_cast<size_t>(r + 1) * c.k);
        ASSERT_EQ(row, want) << c.ncols << " columns, row " << r << ", k " << c.k << ", data " << static_cast<int>(c.data);
      }
      ++checked;
    }
  }
  cuda_emu::set_order(cuda_emu::Order::kForward);
  EXPECT_EQ(checked, 22);
}

// The block plan top-k.cu launches with: at least 4096 columns a block, at most 64 blocks a row,
// and the blocks cover the row.
TEST(EngineTopKEmu, TheBlocksCoverARow) {
  for (int ncols : {1, 4095, 4096, 4097, 128256, 262144, 262145, 1 << 24}) {
    int nblk = 0, chunk = 0;
    top_k_small_blocks(ncols, &nblk, &chunk);
    EXPECT_GE(nblk, 1);
    EXPECT_LE(nblk, 64);
    EXPECT_GE(static_cast<long long>(nblk) * chunk, ncols);
    EXPECT_LT(static_cast<long long>(nblk - 1) * chunk, ncols) << "an empty block at " << ncols;
    if (nblk < 64) EXPECT_GE(chunk, std::min(ncols, 2048));
  }
}

}  // namespace
