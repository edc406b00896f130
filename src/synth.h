// Random-weight GGUF models with the exact tensor shapes of a real architecture and a real
// tokenizer, written with ggml's gguf API. They load and run in the engine, so serve, bench and
// tests can use a model of any size without downloading one.
//
// Weights are drawn from N(0, 1/sqrt(fan_in)) and norms are 1, which keeps activations finite
// through any depth; outputs are meaningless text, speeds are real.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace onebit {

struct SynthShape {
  std::string name;          // "tiny-llama"
  std::string architecture;  // "llama" or "qwen3"
  std::string vocab;         // engine vocab file stem: "llama-spm", "qwen2", "llama-bpe"
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;      // 0: n_embd / n_head
  int64_t n_ff = 0;
  int64_t n_ctx = 4096;      // context_length written into the file
  double rope_base = 10000;
  bool tied_embeddings = false;
};

// The shapes 1bit knows, by name.
const std::vector<SynthShape>& synth_shapes();
const SynthShape* find_synth_shape(const std::string& name);

struct SynthOptions {
  std::string type = "f16";  // weight type of 2-D tensors: f32, f16, q8_0, q4_0
  uint64_t seed = 1;
  std::string vocab_dir;     // where ggml-vocab-<vocab>.gguf files are
};

// Writes the model to `out`. `progress` (may be null) receives (bytes written, total bytes).
// Throws Error for an unknown type, a missing vocab file or a write failure.
void write_synth_model(const SynthShape& shape, const SynthOptions& options, const std::string& out,
                       const std::function<void(uint64_t, uint64_t)>& progress = nullptr);

}  // namespace onebit
