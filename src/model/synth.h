// Random-weight GGUF models with the exact tensor shapes of a real architecture and a real
// tokenizer, written with ggml's gguf API, and speculative drafters for them (DFlash, EAGLE-3,
// Qwen3.5 MTP). They load and run in the engine, so serve, bench and tests can use a model of any
// size without downloading one.
//
// Weights are uniform with variance 1/fan_in, norms are 1, and the gated delta-net's decay
// parameters sit in the ranges trained models have, which keeps activations finite through any
// depth; outputs are meaningless text, speeds are real.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace onebit {

struct SynthShape {
  std::string name;          // "llama3-8b"
  std::string architecture;  // llama, qwen3 (dense), qwen3moe (MoE), qwen35 (hybrid delta-net), dflash, eagle3
  std::string vocab;         // engine vocab file stem: "llama-spm", "qwen2", "llama-bpe", "qwen35"
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;      // 0: n_embd / n_head
  int64_t n_ff = 0;          // dense FFN width (0 for MoE)
  int64_t n_ctx = 4096;      // context_length written into the file
  double rope_base = 10000;
  bool tied_embeddings = false;
  // MoE (qwen3moe)
  int64_t n_expert = 0, n_expert_used = 0, n_ff_expert = 0;
  // Hybrid (qwen35): gated delta-net layers, every `full_attention_interval`-th layer attention
  int64_t ssm_state = 0, ssm_groups = 0, ssm_heads = 0, ssm_conv = 4, full_attention_interval = 4;
  int64_t n_rot = 0;         // rotary dimensions (0: head_dim)
  // A reranker (qwen3): rank pooling and a classifier head of this many outputs; 0 for a model
  // that generates text.
  int64_t n_cls_out = 0;
  // Speculative decoding. `drafter` is "" for a model, "dflash" or "eagle3" for a drafter that
  // reads the hidden states of `target`'s blocks, or "mtp-head" for a qwen35 file holding only
  // the MTP layer (plus token_embd and output_norm) of `target`. A drafter borrows the target's
  // embeddings, so it has the target's vocabulary and n_embd (the shape table copies them; a
  // mismatch is an Error when written).
  std::string drafter;
  std::string target;              // the shape a drafter drafts for
  std::vector<int> target_layers;  // dflash, eagle3 (3 of them): it reads the inputs of these target blocks
  int64_t block_size = 0;          // dflash: tokens drafted per block (the engine drafts at most one less)
  int64_t draft_vocab = 0;         // eagle3: its own head over this many target tokens (d2t); 0: the target's
  int64_t nextn = 0;               // qwen35: MTP layers after the n_layer trunk blocks (the engine takes 1)
  std::string note;          // where the shape comes from
};

// The shapes 1bit knows, by name.
const std::vector<SynthShape>& synth_shapes();
const SynthShape* find_synth_shape(const std::string& name);

struct SynthOptions {
  std::string type = "f16";  // weight type of 2-D tensors: f32, f16, q8_0, q4_0
  uint64_t seed = 1;
  std::string vocab_dir;     // where ggml-vocab-<vocab>.gguf files are
};

// Parameters of a shape with a vocabulary of `n_vocab` tokens (its weights' element count; an
// eagle3 drafter's d2t token ids are no weights).
int64_t synth_parameter_count(const SynthShape& shape, int64_t n_vocab);

// Writes the model to `out`. `progress` (may be null) receives (bytes written, total bytes).
// Throws Error for an unknown type, a missing vocab file, a drafter that cannot draft for its
// target or a write failure.
void write_synth_model(const SynthShape& shape, const SynthOptions& options, const std::string& out,
                       const std::function<void(uint64_t, uint64_t)>& progress = nullptr);

}  // namespace onebit
