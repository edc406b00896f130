// The gdn-prefill task's driver. Checks the kernel on every case (shape x mode) against the
// float64 oracle, attention outputs and snapshots, then with --bench-mode times it on the real
// shapes with cold L2 (a 256 MB buffer is written before each run), times the engine's own
// GATED_DELTA_NET on the same data through ggml's backend API in the same run, and prints the
// contract's lines:
//   case <name> <attn|snapshots> snr <dB> ...   per case
//   SNR: <min dB>                               over all cases
//   allclose: <true|false>
//   wall_ms: <case> <sorted times>              per timed case (--bench-mode)
//   case_ms: <case> <median>
//   engine_ms: <case> <median> ... engine / <variant> <ratio>
//   auto: <case> <variant> (...)                which of v3 and v4 auto_variant picks on this GPU,
//                                               and whether it is the faster (both timed)
// Every variant (variants/variants.h: the engine's v1-v4 and those that lost) is checked and timed;
// case names start with its name (v1/ .. v10/).
//
//   gdn_prefill_driver [--bench-mode] [--filter TEXT] [--variant v1..v10] [--reps N] [--no-engine]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "cases.h"
#include "driver_util.cuh"
#include "kernel.cuh"
#include "kernel_config.h"
#include "launch_args.h"
#ifndef KERNELS_NO_ENGINE  // a driver without the engine's ggml: our kernel's numbers only
#include "engine_graph.h"
#endif
#include "reference.h"
#include "variants/variants.h"

using namespace gdn;

namespace {

constexpr size_t kFlushBytes = size_t{256} << 20;  // > 4x the 60 MB L2

void check_cuda(cudaError_t e, const char* what) { kernels::check_cuda(e, what, "gdn_prefill_driver"); }
using kernels::upload;


using kernels::median;

// The problem on the device, contiguous, as the engine lays it out.
struct DeviceProblem {
  explicit DeviceProblem(const Problem& p) {
    q = upload(p.q);
    k = upload(p.k);
    v = upload(p.v);
    g = upload(p.g);
    beta = upload(p.beta);
    state = upload(p.state);
    check_cuda(cudaMalloc(&out, sizeof(float) * p.out_elems()), "cudaMalloc");
    args = contiguous_args(p.shape, q, k, v, g, beta, state, out);
    size_t bytes = 0;  // enough for every variant
    for (const KernelVariant& v : kernel_variants()) bytes = std::max(bytes, v.scratch_bytes(args));
    check_cuda(cudaMalloc(&scratch, bytes), "cudaMalloc scratch");
  }
  ~DeviceProblem() {
    for (void* p : {static_cast<void*>(q), static_cast<void*>(k), static_cast<void*>(v), static_cast<void*>(g),
                    static_cast<void*>(beta), static_cast<void*>(state), static_cast<void*>(out), scratch})
      cudaFree(p);
  }
  float *q, *k, *v, *g, *beta, *state, *out;
  void* scratch = nullptr;
  GdnArgs args;
};

#ifndef KERNELS_NO_ENGINE
// The engine's GATED_DELTA_NET on the same inputs, through ggml's CUDA backend.
class EngineOp {
 public:
  explicit EngineOp(const Problem& p) : g_(16) {
    const Shape& s = p.shape;
    ggml_context* ctx = g_.ctx();
    ggml_tensor* q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, s.S, s.Hk, s.T, s.B);
    ggml_tensor* k = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, s.S, s.Hk, s.T, s.B);
    ggml_tensor* v = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, s.S, s.Hv, s.T, s.B);
    ggml_tensor* g = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 1, s.Hv, s.T, s.B);
    ggml_tensor* beta = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 1, s.Hv, s.T, s.B);
    ggml_tensor* state = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, s.S, s.S, s.Hv, s.B);
    out_ = ggml_gated_delta_net(ctx, q, k, v, g, beta, state, s.K);
    ggml_build_forward_expand(g_.graph(), out_);
    g_.allocate();
    ggml_backend_tensor_set(q, p.q.data(), 0, p.q.size() * sizeof(float));
    ggml_backend_tensor_set(k, p.k.data(), 0, p.k.size() * sizeof(float));
    ggml_backend_tensor_set(v, p.v.data(), 0, p.v.size() * sizeof(float));
    ggml_backend_tensor_set(g, p.g.data(), 0, p.g.size() * sizeof(float));
    ggml_backend_tensor_set(beta, p.beta.data(), 0, p.beta.size() * sizeof(float));
    ggml_backend_tensor_set(state, p.state.data(), 0, p.state.size() * sizeof(float));
  }
  // Milliseconds for one op, wall clock around the graph (its launch included).
  double run() { return g_.run(); }
  std::vector<float> result() {
    std::vector<float> out(ggml_nelements(out_));
    ggml_backend_tensor_get(out_, out.data(), 0, out.size() * sizeof(float));
    return out;
  }

 private:
  kernels::EngineGraph g_;
  ggml_tensor* out_ = nullptr;
};
#endif

}  // namespace

int main(int argc, char** argv) {
  // Whole lines even when redirected: ggml's messages on stderr would otherwise land mid-line
  // and break the contract's lines that campaign.sh reads.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const kernels::DriverOptions o = kernels::parse_driver_options(argc, argv, "gdn_prefill_driver");
  double min_snr = std::numeric_limits<double>::infinity();
  bool all_close = true;
  void* flush = nullptr;
  check_cuda(cudaMalloc(&flush, kFlushBytes), "cudaMalloc flush");
  int sm_count = 0;
  check_cuda(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0), "SM count");
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);

  for (const Shape& s : shapes()) {
    for (Mode m : all_modes()) {
      const std::string name = case_name(s, m);
      if (!o.filter.empty() && name.find(o.filter) == std::string::npos) continue;
      const Problem p = make_problem(s, m, 1);
      const PairOutput<double> want = oracle_checked(p);
      DeviceProblem d(p);
      std::vector<std::pair<std::string, double>> variant_ms;
      for (const KernelVariant& var : kernel_variants()) {
        if (!o.variant.empty() && o.variant != var.name) continue;
        const std::string vname = std::string(var.name) + "/" + name;
        check_cuda(cudaMemset(d.out, 0xff, sizeof(float) * p.out_elems()), "poison");  // NaN: unwritten shows
        check_cuda(var.run(d.args, d.scratch, nullptr), vname.c_str());
        check_cuda(cudaDeviceSynchronize(), vname.c_str());
        std::vector<float> out(static_cast<size_t>(p.out_elems()));
        check_cuda(cudaMemcpy(out.data(), d.out, out.size() * sizeof(float), cudaMemcpyDeviceToHost), "download");
        const Judged j = judge(want, gather_checked(p, out));
        for (const auto& [what, a] : {std::pair<const char*, Accuracy>{"attn", j.attn}, {"snapshots", j.snapshots}}) {
          std::printf("case %-40s %-9s snr %7.1f dB  max_abs_err %.3g  finite %d  allclose %d\n", vname.c_str(), what,
                      a.snr_db, a.max_abs_err, a.finite, a.allclose);
          min_snr = std::min(min_snr, a.snr_db);
          all_close = all_close && a.allclose;
        }
        if (!o.bench || !s.large || m != Mode::kHarsh) continue;

        // Timing, cold L2: the flush buffer is written before every run.
        std::vector<double> ms;
        for (int rep = 0; rep < o.reps + 2; ++rep) {
          cudaMemsetAsync(flush, rep & 0xff, kFlushBytes);
          cudaEventRecord(e0);
          var.run(d.args, d.scratch, nullptr);
          cudaEventRecord(e1);
          cudaEventSynchronize(e1);
          float t;
          cudaEventElapsedTime(&t, e0, e1);
          if (rep >= 2) ms.push_back(t);
        }
        std::sort(ms.begin(), ms.end());
        std::printf("wall_ms: %s", vname.c_str());
        for (double t : ms) std::printf(" %.4f", t);
        const double med = median(ms);
        variant_ms.push_back({var.name, med});
        const double flops = 2.0 * 3.0 * s.T * s.B * s.Hv * static_cast<double>(s.S) * s.S;  // the recurrence's work
        std::printf("\ncase_ms: %s %.4f  (%.1f us, %.1f TFLOP/s of recurrence work)\n", vname.c_str(), med, med * 1e3,
                    flops / (med * 1e-3) / 1e12);
      }
      double v3_ms = 0, v4_ms = 0;
      for (const auto& [var, ms] : variant_ms) {
        if (var == variant_name(Variant::kTensorCoresSplit)) v3_ms = ms;
        if (var == variant_name(Variant::kOutputApart)) v4_ms = ms;
      }
      if (v3_ms > 0 && v4_ms > 0) {
        const Variant pick = auto_variant(d.args, sm_count);
        const bool faster = (pick == Variant::kOutputApart) == (v4_ms < v3_ms);
        std::printf("auto: %s %s (v3 %.1f us, v4 %.1f us: the %s)\n", name.c_str(), variant_name(pick), v3_ms * 1e3,
                    v4_ms * 1e3, faster ? "faster" : "slower");
      }
#ifndef KERNELS_NO_ENGINE
      if (o.engine && !variant_ms.empty()) {
        EngineOp engine(p);
        engine.run();
        std::vector<double> ems;
        for (int rep = 0; rep < o.reps; ++rep) {
          check_cuda(cudaMemset(flush, rep & 0xff, kFlushBytes), "flush");
          check_cuda(cudaDeviceSynchronize(), "flush");
          ems.push_back(engine.run());
        }
        const Judged ej = judge(want, gather_checked(p, engine.result()));
        const double emed = median(ems);
        std::printf("engine_ms: %s %.4f  (snr attn %.1f dB, snapshots %.1f dB)", name.c_str(), emed, ej.attn.snr_db,
                    ej.snapshots.snr_db);
        for (const auto& [var, ms] : variant_ms) std::printf("  engine / %s %.2fx", var.c_str(), emed / ms);
        std::printf("\n");
      }
#endif
    }
  }
  cudaFree(flush);
  std::printf("SNR: %.1f\nallclose: %s\n", min_snr, all_close ? "true" : "false");
  return min_snr >= kSnrBarDb && all_close ? 0 : 1;
}
