// Internal to 1bit synth: the tensor list entries both synth.cc and synth_drafters.cc build, and
// what speculative drafters add to a file (their tensors, keys and checks).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/synth.h"

struct gguf_context;

namespace onebit::synth_detail {

// What a tensor holds: random weights, ones (norms), one of the delta-net's parameters, or
// token ids (a drafter's d2t, stored as I64).
enum class Fill { kWeight, kOnes, kDecay, kZero, kTokenIds };

struct TensorSpec {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the input dimension
  Fill fill = Fill::kWeight;
  bool keep_f32 = false;    // stays F32 whatever the weight type (norms, small parameters)
};

inline TensorSpec weight(std::string name, std::vector<int64_t> ne) { return {std::move(name), std::move(ne), Fill::kWeight, false}; }
inline TensorSpec norm(std::string name, int64_t n) { return {std::move(name), {n}, Fill::kOnes, true}; }

inline int64_t head_dim_of(const SynthShape& s) { return s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head; }

// q, k, v and output projections of block prefix `b` reading `n_in` features; the query is
// `q_factor` times as wide (2 where it carries an output gate).
void add_attention(std::vector<TensorSpec>& t, const std::string& b, const SynthShape& s, int64_t n_in, int64_t q_factor,
                   bool qk_norm);
void add_dense_ffn(std::vector<TensorSpec>& t, const std::string& b, const SynthShape& s);

// A qwen35 MTP layer, blk.`il`: a full-attention block plus the nextn projection and norms.
void add_mtp_layer(std::vector<TensorSpec>& t, const SynthShape& s, int64_t il);
// The whole tensor list of a dflash or eagle3 drafter: it owns no embeddings and, without
// draft_vocab, no head; the engine borrows the target's.
std::vector<TensorSpec> dflash_tensors(const SynthShape& s);
std::vector<TensorSpec> eagle3_tensors(const SynthShape& s);

// Throws Error unless `s`'s speculative fields make a file the engine drafts with: a known
// drafter kind, a known target of the same vocabulary and width, target layers it has.
void check_speculative_fields(const SynthShape& s);
// The dflash.* or eagle3.* keys beyond the generic ones; `vocab` is the tokenizer file.
void set_drafter_keys(gguf_context* g, const SynthShape& s, const gguf_context* vocab, const std::string& vocab_path);

}  // namespace onebit::synth_detail
