#include "model/synth_drafters.h"

#include "base/error.h"
#include "gguf.h"

namespace onebit::synth_detail {
namespace {

// DFlash's mask token fills the block the drafter denoises, so it should be one no text or chat
// template uses: the vocabulary's last token where that is a special one (control, user-defined
// or unused) no tokenizer.ggml.*_token_id key names, as the padding and reserved rows at the end
// are: 128255 <|reserved_special_token_250|> in llama-bpe, 151935 [PAD151935] in qwen2 and
// qwen35. (The first such token would be qwen's <|im_start|>.) Otherwise, as in llama-spm, the
// unknown token, which byte fallback never produces.
uint32_t mask_token_id(const gguf_context* vocab, const std::string& vocab_path) {
  const int64_t tokens_id = gguf_find_key(vocab, "tokenizer.ggml.tokens");
  const int64_t types_id = gguf_find_key(vocab, "tokenizer.ggml.token_type");
  if (tokens_id >= 0 && types_id >= 0 && gguf_get_arr_type(vocab, types_id) == GGUF_TYPE_INT32 &&
      gguf_get_arr_n(vocab, tokens_id) > 0 && gguf_get_arr_n(vocab, types_id) == gguf_get_arr_n(vocab, tokens_id)) {
    const auto last = static_cast<uint32_t>(gguf_get_arr_n(vocab, tokens_id) - 1);
    const int32_t type = static_cast<const int32_t*>(gguf_get_arr_data(vocab, types_id))[last];
    bool named = false;
    for (int64_t i = 0; i < gguf_get_n_kv(vocab); ++i) {
      const std::string key = gguf_get_key(vocab, i);
      named |= key.starts_with("tokenizer.ggml.") && key.ends_with("_token_id") &&
               gguf_get_kv_type(vocab, i) == GGUF_TYPE_UINT32 && gguf_get_val_u32(vocab, i) == last;
    }
    if (type >= 3 && type <= 5 && !named) return last;  // LLAMA_TOKEN_TYPE_CONTROL..UNUSED
  }
  if (int64_t unknown_id = gguf_find_key(vocab, "tokenizer.ggml.unknown_token_id");
      unknown_id >= 0 && gguf_get_kv_type(vocab, unknown_id) == GGUF_TYPE_UINT32)
    return gguf_get_val_u32(vocab, unknown_id);
  throw Error(vocab_path + ": no token to be dflash's mask (no special last token, no unknown token)");
}

}  // namespace

void add_attention(std::vector<TensorSpec>& t, const std::string& b, const SynthShape& s, int64_t n_in, int64_t q_factor,
                   bool qk_norm) {
  const int64_t hd = head_dim_of(s);
  t.push_back(weight(b + "attn_q.weight", {n_in, s.n_head * hd * q_factor}));
  t.push_back(weight(b + "attn_k.weight", {n_in, s.n_head_kv * hd}));
  t.push_back(weight(b + "attn_v.weight", {n_in, s.n_head_kv * hd}));
  t.push_back(weight(b + "attn_output.weight", {s.n_head * hd, s.n_embd}));
  if (qk_norm) {
    t.push_back(norm(b + "attn_q_norm.weight", hd));
    t.push_back(norm(b + "attn_k_norm.weight", hd));
  }
}

void add_dense_ffn(std::vector<TensorSpec>& t, const std::string& b, const SynthShape& s) {
  t.push_back(weight(b + "ffn_gate.weight", {s.n_embd, s.n_ff}));
  t.push_back(weight(b + "ffn_up.weight", {s.n_embd, s.n_ff}));
  t.push_back(weight(b + "ffn_down.weight", {s.n_ff, s.n_embd}));
}

void add_mtp_layer(std::vector<TensorSpec>& t, const SynthShape& s, int64_t il) {
  const std::string b = "blk." + std::to_string(il) + ".";
  t.push_back(norm(b + "attn_norm.weight", s.n_embd));
  add_attention(t, b, s, s.n_embd, 2, true);
  t.push_back(norm(b + "post_attention_norm.weight", s.n_embd));
  add_dense_ffn(t, b, s);
  // Its input: the normed embedding of the next token beside the normed hidden state that
  // predicted it.
  t.push_back(weight(b + "nextn.eh_proj.weight", {2 * s.n_embd, s.n_embd}));
  t.push_back(norm(b + "nextn.enorm.weight", s.n_embd));
  t.push_back(norm(b + "nextn.hnorm.weight", s.n_embd));
  t.push_back(norm(b + "nextn.shared_head_norm.weight", s.n_embd));
}

// fc fuses the target features into one hidden state, which each layer turns into K/V of the
// draft cache; a Qwen3-style dense stack (q/k norms, SwiGLU) then denoises a block of masks.
std::vector<TensorSpec> dflash_tensors(const SynthShape& s) {
  const auto n_features = static_cast<int64_t>(s.target_layers.size());
  std::vector<TensorSpec> t = {weight("fc.weight", {n_features * s.n_embd, s.n_embd}),
                               norm("enc.output_norm.weight", s.n_embd), norm("output_norm.weight", s.n_embd)};
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    t.push_back(norm(b + "attn_norm.weight", s.n_embd));
    add_attention(t, b, s, s.n_embd, 1, true);
    t.push_back(norm(b + "ffn_norm.weight", s.n_embd));
    add_dense_ffn(t, b, s);
  }
  return t;
}

// fc fuses the 3 target features into g; the one llama-style layer attends over the normed token
// embedding beside the normed g, so q, k and v read 2 * n_embd.
std::vector<TensorSpec> eagle3_tensors(const SynthShape& s) {
  std::vector<TensorSpec> t = {weight("fc.weight", {3 * s.n_embd, s.n_embd}), norm("output_norm.weight", s.n_embd)};
  if (s.draft_vocab > 0) {
    // d2t names the target token of each row of the drafter's own head.
    t.push_back({"d2t", {s.draft_vocab}, Fill::kTokenIds, false});
    t.push_back(weight("output.weight", {s.n_embd, s.draft_vocab}));
  }
  const std::string b = "blk.0.";
  t.push_back(norm(b + "attn_norm.weight", s.n_embd));
  t.push_back(norm(b + "attn_norm_2.weight", s.n_embd));
  add_attention(t, b, s, 2 * s.n_embd, 1, false);
  t.push_back(norm(b + "ffn_norm.weight", s.n_embd));
  add_dense_ffn(t, b, s);
  return t;
}

void check_speculative_fields(const SynthShape& s) {
  if (s.nextn > 0 && s.architecture != "qwen35") throw Error(s.name + ": MTP layers (nextn) need architecture qwen35");
  if (s.drafter.empty()) return;
  if (s.drafter != "dflash" && s.drafter != "eagle3" && s.drafter != "mtp-head")
    throw Error(s.name + ": unknown drafter \"" + s.drafter + "\" (known: dflash, eagle3, mtp-head)");
  if (s.architecture != (s.drafter == "mtp-head" ? "qwen35" : s.drafter))
    throw Error(s.name + ": a " + s.drafter + " drafter cannot have architecture " + s.architecture);
  const SynthShape* target = find_synth_shape(s.target);
  if (target == nullptr) throw Error(s.name + ": unknown target shape \"" + s.target + "\"");
  // The engine checks neither: a drafter reads the target's hidden states and embeddings.
  if (target->vocab != s.vocab || target->n_embd != s.n_embd)
    throw Error(s.name + ": a drafter has its target's vocabulary and width (" + target->name + ": " + target->vocab + ", " +
                std::to_string(target->n_embd) + " wide)");
  if (s.drafter == "mtp-head") {
    if (s.nextn != 1) throw Error(s.name + ": an MTP head holds exactly one MTP layer (nextn 1)");
    return;
  }
  if (s.drafter == "eagle3" && (s.n_layer != 1 || s.target_layers.size() != 3))
    throw Error(s.name + ": an eagle3 drafter has 1 layer and reads exactly 3 target layers");
  if (s.draft_vocab > 0 && s.drafter != "eagle3") throw Error(s.name + ": only an eagle3 drafter has a draft_vocab");
  if (s.drafter == "dflash" && (s.target_layers.empty() || s.block_size < 2))
    throw Error(s.name + ": a dflash drafter reads at least one target layer and drafts blocks of 2 tokens or more");
  for (int id : s.target_layers)
    if (id < 0 || id >= target->n_layer)
      throw Error(s.name + ": target layer " + std::to_string(id) + " is not one of " + target->name + "'s " +
                  std::to_string(target->n_layer) + " blocks");
}

void set_drafter_keys(gguf_context* g, const SynthShape& s, const gguf_context* vocab, const std::string& vocab_path) {
  if (s.drafter != "dflash" && s.drafter != "eagle3") return;
  const std::string& a = s.architecture;
  const std::vector<int32_t> layers(s.target_layers.begin(), s.target_layers.end());
  gguf_set_arr_data(g, (a + ".target_layers").c_str(), GGUF_TYPE_INT32, layers.data(), layers.size());
  if (s.drafter == "eagle3") {
    gguf_set_val_u32(g, "eagle3.target_hidden_size", static_cast<uint32_t>(s.n_embd));
    return;
  }
  gguf_set_val_u32(g, "dflash.block_size", static_cast<uint32_t>(s.block_size));
  // Without a mask token every draft decode fails (an invalid token) and nothing is drafted.
  gguf_set_val_u32(g, "tokenizer.ggml.mask_token_id", mask_token_id(vocab, vocab_path));
  if (find_synth_shape(s.target)->architecture == "qwen35") {
    // The target ropes with M-RoPE, so the drafter does too: every pair in the temporal section.
    const int32_t sections[4] = {static_cast<int32_t>(head_dim_of(s) / 2), 0, 0, 0};
    gguf_set_arr_data(g, "dflash.rope.dimension_sections", GGUF_TYPE_INT32, sections, 4);
  }
}

}  // namespace onebit::synth_detail
