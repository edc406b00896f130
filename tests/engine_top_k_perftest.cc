// What engine patch 0011's selection costs on this CPU: the top 40 (the default top_k) and the
// top 2 (greedy: the argmax and its runner-up) of a vocabulary's logits taken straight from them
// (onebit_top_k, with the vector scan this CPU has), against the engine's way, which fills a
// candidate array for the whole vocabulary and partially sorts it. Prints numbers; asserts nothing.
//
//   engine_top_k_perftest [--reps N]
#include "onebit-top-k.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double best_us(int reps, F&& f) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return best;
}

const char* scan_name() {
#ifdef ONEBIT_TOP_K_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "AVX-512";
  if (__builtin_cpu_supports("avx2")) return "AVX2";
#endif
  return "scalar";
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "engine_top_k_perftest: unknown argument %s (usage: engine_top_k_perftest [--reps N])\n", argv[i]);
      return 2;
    }
  }
  if (reps < 1) {
    std::fprintf(stderr, "engine_top_k_perftest: --reps must be at least 1\n");
    return 2;
  }
  std::printf("scan: %s; best of %d\n", scan_name(), reps);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int n : {128256, 151936}) {
    std::vector<float> logits(n);
    for (float& x : logits) x = dist(rng);
    for (int k : {40, 2}) {
      onebit_top_k_buf buf;
      std::vector<llama_token_data> out, full(n);
      bool ok = true;
      const double fast = best_us(reps, [&] { ok &= onebit_top_k(logits.data(), n, k, buf, out); });
      const double engine = best_us(reps, [&] {
        for (int i = 0; i < n; ++i) full[i] = {i, logits[i], 0.0f};
        std::partial_sort(full.begin(), full.begin() + k, full.end(),
                          [](const llama_token_data& a, const llama_token_data& b) { return a.logit > b.logit; });
      });
      if (!ok) {
        std::fprintf(stderr, "engine_top_k_perftest: the selection said no on untied logits\n");
        return 1;
      }
      std::printf("top %2d of %6d logits: %7.1f us selected, %7.1f us filled and partially sorted (%.1fx)\n", k, n, fast,
                  engine, engine / fast);
    }
  }
  return 0;
}
