// A ggml graph on the engine's CUDA backend: how a kernel package's driver times the engine's
// own kernel for an op on the same data as ours. Build the tensors and the graph in ctx() and
// graph(), then allocate(), set the inputs, and run().
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "ggml-backend.h"
#include "ggml-cuda.h"
#include "ggml.h"

namespace kernels {

class EngineGraph {
 public:
  // Room for `tensors` tensors and one graph, on CUDA device 0; exits when ggml sees none.
  explicit EngineGraph(size_t tensors) {
    backend_ = ggml_backend_cuda_init(0);
    if (backend_ == nullptr) {
      std::fprintf(stderr, "driver: ggml has no CUDA device\n");
      std::exit(2);
    }
    ggml_init_params ip{ggml_tensor_overhead() * tensors + ggml_graph_overhead(), nullptr, true};
    ctx_ = ggml_init(ip);
    graph_ = ggml_new_graph(ctx_);
  }
  ~EngineGraph() {
    if (buffer_ != nullptr) ggml_backend_buffer_free(buffer_);
    ggml_free(ctx_);
    ggml_backend_free(backend_);
  }
  EngineGraph(const EngineGraph&) = delete;
  EngineGraph& operator=(const EngineGraph&) = delete;

  ggml_context* ctx() const { return ctx_; }
  ggml_cgraph* graph() const { return graph_; }
  // Puts every tensor of ctx() on the GPU.
  void allocate() { buffer_ = ggml_backend_alloc_ctx_tensors(ctx_, backend_); }
  // Milliseconds for the whole graph, wall clock (launches included).
  double run() {
    const auto t0 = std::chrono::steady_clock::now();
    ggml_backend_graph_compute(backend_, graph_);
    ggml_backend_synchronize(backend_);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

 private:
  ggml_backend_t backend_ = nullptr;
  ggml_context* ctx_ = nullptr;
  ggml_cgraph* graph_ = nullptr;
  ggml_backend_buffer_t buffer_ = nullptr;
};

}  // namespace kernels
