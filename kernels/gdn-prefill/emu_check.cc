// make test's check of the CUDA kernels' own sources, on the CPU: every variant (the engine's, in
// dispatch.cu, and those that lost, in variants/) runs under the emulator (kernels/common/emu) on
// the small cases in every mode, with the block's threads in three orders. It must meet the
// accuracy bar against the float64 oracle (attention and snapshots), give bit-identical results
// in every order (a difference means a shared-memory race), leave the snapshot slots it must not
// write untouched, and trip none of the emulator's checks (divergent barriers, launch limits,
// shared memory without the opt-in). With q, k and v where 16-byte copies cannot reach them (the
// kernel then copies 4 bytes at a time) the results must be the same bits.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>

#include "cases.h"
#include "cuda_emu.h"
#include "kernel_config.h"
#include "launch_args.h"
#include "reference.h"
#include "variants/variants.h"

using namespace gdn;

namespace {

// Scratch filled with NaN bytes: what a kernel reads before anything wrote it spoils the result.
std::vector<double> poisoned_scratch(const GdnArgs& a, const KernelVariant& v) {
  std::vector<double> scratch(v.scratch_bytes(a) / sizeof(double) + 1);
  std::memset(scratch.data(), 0xff, scratch.size() * sizeof(double));
  return scratch;
}

// A copy of v at an address 4 bytes past a 16-byte boundary, inside `storage`.
const float* misaligned_copy(const std::vector<float>& v, std::vector<float>& storage) {
  storage.assign(v.size() + 4, 0.0f);
  size_t at = 0;
  while ((reinterpret_cast<uintptr_t>(storage.data() + at) & 15) != 4) ++at;
  std::memcpy(storage.data() + at, v.data(), v.size() * sizeof(float));
  return storage.data() + at;
}

}  // namespace

int main() {
  int failures = 0;
  double min_snr = std::numeric_limits<double>::infinity();
  bool all_close = true;
  const float kUnwritten = 12345.0f;
  const cuda_emu::Order orders[] = {cuda_emu::Order::kForward, cuda_emu::Order::kReverse, cuda_emu::Order::kShuffled};
  for (const Shape& s : shapes()) {
    if (s.large) continue;
    for (Mode m : all_modes()) {
      const Problem p = make_problem(s, m, 1);
      const PairOutput<double> want = oracle_checked(p);
      for (const KernelVariant& var : kernel_variants()) {
        const std::string name = std::string(var.name) + "/" + case_name(s, m);
        std::vector<float> first;
        for (cuda_emu::Order order : orders) {
          std::vector<float> out(static_cast<size_t>(p.out_elems()), kUnwritten);
          const GdnArgs a = contiguous_args(s, p.q.data(), p.k.data(), p.v.data(), p.g.data(), p.beta.data(),
                                            p.state.data(), out.data());
          std::vector<double> scratch = poisoned_scratch(a, var);
          cuda_emu::set_order(order, 7);
          cuda_emu::clear_problems();
          cudaError_t e = var.run(a, scratch.data(), nullptr);
          if (e == cudaSuccess) e = cudaGetLastError();
          if (e != cudaSuccess || !cuda_emu::problems().empty()) {
            std::printf("case %s: %s\n%s", name.c_str(), cudaGetErrorString(e), cuda_emu::problems().c_str());
            ++failures;
            break;
          }
          if (first.empty()) {
            first = out;
            continue;
          }
          if (std::memcmp(first.data(), out.data(), out.size() * sizeof(float)) != 0) {
            std::printf("case %s: results depend on the order of the threads (a shared-memory race)\n", name.c_str());
            ++failures;
          }
        }
        if (first.empty()) continue;
        if (m == all_modes().front()) {
          std::vector<float> qm, km, vm, out(static_cast<size_t>(p.out_elems()), kUnwritten);
          const GdnArgs a = contiguous_args(s, misaligned_copy(p.q, qm), misaligned_copy(p.k, km),
                                            misaligned_copy(p.v, vm), p.g.data(), p.beta.data(), p.state.data(),
                                            out.data());
          std::vector<double> scratch = poisoned_scratch(a, var);
          cuda_emu::set_order(cuda_emu::Order::kForward, 7);
          cudaError_t e = var.run(a, scratch.data(), nullptr);
          if (e == cudaSuccess) e = cudaGetLastError();
          if (e != cudaSuccess || std::memcmp(first.data(), out.data(), out.size() * sizeof(float)) != 0) {
            std::printf("case %s: q, k, v off 16-byte boundaries give other results\n", name.c_str());
            ++failures;
          }
        }
        // Slots the op must not write (K > T) keep what the caller had there.
        for (int slot = written_slots(s); slot < s.K; ++slot)
          for (int64_t i = 0; i < p.snapshot_elems(); ++i)
            if (first[static_cast<size_t>(p.attn_elems() + slot * p.snapshot_elems() + i)] != kUnwritten) {
              std::printf("case %s: snapshot slot %d was written, though only %d are\n", name.c_str(), slot,
                          written_slots(s));
              ++failures;
              slot = s.K;
              break;
            }
        const Judged j = judge(want, gather_checked(p, first));
        for (const auto& [what, acc] : {std::pair<const char*, Accuracy>{"attn", j.attn}, {"snapshots", j.snapshots}}) {
          std::printf("case %-36s %-9s snr %7.1f dB  max_abs_err %.3g  finite %d  allclose %d\n", name.c_str(), what,
                      acc.snr_db, acc.max_abs_err, acc.finite, acc.allclose);
          min_snr = std::min(min_snr, acc.snr_db);
          all_close = all_close && acc.allclose;
          if (acc.snr_db < kSnrBarDb || !acc.finite) ++failures;
        }
      }
    }
  }
  std::printf("SNR: %.1f\nallclose: %s\n", min_snr, all_close ? "true" : "false");
  return failures == 0 && all_close ? 0 : 1;
}
