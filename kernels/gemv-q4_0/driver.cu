// The GEMV task's driver. Checks the kernel on every case (shape x mode x 1-8 columns, v5 1-16, v7 1)
// against the float64 oracle, then with --bench-mode times it on the real shapes with cold L2 (several
// copies of the weights, used in turn), times the engine's own MMVQ on the same data through
// ggml's backend API in the same run, and prints the contract's lines:
//   case <name> snr <dB> ...        one line per case
//   SNR: <min dB>                   over all cases
//   allclose: <true|false>
//   wall_ms: <case> <sorted times>  per timed case (--bench-mode)
//   case_ms: <case> <median>
//
//   engine_ms: <case> <median>              the engine's MUL_MAT on the same data (MMVQ at 1-8
//                                           columns, MMQ at 9-16)
//   floor_ms: <shape> <median>              reading W alone, as fast as plain loads go (the
//                                           best of 36 kernel shapes): what no GEMV of that
//                                           shape can beat
// Every variant (variants/variants.h: the engine's and those that lost) is checked and timed (case
// names start with its name) unless --variant picks some (names separated by commas).
//
//   gemv_q4_0_driver [--bench-mode] [--filter TEXT] [--variant NAME[,NAME...]] [--reps N] [--no-engine]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "cases.h"
#include "driver_util.cuh"
#include "kernel.cuh"
#ifndef KERNELS_NO_ENGINE  // a driver without the engine's ggml: our kernel's numbers only
#include "engine_graph.h"
#endif
#include "reference.h"
#include "variants/variants.h"

using namespace gemv;

namespace {

constexpr double kL2Bytes = 60e6;

void check_cuda(cudaError_t e, const char* what) { kernels::check_cuda(e, what, "gemv_q4_0_driver"); }
using kernels::upload;


#ifndef KERNELS_NO_ENGINE
// The engine's MUL_MAT on the same weights, through ggml: MMVQ at 1-8 columns, MMQ at 9-16,
// unless ONEBIT_GEMV_Q4_0 sends them to 1bit's kernel.
class EngineMatmul {
 public:
  EngineMatmul(const Problem& p, int cols, int copies) : g_(2 * copies + 4), cols_(cols), copies_(copies) {
    ggml_context* ctx = g_.ctx();
    ggml_tensor* b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, p.k, cols);
    std::vector<ggml_tensor*> as;
    for (int i = 0; i < copies; ++i) {
      ggml_tensor* a = ggml_new_tensor_2d(ctx, GGML_TYPE_Q4_0, p.k, p.rows);
      as.push_back(a);
      outs_.push_back(ggml_mul_mat(ctx, a, b));
      ggml_build_forward_expand(g_.graph(), outs_.back());
    }
    g_.allocate();
    for (ggml_tensor* a : as) ggml_backend_tensor_set(a, p.w.data(), 0, p.w.size() * sizeof(BlockQ4_0));
    // The activations as floats: exactly the values the Q8_1 blocks hold, which ggml quantizes
    // again on its own (so it reads the same numbers; its Q8_1 carries the sum of the floats).
    std::vector<float> xf(static_cast<size_t>(p.k * cols));
    const int64_t nb = p.k / kBlock;
    for (int c = 0; c < cols; ++c)
      for (int64_t blk = 0; blk < nb; ++blk) {
        const BlockQ8_1& q = p.x[static_cast<size_t>(c * nb + blk)];
        for (int i = 0; i < kBlock; ++i) xf[static_cast<size_t>(c * p.k + blk * kBlock + i)] = q.qs[i] * f16_to_f32(q.d);
      }
    ggml_backend_tensor_set(b, xf.data(), 0, xf.size() * sizeof(float));
  }
  // Milliseconds per matmul for one pass over all copies.
  double run() { return g_.run() / copies_; }
  std::vector<float> result(int64_t rows) {
    std::vector<float> out(static_cast<size_t>(rows * cols_));
    ggml_backend_tensor_get(outs_[0], out.data(), 0, out.size() * sizeof(float));
    return out;
  }

 private:
  kernels::EngineGraph g_;
  int cols_, copies_;
  std::vector<ggml_tensor*> outs_;
};
#endif

using kernels::median;

// Device-to-device copy bandwidth (bytes read + written per second), the ceiling to compare with.
double copy_bandwidth() {
  const size_t bytes = size_t{2} << 30;
  void *a, *b;
  check_cuda(cudaMalloc(&a, bytes), "cudaMalloc");
  check_cuda(cudaMalloc(&b, bytes), "cudaMalloc");
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<double> t;
  for (int i = 0; i < 6; ++i) {
    cudaEventRecord(e0);
    cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i > 0) t.push_back(ms);
  }
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes / (median(t) * 1e-3);
}

// Per-pass milliseconds, sorted, of `reps` passes over the weight copies after three that warm
// up; run(w) launches one product (or read) of copy w. A failed launch exits.
template <typename Run>
std::vector<double> pass_times(const std::vector<BlockQ4_0*>& ws, int reps, cudaEvent_t e0, cudaEvent_t e1,
                               const Run& run) {
  std::vector<double> ms;
  for (int rep = 0; rep < reps + 3; ++rep) {
    cudaEventRecord(e0);
    for (BlockQ4_0* w : ws) run(w);
    cudaEventRecord(e1);
    check_cuda(cudaGetLastError(), "launch");
    check_cuda(cudaEventSynchronize(e1), "timed pass");
    float t;
    cudaEventElapsedTime(&t, e0, e1);
    if (rep >= 3) ms.push_back(t / ws.size());
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

// Reads every 16-byte line of w and nothing else: the floor under any GEMV of that W. Each
// thread issues kLoads loads an iteration (how many the compiler keeps in flight at once is its
// choice); the XOR keeps them alive, and its store never happens.
template <int kLoads>
__global__ void read_floor(const uint4* __restrict__ w, int64_t lines, unsigned* never) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  unsigned acc = 0;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kLoads - 1) * stride < lines; i += kLoads * stride) {
    uint4 v[kLoads];
#pragma unroll
    for (int j = 0; j < kLoads; ++j) v[j] = __ldcs(w + i + j * stride);
#pragma unroll
    for (int j = 0; j < kLoads; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  for (; i < lines; i += stride) {
    const uint4 v = __ldcs(w + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u && never[0] == 0x9e3779b9u) never[1] = acc;
}

// The floor: the best median of read_floor over kernel shapes (loads an iteration a thread, CTAs
// an SM, threads a CTA), per pass over the copies in ws; `how` says which shape it was.
double read_floor_ms(const std::vector<BlockQ4_0*>& ws, size_t wbytes, int reps, cudaEvent_t e0, cudaEvent_t e1,
                     std::string& how) {
  int sms = 0;
  check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
  unsigned* never = nullptr;
  check_cuda(cudaMalloc(&never, 2 * sizeof(unsigned)), "cudaMalloc");
  check_cuda(cudaMemset(never, 0, 2 * sizeof(unsigned)), "cudaMemset");
  const int64_t lines = static_cast<int64_t>(wbytes / 16);
  double best = std::numeric_limits<double>::infinity();
  for (int loads : {2, 4, 8, 16})
    for (int threads : {256, 512, 1024})
      for (int per_sm = 1; per_sm * threads <= 2048; per_sm *= 2) {
        const unsigned ctas = static_cast<unsigned>(per_sm * sms);
        const std::vector<double> ms = pass_times(ws, reps, e0, e1, [&](BlockQ4_0* wc) {
          const uint4* w = reinterpret_cast<const uint4*>(wc);
          switch (loads) {
            case 2: read_floor<2><<<ctas, threads>>>(w, lines, never); break;
            case 4: read_floor<4><<<ctas, threads>>>(w, lines, never); break;
            case 8: read_floor<8><<<ctas, threads>>>(w, lines, never); break;
            default: read_floor<16><<<ctas, threads>>>(w, lines, never); break;
          }
        });
        if (const double med = median(ms); med < best) {
          best = med;
          how = std::to_string(loads) + " loads an iteration a thread, " + std::to_string(per_sm) + " CTAs of " +
                std::to_string(threads) + " threads an SM";
        }
      }
  cudaFree(never);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  // Whole lines even when redirected: ggml's messages on stderr would otherwise land mid-line
  // and break the contract's lines that campaign.sh reads.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const kernels::DriverOptions o = kernels::parse_driver_options(argc, argv, "gemv_q4_0_driver");
  std::vector<Variant> selected = variants();
  if (!o.variant.empty()) {  // the named ones, in the order named
    selected.clear();
    for (size_t b = 0, e = 0; b <= o.variant.size(); b = e + 1) {
      e = std::min(o.variant.find(',', b), o.variant.size());
      const std::string name = o.variant.substr(b, e - b);
      auto it = std::find_if(variants().begin(), variants().end(), [&](const Variant& v) { return name == v.name; });
      if (it == variants().end()) {
        std::fprintf(stderr, "gemv_q4_0_driver: no variant named '%s'\n", name.c_str());
        return 2;
      }
      selected.push_back(*it);
    }
  }
  double min_snr = std::numeric_limits<double>::infinity();
  bool all_close = true;
  const double copy_bw = o.bench ? copy_bandwidth() : 0;
  if (o.bench) std::printf("copy bandwidth: %.0f GB/s (device to device, read + write)\n", copy_bw / 1e9);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);

  for (const Shape& s : shapes()) {
    for (Mode m : all_modes()) {
      if (!o.filter.empty() && case_name(s, m, 8).find(o.filter) == std::string::npos) continue;
      Problem p = make_problem(s.name, s.rows, s.k, kMaxCols, m, 1);
      Expected want = expected_for(s, p);
      BlockQ4_0* w = upload(p.w);
      BlockQ8_1* x = upload(p.x);
      float* out = nullptr;
      check_cuda(cudaMalloc(&out, sizeof(float) * s.rows * kMaxCols), "cudaMalloc");
      for (const Variant& var : selected)
        for (int cols = 1; cols <= var.max_cols; ++cols) {
          const std::string name = std::string(var.name) + "/" + case_name(s, m, cols);
          check_cuda(cudaMemset(out, 0xff, sizeof(float) * s.rows * kMaxCols), "poison");  // NaN: unwritten shows
          check_cuda(var.run(w, x, s.k / kBlock, out, s.rows, s.k, cols, nullptr), name.c_str());
          std::vector<float> host(static_cast<size_t>(s.rows * cols));
          check_cuda(cudaMemcpy(host.data(), out, host.size() * sizeof(float), cudaMemcpyDeviceToHost), "download");
          std::vector<double> wv;
          std::vector<float> gv;
          gather(want, host, s.rows, cols, wv, gv);
          Accuracy a = compare(wv, gv);
          std::printf("case %-40s snr %7.1f dB  max_abs_err %.3g  finite %d  allclose %d\n", name.c_str(), a.snr_db,
                      a.max_abs_err, a.finite, a.allclose);
          min_snr = std::min(min_snr, a.snr_db);
          all_close = all_close && a.allclose;
        }
      // Timing: the real shapes, normal data, cold L2.
      if (o.bench && s.large && m == Mode::kNormal) {
        const size_t wbytes = p.w.size() * sizeof(BlockQ4_0);
        const int copies = std::max(2, static_cast<int>(4 * kL2Bytes / static_cast<double>(wbytes)) + 1);
        std::vector<BlockQ4_0*> ws = {w};
        for (int i = 1; i < copies; ++i) ws.push_back(upload(p.w));
        std::string how;
        const double floor_ms = read_floor_ms(ws, wbytes, o.reps, e0, e1, how);
        std::printf("floor_ms: %s %.4f  (%.0f GB/s, %.0f%% of copy bandwidth; %s)\n", s.name, floor_ms,
                    wbytes / (floor_ms * 1e-3) / 1e9, 100.0 * wbytes / (floor_ms * 1e-3) / copy_bw, how.c_str());
        for (int cols = 1; cols <= kMaxCols; ++cols) {
          double emed = 0;
#ifndef KERNELS_NO_ENGINE
          if (o.engine) {
            EngineMatmul engine(p, cols, copies);
            engine.run();
            std::vector<double> ems;
            for (int rep = 0; rep < o.reps; ++rep) ems.push_back(engine.run());
            std::vector<double> wv;
            std::vector<float> gv;
            gather(want, engine.result(s.rows), s.rows, cols, wv, gv);
            emed = median(ems);
            std::printf("engine_ms: %s %.4f  (snr %.1f dB)\n", case_name(s, m, cols).c_str(), emed,
                        compare(wv, gv).snr_db);
          }
#endif
          for (const Variant& var : selected) {
            if (cols > var.max_cols) continue;
            const std::string name = std::string(var.name) + "/" + case_name(s, m, cols);
            const std::vector<double> ms = pass_times(ws, o.reps, e0, e1, [&](BlockQ4_0* wc) {
              var.run(wc, x, s.k / kBlock, out, s.rows, s.k, cols, nullptr);
            });
            std::printf("wall_ms: %s", name.c_str());
            for (double t : ms) std::printf(" %.4f", t);
            const double med = median(ms);
            const double gbs = (wbytes + cols * p.x.size() / 8 * sizeof(BlockQ8_1)) / (med * 1e-3) / 1e9;
            std::printf("\ncase_ms: %s %.4f  (%.0f GB/s, %.0f%% of copy bandwidth", name.c_str(), med, gbs,
                        100.0 * gbs * 1e9 / copy_bw);
            if (emed > 0) std::printf(", engine / this %.2fx", emed / med);
            std::printf(")\n");
          }
        }
        for (size_t i = 1; i < ws.size(); ++i) cudaFree(ws[i]);
      }
      cudaFree(w);
      cudaFree(x);
      cudaFree(out);
    }
  }
  std::printf("SNR: %.1f\nallclose: %s\n", min_snr, all_close ? "true" : "false");
  return min_snr >= 90 && all_close ? 0 : 1;
}
