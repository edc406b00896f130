// Engine patch 0011's selection of the k largest logits (common/onebit-top-k.h): the same tokens in
// the same order as the engine's partial sort, "no" for a tie at the k-th place or a NaN, and each
// vector scan the CPU has (chosen at run time) stopping at the block the scalar loop would.
#include "onebit-top-k.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace {

std::vector<float> normal_logits(int n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<int> partial_sort_ids(const std::vector<float>& logits, int k) {
  std::vector<int> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  ids.resize(k);
  return ids;
}

TEST(EngineTopK, TheLargestInTheSortsOrder) {
  int checked = 0;
  for (int n : {2, 3, 31, 64, 65, 1000, 4097, 151936}) {
    for (int k : {1, 2, 40, 200}) {
      if (k >= n) continue;
      for (unsigned seed = 1; seed <= 3; ++seed) {
        std::vector<float> logits = normal_logits(n, seed * 977 + n + k);
        onebit_top_k_buf buf;
        std::vector<llama_token_data> out;
        ASSERT_TRUE(onebit_top_k(logits.data(), n, k, buf, out)) << n << " " << k;
        ASSERT_EQ(out.size(), static_cast<size_t>(k));
        std::vector<int> want = partial_sort_ids(logits, k);
        for (int j = 0; j < k; ++j) {
          ASSERT_EQ(out[j].id, want[j]) << "n " << n << ", k " << k << ", place " << j;
          EXPECT_EQ(out[j].logit, logits[want[j]]);
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 60);
}

// Ascending logits raise the threshold at every block: the buffer compacts again and again.
TEST(EngineTopK, AscendingLogitsKeepCompacting) {
  const int n = 20000, k = 40;
  std::vector<float> logits(n);
  for (int i = 0; i < n; ++i) logits[i] = 0.001f * i;
  onebit_top_k_buf buf;
  std::vector<llama_token_data> out;
  ASSERT_TRUE(onebit_top_k(logits.data(), n, k, buf, out));
  for (int j = 0; j < k; ++j) EXPECT_EQ(out[j].id, n - 1 - j);
}

TEST(EngineTopK, ATieAtTheKthPlaceOrANanSaysNo) {
  std::vector<float> logits = normal_logits(5000, 7);
  std::vector<int> top = partial_sort_ids(logits, 41);
  onebit_top_k_buf buf;
  std::vector<llama_token_data> out;
  std::vector<float> tied = logits;
  tied[top[40]] = tied[top[39]];  // the 41st equals the 40th
  EXPECT_FALSE(onebit_top_k(tied.data(), 5000, 40, buf, out));
  std::vector<float> nan = logits;
  nan[4321] = std::nanf("");
  EXPECT_FALSE(onebit_top_k(nan.data(), 5000, 40, buf, out));
  EXPECT_TRUE(onebit_top_k(logits.data(), 5000, 40, buf, out));
}

#ifdef ONEBIT_TOP_K_X86
// The block a scan stops at, and which of its logits are not below thr, the scalar way.
void scalar_scan(const std::vector<float>& v, int i, float thr, int width, int* at, uint64_t* mask) {
  const int n = static_cast<int>(v.size());
  for (; i + width <= n; i += width) {
    uint64_t m = 0;
    for (int q = 0; q < width; ++q)
      if (!(v[i + q] < thr)) m |= uint64_t{1} << q;
    if (m) {
      *at = i;
      *mask = m;
      return;
    }
  }
  *at = i;
  *mask = 0;
}

TEST(EngineTopK, EveryScanTheCpuHasStopsWhereTheScalarLoopWould) {
  struct Scan {
    const char* feature;
    bool        has;  // __builtin_cpu_supports takes only a literal
    onebit_scan scan;
  };
  __builtin_cpu_init();
  const Scan scans[] = {{"avx2", __builtin_cpu_supports("avx2") != 0, {onebit_scan_avx2, 32}},
                        {"avx512f", __builtin_cpu_supports("avx512f") != 0, {onebit_scan_avx512, 64}}};
  int ran = 0;
  for (const Scan& s : scans) {
    if (!s.has) continue;
    ++ran;
    std::mt19937 rng(11);
    for (int trial = 0; trial < 3000; ++trial) {
      const int n = 1 + static_cast<int>(rng() % 3000);
      std::vector<float> v = normal_logits(n, trial);
      if (trial % 5 == 0) v[rng() % n] = std::nanf("");
      const float thr = 4.0f + 0.002f * (trial % 1000);
      const int from = static_cast<int>(rng() % n);
      uint64_t mask = ~uint64_t{0}, want_mask = 0;
      int want_at = 0;
      const int at = s.scan.fn(v.data(), from, n, thr, &mask);
      scalar_scan(v, from, thr, s.scan.width, &want_at, &want_mask);
      ASSERT_EQ(at, want_at) << s.feature << " trial " << trial;
      ASSERT_EQ(mask, want_mask) << s.feature << " trial " << trial;
    }
  }
  if (ran == 0) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512";
}
#endif

}  // namespace
