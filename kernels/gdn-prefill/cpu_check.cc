// make test's part of the package, no GPU: the chunked CPU reference (the kernel's arithmetic)
// meets the accuracy bar against the float64 oracle on every case and mode, snapshots included,
// at the kernel's chunk size and at a few others (a chunk of 1 is the token-by-token form), and in
// the look-ahead order of carrying U (a design not yet in a kernel).
// Prints the driver's contract lines. The pairs of a case are computed in parallel.
#include <cstdio>
#include <future>
#include <limits>
#include <utility>

#include "cases.h"
#include "kernel_config.h"
#include "reference.h"

using namespace gdn;

int main() {
  int failures = 0;
  double min_snr = std::numeric_limits<double>::infinity();
  bool all_close = true;
  auto report = [&](const std::string& name, const Accuracy& a, const char* what) {
    std::printf("case %-36s %-9s snr %7.1f dB  max_abs_err %.3g  finite %d  allclose %d\n", name.c_str(), what,
                a.snr_db, a.max_abs_err, a.finite, a.allclose);
    min_snr = std::min(min_snr, a.snr_db);
    all_close = all_close && a.allclose;
    if (a.snr_db < kSnrBarDb || !a.finite) ++failures;
  };
  for (const Shape& s : shapes()) {
    for (Mode m : all_modes()) {
      const Problem p = make_problem(s, m, 1);
      // The kernels' chunk, and on the small shapes a few others (1 is the token-by-token form);
      // then the look-ahead chain at the kernels' chunk (program.md, idea 1).
      std::vector<std::pair<int, Chain>> forms = {{kChunk, Chain::kSequential}};
      if (!s.large) forms = {{1, Chain::kSequential}, {16, Chain::kSequential}, {kChunk, Chain::kSequential}};
      forms.push_back({kChunk, Chain::kLookAhead});
      for (const auto& [chunk, chain] : forms) {
        PairOutput<double> want_all;
        PairOutput<float> got_all;
        std::vector<std::future<std::pair<PairOutput<double>, PairOutput<float>>>> work;
        for (Pair pair : checked_pairs(s))
          work.push_back(std::async(std::launch::async, [&p, pair, chunk = chunk, chain = chain] {
            std::pair<PairOutput<double>, PairOutput<float>> r;
            oracle_pair(p, pair, r.first);
            reference_pair(p, pair, chunk, r.second, chain);
            return r;
          }));
        for (auto& f : work) {
          const auto [w, g] = f.get();
          append(want_all, w);
          append(got_all, g);
        }
        const std::string name =
            case_name(s, m) + "-c" + std::to_string(chunk) + (chain == Chain::kLookAhead ? "-ahead" : "");
        const Judged j = judge(want_all, got_all);
        report(name, j.attn, "attn");
        report(name, j.snapshots, "snapshots");
      }
    }
  }
  std::printf("SNR: %.1f\nallclose: %s\n", min_snr, all_close ? "true" : "false");
  return failures == 0 && all_close ? 0 : 1;
}
