#include "synth.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "error.h"
#include "ggml.h"
#include "gguf.h"

namespace onebit {
namespace {

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

struct TensorSpec {
  std::string name;
  int64_t ne0, ne1;  // ne1 == 1 for vectors
  bool norm;         // filled with ones, kept in F32
};

std::vector<TensorSpec> tensor_specs(const SynthShape& s, int64_t n_vocab) {
  const int64_t hd = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  std::vector<TensorSpec> t;
  t.push_back({"token_embd.weight", s.n_embd, n_vocab, false});
  for (int64_t i = 0; i < s.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    t.push_back({b + "attn_norm.weight", s.n_embd, 1, true});
    t.push_back({b + "attn_q.weight", s.n_embd, s.n_head * hd, false});
    t.push_back({b + "attn_k.weight", s.n_embd, s.n_head_kv * hd, false});
    t.push_back({b + "attn_v.weight", s.n_embd, s.n_head_kv * hd, false});
    t.push_back({b + "attn_output.weight", s.n_head * hd, s.n_embd, false});
    if (s.architecture == "qwen3") {
      t.push_back({b + "attn_q_norm.weight", hd, 1, true});
      t.push_back({b + "attn_k_norm.weight", hd, 1, true});
    }
    t.push_back({b + "ffn_norm.weight", s.n_embd, 1, true});
    t.push_back({b + "ffn_gate.weight", s.n_embd, s.n_ff, false});
    t.push_back({b + "ffn_up.weight", s.n_embd, s.n_ff, false});
    t.push_back({b + "ffn_down.weight", s.n_ff, s.n_embd, false});
  }
  t.push_back({"output_norm.weight", s.n_embd, 1, true});
  if (!s.tied_embeddings) t.push_back({"output.weight", s.n_embd, n_vocab, false});
  return t;
}

}  // namespace

const std::vector<SynthShape>& synth_shapes() {
  static const std::vector<SynthShape> shapes = {
      // Small enough for CI: loads in well under a second, runs a few hundred tokens/s on 2 cores.
      {"tiny-llama", "llama", "llama-spm", 64, 2, 4, 2, 0, 128, 2048, 10000, false},
      {"tiny-qwen3", "qwen3", "qwen2", 64, 2, 4, 2, 32, 192, 4096, 1000000, true},
  };
  return shapes;
}

const SynthShape* find_synth_shape(const std::string& name) {
  for (const auto& s : synth_shapes())
    if (s.name == name) return &s;
  return nullptr;
}

void write_synth_model(const SynthShape& shape, const SynthOptions& options, const std::string& out,
                       const std::function<void(uint64_t, uint64_t)>& progress) {
  const ggml_type wtype = weight_type(options.type);
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
  const int64_t hd = shape.head_dim > 0 ? shape.head_dim : shape.n_embd / shape.n_head;
  gguf_set_val_u32(g.get(), (a + ".context_length").c_str(), static_cast<uint32_t>(shape.n_ctx));
  gguf_set_val_u32(g.get(), (a + ".embedding_length").c_str(), static_cast<uint32_t>(shape.n_embd));
  gguf_set_val_u32(g.get(), (a + ".block_count").c_str(), static_cast<uint32_t>(shape.n_layer));
  gguf_set_val_u32(g.get(), (a + ".feed_forward_length").c_str(), static_cast<uint32_t>(shape.n_ff));
  gguf_set_val_u32(g.get(), (a + ".attention.head_count").c_str(), static_cast<uint32_t>(shape.n_head));
  gguf_set_val_u32(g.get(), (a + ".attention.head_count_kv").c_str(), static_cast<uint32_t>(shape.n_head_kv));
  gguf_set_val_u32(g.get(), (a + ".attention.key_length").c_str(), static_cast<uint32_t>(hd));
  gguf_set_val_u32(g.get(), (a + ".attention.value_length").c_str(), static_cast<uint32_t>(hd));
  gguf_set_val_u32(g.get(), (a + ".rope.dimension_count").c_str(), static_cast<uint32_t>(hd));
  gguf_set_val_f32(g.get(), (a + ".rope.freq_base").c_str(), static_cast<float>(shape.rope_base));
  gguf_set_val_f32(g.get(), (a + ".attention.layer_norm_rms_epsilon").c_str(), 1e-6f);

  const auto specs = tensor_specs(shape, n_vocab);
  ggml_init_params ip{ggml_tensor_overhead() * (specs.size() + 1), nullptr, /*no_alloc=*/true};
  std::unique_ptr<ggml_context, GgmlDeleter> meta(ggml_init(ip));
  for (const auto& s : specs) {
    ggml_type t = s.norm ? GGML_TYPE_F32 : wtype;
    if (ggml_blck_size(t) > 1 && s.ne0 % ggml_blck_size(t) != 0) t = GGML_TYPE_F16;
    ggml_tensor* x = s.ne1 == 1 ? ggml_new_tensor_1d(meta.get(), t, s.ne0) : ggml_new_tensor_2d(meta.get(), t, s.ne0, s.ne1);
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
  std::vector<float> row;
  std::vector<uint8_t> buf;
  for (int64_t i = 0; i < gguf_get_n_tensors(g.get()); ++i) {
    const TensorSpec& s = specs[static_cast<size_t>(i)];
    const ggml_type t = gguf_get_tensor_type(g.get(), i);
    const size_t row_bytes = ggml_row_size(t, s.ne0);
    const float scale = std::sqrt(3.0f / static_cast<float>(s.ne0));  // uniform with variance 1/fan_in
    row.resize(static_cast<size_t>(s.ne0));
    buf.resize(row_bytes);
    if (std::fseek(f, static_cast<long>(data_offset + gguf_get_tensor_offset(g.get(), i)), SEEK_SET) != 0)
      throw Error(out + ": seek failed");
    const bool output = s.name == "output.weight" || (shape.tied_embeddings && s.name == "token_embd.weight");
    for (int64_t r = 0; r < s.ne1; ++r) {
      Rng rng{options.seed * 0x100000001B3ull ^ (static_cast<uint64_t>(i) << 40) ^ static_cast<uint64_t>(r)};
      const bool zero = output && silent[static_cast<size_t>(r)];
      for (auto& v : row) v = s.norm ? 1.0f : zero ? 0.0f : rng.uniform() * scale;
      if (t == GGML_TYPE_F32) std::memcpy(buf.data(), row.data(), row_bytes);
      else if (t == GGML_TYPE_F16) ggml_fp32_to_fp16_row(row.data(), reinterpret_cast<ggml_fp16_t*>(buf.data()), s.ne0);
      else ggml_quantize_chunk(t, row.data(), buf.data(), 0, 1, s.ne0, nullptr);
      if (std::fwrite(buf.data(), 1, row_bytes, f) != row_bytes) throw Error(out + ": write failed (disk full?)");
      written += row_bytes;
    }
    if (progress) progress(written, total);
  }
  if (std::fflush(f) != 0) throw Error(out + ": write failed");
}

}  // namespace onebit
