#include "model/synth.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>

#include "base/error.h"
#include "ggml.h"
#include "gguf.h"
#include "model/synth_drafters.h"

namespace onebit {
namespace {

using namespace synth_detail;

struct GgufDeleter {
  void operator()(gguf_context* c) const { gguf_free(c); }
};
struct GgmlDeleter {
  void operator()(ggml_context* c) const { ggml_free(c); }
};

// Copies one key-value pair between gguf contexts, arrays included.
void copy_kv(gguf_context* dst, const gguf_context* src, int64_t id) {
  const char* key = gguf_get_key(src, id);
  gguf_type t = gguf_get_kv_type(src, id);
  switch (t) {
    case GGUF_TYPE_UINT8: gguf_set_val_u8(dst, key, gguf_get_val_u8(src, id)); break;
    case GGUF_TYPE_INT8: gguf_set_val_i8(dst, key, gguf_get_val_i8(src, id)); break;
    case GGUF_TYPE_UINT16: gguf_set_val_u16(dst, key, gguf_get_val_u16(src, id)); break;
    case GGUF_TYPE_INT16: gguf_set_val_i16(dst, key, gguf_get_val_i16(src, id)); break;
    case GGUF_TYPE_UINT32: gguf_set_val_u32(dst, key, gguf_get_val_u32(src, id)); break;
    case GGUF_TYPE_INT32: gguf_set_val_i32(dst, key, gguf_get_val_i32(src, id)); break;
    case GGUF_TYPE_FLOAT32: gguf_set_val_f32(dst, key, gguf_get_val_f32(src, id)); break;
    case GGUF_TYPE_UINT64: gguf_set_val_u64(dst, key, gguf_get_val_u64(src, id)); break;
    case GGUF_TYPE_INT64: gguf_set_val_i64(dst, key, gguf_get_val_i64(src, id)); break;
    case GGUF_TYPE_FLOAT64: gguf_set_val_f64(dst, key, gguf_get_val_f64(src, id)); break;
    case GGUF_TYPE_BOOL: gguf_set_val_bool(dst, key, gguf_get_val_bool(src, id)); break;
    case GGUF_TYPE_STRING: gguf_set_val_str(dst, key, gguf_get_val_str(src, id)); break;
    case GGUF_TYPE_ARRAY: {
      gguf_type at = gguf_get_arr_type(src, id);
      size_t n = gguf_get_arr_n(src, id);
      if (at == GGUF_TYPE_STRING) {
        std::vector<const char*> strs(n);
        for (size_t i = 0; i < n; ++i) strs[i] = gguf_get_arr_str(src, id, i);
        gguf_set_arr_str(dst, key, strs.data(), n);
      } else {
        gguf_set_arr_data(dst, key, at, gguf_get_arr_data(src, id), n);
      }
      break;
    }
    default:
      break;
  }
}

// splitmix64: a fast, well-mixed generator, seeded per row so output does not depend on order.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float uniform() { return static_cast<float>(static_cast<int64_t>(next() >> 11) - (1ll << 52)) * 0x1p-52f; }
};

ggml_type weight_type(const std::string& t) {
  if (t == "f32") return GGML_TYPE_F32;
  if (t == "f16") return GGML_TYPE_F16;
  if (t == "q8_0") return GGML_TYPE_Q8_0;
  if (t == "q4_0") return GGML_TYPE_Q4_0;
  throw Error("unknown weight type \"" + t + "\" (known: f32, f16, q8_0, q4_0)");
}

uint32_t file_type_of(ggml_type t) {
  switch (t) {
    case GGML_TYPE_F32: return 0;
    case GGML_TYPE_F16: return 1;
    case GGML_TYPE_Q4_0: return 2;
    default: return 7;  // Q8_0
  }
}

void add_trunk_layer(std::vector<TensorSpec>& t, const SynthShape& s, int64_t i) {
  const std::string b = "blk." + std::to_string(i) + ".";
  t.push_back(norm(b + "attn_norm.weight", s.n_embd));
  const bool hybrid = s.architecture == "qwen35";
  const bool recurrent = hybrid && (i + 1) % s.full_attention_interval != 0;
  if (recurrent) {
    // Gated delta-net: fused q/k/v projection, output gate, short convolution, decay.
    const int64_t key_dim = s.ssm_state * s.ssm_groups, value_dim = s.ssm_state * s.ssm_heads;
    t.push_back(weight(b + "attn_qkv.weight", {s.n_embd, 2 * key_dim + value_dim}));
    t.push_back(weight(b + "attn_gate.weight", {s.n_embd, value_dim}));
    t.push_back({b + "ssm_conv1d.weight", {s.ssm_conv, 2 * key_dim + value_dim}, Fill::kWeight, true});
    t.push_back({b + "ssm_dt.bias", {s.ssm_heads}, Fill::kZero, true});
    t.push_back({b + "ssm_a", {s.ssm_heads}, Fill::kDecay, true});
    t.push_back(weight(b + "ssm_beta.weight", {s.n_embd, s.ssm_heads}));
    t.push_back(weight(b + "ssm_alpha.weight", {s.n_embd, s.ssm_heads}));
    t.push_back(norm(b + "ssm_norm.weight", s.ssm_state));
    t.push_back(weight(b + "ssm_out.weight", {value_dim, s.n_embd}));
  } else {
    // Attention; the hybrid's query carries its output gate (twice as wide).
    add_attention(t, b, s, s.n_embd, hybrid ? 2 : 1, s.architecture != "llama");
  }
  t.push_back(norm(b + (hybrid ? "post_attention_norm.weight" : "ffn_norm.weight"), s.n_embd));
  if (s.n_expert > 0) {
    t.push_back(weight(b + "ffn_gate_inp.weight", {s.n_embd, s.n_expert}));
    t.push_back(weight(b + "ffn_gate_exps.weight", {s.n_embd, s.n_ff_expert, s.n_expert}));
    t.push_back(weight(b + "ffn_up_exps.weight", {s.n_embd, s.n_ff_expert, s.n_expert}));
    t.push_back(weight(b + "ffn_down_exps.weight", {s.n_ff_expert, s.n_embd, s.n_expert}));
  } else {
    add_dense_ffn(t, b, s);
  }
}

std::vector<TensorSpec> tensor_specs(const SynthShape& s, int64_t n_vocab) {
  if (s.drafter == "dflash") return dflash_tensors(s);
  if (s.drafter == "eagle3") return eagle3_tensors(s);
  std::vector<TensorSpec> t;
  t.push_back(weight("token_embd.weight", {s.n_embd, n_vocab}));
  // Without trunk blocks the engine loads a qwen35 file as an MTP layer alone.
  if (s.drafter != "mtp-head")
    for (int64_t i = 0; i < s.n_layer; ++i) add_trunk_layer(t, s, i);
  // MTP layers follow the trunk and attend fully, wherever full_attention_interval would put them.
  for (int64_t i = s.n_layer; i < s.n_layer + s.nextn; ++i) add_mtp_layer(t, s, i);
  t.push_back(norm("output_norm.weight", s.n_embd));
  if (!s.tied_embeddings) t.push_back(weight("output.weight", {s.n_embd, n_vocab}));
  if (s.n_cls_out > 0) t.push_back(weight("cls.output.weight", {s.n_embd, s.n_cls_out}));
  return t;
}

// Fills rows [r0, r1) of a tensor and converts them to its type. Rows are seeded one by one, so
// the bytes do not depend on how rows are split among threads.
void fill_rows(const TensorSpec& s, ggml_type t, uint64_t seed, int64_t tensor, int64_t r0, int64_t r1,
               const std::vector<bool>& silent, bool output, uint8_t* dst) {
  const int64_t n = s.ne[0];
  if (s.fill == Fill::kTokenIds) {
    // A d2t of the target's first n tokens: BPE vocabularies rank tokens by merge order, so
    // roughly by frequency, and EAGLE-3 keeps the most frequent.
    for (int64_t id = 0; id < n; ++id) std::memcpy(dst + id * sizeof id, &id, sizeof id);
    return;
  }
  const size_t row_bytes = ggml_row_size(t, n);
  const float scale = std::sqrt(3.0f / static_cast<float>(n));
  std::vector<float> row(static_cast<size_t>(n));
  for (int64_t r = r0; r < r1; ++r) {
    Rng rng{seed * 0x100000001B3ull ^ (static_cast<uint64_t>(tensor) << 40) ^ static_cast<uint64_t>(r)};
    const bool zero = s.fill == Fill::kZero || (output && silent[static_cast<size_t>(r % static_cast<int64_t>(silent.size()))]);
    for (auto& v : row) {
      switch (s.fill) {
        case Fill::kOnes: v = 1.0f; break;
        case Fill::kDecay: v = -std::exp(rng.uniform() * 2.0f - 1.0f); break;  // -exp(A_log), A_log in [-3, 1]
        default: v = zero ? 0.0f : rng.uniform() * scale;
      }
    }
    uint8_t* out = dst + static_cast<size_t>(r - r0) * row_bytes;
    if (t == GGML_TYPE_F32) std::memcpy(out, row.data(), row_bytes);
    else if (t == GGML_TYPE_F16) ggml_fp32_to_fp16_row(row.data(), reinterpret_cast<ggml_fp16_t*>(out), n);
    else ggml_quantize_chunk(t, row.data(), out, 0, 1, n, nullptr);
  }
}

// A drafter reads `target`'s hidden states and borrows its embeddings, so it takes the target's
// vocabulary, width and context.
SynthShape drafter_of(const SynthShape& target, SynthShape drafter) {
  drafter.architecture = drafter.drafter;
  drafter.vocab = target.vocab;
  drafter.n_embd = target.n_embd;
  drafter.n_ctx = target.n_ctx;
  drafter.target = target.name;
  return drafter;
}

SynthShape with_mtp_layer(SynthShape model, std::string name, std::string note) {
  model.name = std::move(name);
  model.nextn = 1;
  model.note = std::move(note);
  return model;
}

// The MTP layer of `model` in a file of its own: `model`'s keys and the layer's tensors.
SynthShape mtp_head_of(const SynthShape& model, std::string name, std::string note) {
  SynthShape head = with_mtp_layer(model, std::move(name), std::move(note));
  head.drafter = "mtp-head";
  head.target = model.name;
  return head;
}

}  // namespace

const std::vector<SynthShape>& synth_shapes() {
  static const std::vector<SynthShape> shapes = [] {
    // Small ones for tests: load in well under a second, a few hundred tokens/s on 2 cores.
    const SynthShape tiny_llama{.name = "tiny-llama", .architecture = "llama", .vocab = "llama-spm", .n_embd = 64,
                                .n_layer = 2, .n_head = 4, .n_head_kv = 2, .n_ff = 128, .n_ctx = 2048, .note = "test size"};
    const SynthShape tiny_qwen35{.name = "tiny-qwen35", .architecture = "qwen35", .vocab = "qwen35", .n_embd = 128,
                                 .n_layer = 4, .n_head = 4, .n_head_kv = 2, .head_dim = 64, .n_ff = 256, .rope_base = 1e7,
                                 .tied_embeddings = true, .ssm_state = 32, .ssm_groups = 2, .ssm_heads = 4, .n_rot = 16,
                                 .note = "test size"};
    // Real shapes.
    const SynthShape llama3_8b{.name = "llama3-8b", .architecture = "llama", .vocab = "llama-bpe", .n_embd = 4096,
                               .n_layer = 32, .n_head = 32, .n_head_kv = 8, .n_ff = 14336, .n_ctx = 8192,
                               .rope_base = 500000, .note = "Llama 3 8B"};
    const SynthShape qwen35_9b{.name = "qwen35-9b", .architecture = "qwen35", .vocab = "qwen35", .n_embd = 4096,
                               .n_layer = 32, .n_head = 16, .n_head_kv = 4, .head_dim = 256, .n_ff = 12288,
                               .n_ctx = 32768, .rope_base = 1e7, .ssm_state = 128, .ssm_groups = 16, .ssm_heads = 32,
                               .n_rot = 64,
                               .note = "a Qwen3.5-style hybrid of about 9B: 3 gated delta-net layers to 1 attention layer"};
    return std::vector<SynthShape>{
        tiny_llama,
        {.name = "tiny-qwen3", .architecture = "qwen3", .vocab = "qwen2", .n_embd = 64, .n_layer = 2, .n_head = 4,
         .n_head_kv = 2, .head_dim = 32, .n_ff = 192, .rope_base = 1e6, .tied_embeddings = true, .note = "test size"},
        {.name = "tiny-qwen3moe", .architecture = "qwen3moe", .vocab = "qwen2", .n_embd = 64, .n_layer = 2, .n_head = 4,
         .n_head_kv = 2, .head_dim = 32, .rope_base = 1e6, .n_expert = 8, .n_expert_used = 2, .n_ff_expert = 64,
         .note = "test size"},
        {.name = "tiny-qwen3-reranker", .architecture = "qwen3", .vocab = "qwen2", .n_embd = 64, .n_layer = 2,
         .n_head = 4, .n_head_kv = 2, .head_dim = 32, .n_ff = 192, .rope_base = 1e6, .tied_embeddings = true,
         .n_cls_out = 1, .note = "test size, a reranker"},
        tiny_qwen35,
        with_mtp_layer(tiny_qwen35, "tiny-qwen35-mtp", "test size, tiny-qwen35 with its MTP layer"),
        mtp_head_of(tiny_qwen35, "tiny-qwen35-mtp-head",
                    "test size, tiny-qwen35's MTP layer alone: drafts for tiny-qwen35 and tiny-qwen35-mtp"),
        drafter_of(tiny_llama, {.name = "tiny-llama-dflash", .n_layer = 1, .n_head = 4, .n_head_kv = 2, .n_ff = 128,
                                .drafter = "dflash", .target_layers = {0, 1}, .block_size = 4,
                                .note = "test size, a DFlash drafter for tiny-llama"}),
        drafter_of(tiny_llama, {.name = "tiny-llama-eagle3", .n_layer = 1, .n_head = 4, .n_head_kv = 2, .n_ff = 128,
                                .drafter = "eagle3", .target_layers = {0, 1, 1}, .draft_vocab = 1000,
                                .note = "test size, an EAGLE-3 drafter for tiny-llama with a head over 1000 tokens"}),
        drafter_of(tiny_qwen35, {.name = "tiny-qwen35-dflash", .n_layer = 1, .n_head = 4, .n_head_kv = 2, .head_dim = 32,
                                 .n_ff = 256, .rope_base = 1e7, .drafter = "dflash", .target_layers = {1, 2, 3},
                                 .block_size = 8, .note = "test size, a DFlash drafter for tiny-qwen35"}),
        llama3_8b,
        {.name = "llama3.2-1b", .architecture = "llama", .vocab = "llama-bpe", .n_embd = 2048, .n_layer = 16,
         .n_head = 32, .n_head_kv = 8, .n_ff = 8192, .n_ctx = 8192, .rope_base = 500000, .tied_embeddings = true,
         .note = "Llama 3.2 1B: Llama 3 8B's vocabulary, so it drafts for it"},
        // The DFlash drafters have z-lab's layout: 5 layers reading the outputs of target blocks
        // round(1 + j * (L - 4) / 4), j < 5, which are the inputs of the blocks one further.
        drafter_of(llama3_8b, {.name = "llama3-8b-dflash", .n_layer = 5, .n_head = 32, .n_head_kv = 8, .head_dim = 128,
                               .n_ff = 14336, .rope_base = 500000, .drafter = "dflash",
                               .target_layers = {2, 9, 16, 23, 30}, .block_size = 16,
                               .note = "a DFlash drafter for Llama 3 8B (z-lab's layout: 5 layers, blocks of 16)"}),
        drafter_of(llama3_8b, {.name = "llama3-8b-eagle3", .n_layer = 1, .n_head = 32, .n_head_kv = 8, .n_ff = 14336,
                               .rope_base = 500000, .drafter = "eagle3", .target_layers = {2, 16, 29},
                               .draft_vocab = 32000,
                               .note = "the shape of Llama 3.1 8B's EAGLE-3 drafter (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B)"}),
        {.name = "qwen3-8b", .architecture = "qwen3", .vocab = "qwen2", .n_embd = 4096, .n_layer = 36, .n_head = 32,
         .n_head_kv = 8, .head_dim = 128, .n_ff = 12288, .n_ctx = 40960, .rope_base = 1e6, .note = "Qwen3 8B"},
        {.name = "qwen3-30b-a3b", .architecture = "qwen3moe", .vocab = "qwen2", .n_embd = 2048, .n_layer = 48,
         .n_head = 32, .n_head_kv = 4, .head_dim = 128, .n_ctx = 40960, .rope_base = 1e6, .n_expert = 128,
         .n_expert_used = 8, .n_ff_expert = 768, .note = "Qwen3 30B-A3B (MoE, 128 experts, 8 used)"},
        qwen35_9b,
        with_mtp_layer(qwen35_9b, "qwen35-9b-mtp", "qwen35-9b with one MTP layer, as Qwen3.5 ships"),
        mtp_head_of(qwen35_9b, "qwen35-9b-mtp-head", "qwen35-9b's MTP layer alone, as convert_hf_to_gguf.py --mtp writes it"),
        drafter_of(qwen35_9b, {.name = "qwen35-9b-dflash", .n_layer = 5, .n_head = 32, .n_head_kv = 8, .head_dim = 128,
                               .n_ff = 12288, .rope_base = 1e7, .drafter = "dflash", .target_layers = {2, 9, 16, 23, 30},
                               .block_size = 16, .note = "a DFlash drafter for qwen35-9b (5 Qwen3-style layers, blocks of 16)"}),
        {.name = "qwen35-2b", .architecture = "qwen35", .vocab = "qwen35", .n_embd = 2048, .n_layer = 24, .n_head = 8,
         .n_head_kv = 2, .head_dim = 256, .n_ff = 6144, .n_ctx = 32768, .rope_base = 1e7, .ssm_state = 128,
         .ssm_groups = 16, .ssm_heads = 16, .n_rot = 64,
         .note = "a smaller Qwen3.5-style hybrid: 16 delta-net heads (qwen35-9b has 32)"},
    };
  }();
  return shapes;
}

const SynthShape* find_synth_shape(const std::string& name) {
  for (const auto& s : synth_shapes())
    if (s.name == name) return &s;
  return nullptr;
}

int64_t synth_parameter_count(const SynthShape& shape, int64_t n_vocab) {
  int64_t n = 0;
  for (const auto& t : tensor_specs(shape, n_vocab)) {
    if (t.fill == Fill::kTokenIds) continue;
    int64_t e = 1;
    for (int64_t d : t.ne) e *= d;
    n += e;
  }
  return n;
}

void write_synth_model(const SynthShape& shape, const SynthOptions& options, const std::string& out,
                       const std::function<void(uint64_t, uint64_t)>& progress) {
  const ggml_type wtype = weight_type(options.type);
  check_speculative_fields(shape);
  const std::string vocab_path = options.vocab_dir + "/ggml-vocab-" + shape.vocab + ".gguf";
  gguf_init_params vp{/*no_alloc=*/true, /*ctx=*/nullptr};
  std::unique_ptr<gguf_context, GgufDeleter> vocab(gguf_init_from_file(vocab_path.c_str(), vp));
  if (!vocab) throw Error(vocab_path + ": cannot read the vocabulary");
  int64_t tokens_id = gguf_find_key(vocab.get(), "tokenizer.ggml.tokens");
  if (tokens_id < 0) throw Error(vocab_path + ": has no tokenizer.ggml.tokens");
  const int64_t n_vocab = static_cast<int64_t>(gguf_get_arr_n(vocab.get(), tokens_id));
  // Byte-fallback tokens get all-zero output rows: their logit is then 0 while a real token's is
  // random, so greedy decoding never emits a lone byte, and replies stay valid UTF-8 (the
  // engine's chat parser rejects anything else).
  std::vector<bool> silent(static_cast<size_t>(n_vocab), false);
  if (int64_t types_id = gguf_find_key(vocab.get(), "tokenizer.ggml.token_type");
      types_id >= 0 && gguf_get_arr_type(vocab.get(), types_id) == GGUF_TYPE_INT32 &&
      static_cast<int64_t>(gguf_get_arr_n(vocab.get(), types_id)) == n_vocab) {
    const int32_t* types = static_cast<const int32_t*>(gguf_get_arr_data(vocab.get(), types_id));
    for (int64_t i = 0; i < n_vocab; ++i) silent[static_cast<size_t>(i)] = types[i] == 6;  // LLAMA_TOKEN_TYPE_BYTE
  }
  if (shape.draft_vocab > n_vocab)
    throw Error(shape.name + ": a draft vocabulary of " + std::to_string(shape.draft_vocab) + " tokens is larger than " +
                vocab_path + "'s " + std::to_string(n_vocab));

  std::unique_ptr<gguf_context, GgufDeleter> g(gguf_init_empty());
  const std::string& a = shape.architecture;
  gguf_set_val_str(g.get(), "general.architecture", a.c_str());
  gguf_set_val_str(g.get(), "general.name", ("1bit synth " + shape.name).c_str());
  gguf_set_val_u32(g.get(), "general.file_type", file_type_of(wtype));
  for (int64_t i = 0; i < gguf_get_n_kv(vocab.get()); ++i)
    if (std::strncmp(gguf_get_key(vocab.get(), i), "tokenizer.", 10) == 0) copy_kv(g.get(), vocab.get(), i);
  if (gguf_find_key(g.get(), "tokenizer.chat_template") < 0) {
    // ChatML, so --jinja has a template to render even for vocabularies that ship none.
    gguf_set_val_str(g.get(), "tokenizer.chat_template",
                     "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                     "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
  }
  const int64_t hd = head_dim_of(shape);
  auto u32 = [&](const std::string& key, int64_t v) { gguf_set_val_u32(g.get(), (a + "." + key).c_str(), static_cast<uint32_t>(v)); };
  u32("context_length", shape.n_ctx);
  u32("embedding_length", shape.n_embd);
  u32("block_count", shape.n_layer + shape.nextn);
  u32("feed_forward_length", shape.n_ff);
  u32("attention.head_count", shape.n_head);
  u32("attention.head_count_kv", shape.n_head_kv);
  u32("attention.key_length", hd);
  u32("attention.value_length", hd);
  u32("rope.dimension_count", shape.n_rot > 0 ? shape.n_rot : hd);
  gguf_set_val_f32(g.get(), (a + ".rope.freq_base").c_str(), static_cast<float>(shape.rope_base));
  gguf_set_val_f32(g.get(), (a + ".attention.layer_norm_rms_epsilon").c_str(), 1e-6f);
  if (shape.n_expert > 0) {
    u32("expert_count", shape.n_expert);
    u32("expert_used_count", shape.n_expert_used);
    u32("expert_feed_forward_length", shape.n_ff_expert);
  }
  if (shape.n_cls_out > 0) {
    u32("pooling_type", 4);  // rank
    std::vector<std::string> labels;
    for (int64_t i = 0; i < shape.n_cls_out; ++i) labels.push_back("label" + std::to_string(i));
    std::vector<const char*> label_ptrs;
    for (const auto& l : labels) label_ptrs.push_back(l.c_str());
    gguf_set_arr_str(g.get(), (a + ".classifier.output_labels").c_str(), label_ptrs.data(), label_ptrs.size());
  }
  if (shape.nextn > 0) u32("nextn_predict_layers", shape.nextn);
  set_drafter_keys(g.get(), shape, vocab.get(), vocab_path);
  if (shape.architecture == "qwen35") {
    u32("ssm.conv_kernel", shape.ssm_conv);
    u32("ssm.state_size", shape.ssm_state);
    u32("ssm.group_count", shape.ssm_groups);
    u32("ssm.time_step_rank", shape.ssm_heads);
    u32("ssm.inner_size", shape.ssm_state * shape.ssm_heads);
    u32("full_attention_interval", shape.full_attention_interval);
    // Text only: every rotary pair in the first (temporal) section.
    const int32_t sections[4] = {static_cast<int32_t>((shape.n_rot > 0 ? shape.n_rot : hd) / 2), 0, 0, 0};
    gguf_set_arr_data(g.get(), (a + ".rope.dimension_sections").c_str(), GGUF_TYPE_INT32, sections, 4);
  }

  const auto specs = tensor_specs(shape, n_vocab);
  ggml_init_params ip{ggml_tensor_overhead() * (specs.size() + 1), nullptr, /*no_alloc=*/true};
  std::unique_ptr<ggml_context, GgmlDeleter> meta(ggml_init(ip));
  for (const auto& s : specs) {
    ggml_type t = s.fill == Fill::kTokenIds ? GGML_TYPE_I64 : s.keep_f32 ? GGML_TYPE_F32 : wtype;
    if (ggml_blck_size(t) > 1 && s.ne[0] % ggml_blck_size(t) != 0) t = GGML_TYPE_F16;
    ggml_tensor* x = ggml_new_tensor(meta.get(), t, static_cast<int>(s.ne.size()), s.ne.data());
    ggml_set_name(x, s.name.c_str());
    gguf_add_tensor(g.get(), x);
  }

  FILE* f = std::fopen(out.c_str(), "w+b");
  if (f == nullptr) throw Error(out + ": cannot write: " + std::strerror(errno));
  std::unique_ptr<FILE, int (*)(FILE*)> closer(f, std::fclose);
  if (!gguf_write_to_file_ptr(g.get(), f, /*only_meta=*/true)) throw Error(out + ": write failed");
  const size_t data_offset = gguf_get_meta_size(g.get());

  uint64_t total = 0, written = 0;
  for (int64_t i = 0; i < gguf_get_n_tensors(g.get()); ++i) total += gguf_get_tensor_size(g.get(), i);
  // Rows are made in parallel, a slab of at most 64 MiB at a time, and written in order.
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  std::vector<uint8_t> slab;
  for (int64_t i = 0; i < gguf_get_n_tensors(g.get()); ++i) {
    const TensorSpec& s = specs[static_cast<size_t>(i)];
    const ggml_type t = gguf_get_tensor_type(g.get(), i);
    const size_t row_bytes = ggml_row_size(t, s.ne[0]);
    int64_t rows = 1;
    for (size_t d = 1; d < s.ne.size(); ++d) rows *= s.ne[d];
    const bool output = s.name == "output.weight" || (shape.tied_embeddings && s.name == "token_embd.weight");
    if (std::fseek(f, static_cast<long>(data_offset + gguf_get_tensor_offset(g.get(), i)), SEEK_SET) != 0)
      throw Error(out + ": seek failed");
    const int64_t slab_rows = std::max<int64_t>(1, static_cast<int64_t>((64u << 20) / row_bytes));
    for (int64_t r0 = 0; r0 < rows; r0 += slab_rows) {
      const int64_t r1 = std::min(rows, r0 + slab_rows);
      slab.resize(static_cast<size_t>(r1 - r0) * row_bytes);
      const int64_t per = (r1 - r0 + workers - 1) / workers;
      std::vector<std::thread> pool;
      for (unsigned w = 0; w < workers; ++w) {
        const int64_t a0 = r0 + per * w, a1 = std::min(r1, a0 + per);
        if (a0 >= a1) break;
        pool.emplace_back(fill_rows, std::cref(s), t, options.seed, i, a0, a1, std::cref(silent), output,
                          slab.data() + static_cast<size_t>(a0 - r0) * row_bytes);
      }
      for (auto& th : pool) th.join();
      if (std::fwrite(slab.data(), 1, slab.size(), f) != slab.size()) throw Error(out + ": write failed (disk full?)");
      written += slab.size();
      if (progress) progress(written, total);
    }
  }
  if (std::fflush(f) != 0) throw Error(out + ": write failed");
}

}  // namespace onebit
