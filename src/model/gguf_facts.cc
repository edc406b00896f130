#include "model/gguf_facts.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>

#include "base/error.h"
#include "ggml.h"
#include "gguf.h"

namespace onebit {
namespace {

// ggml reports parse failures through its log callback. We silence ggml while reading and keep
// its first error line, which names what is wrong far better than a bare "failed".
std::mutex g_log_mutex;
std::string* g_log_first_error = nullptr;

void capture_ggml_log(ggml_log_level level, const char* text, void*) {
  if (level != GGML_LOG_LEVEL_ERROR || g_log_first_error == nullptr || !g_log_first_error->empty())
    return;
  std::string line = text;
  // "gguf_init_from_file_impl: failed to read magic\n" -> "failed to read magic"
  if (auto colon = line.find(": "); colon != std::string::npos && line.compare(0, 5, "gguf_") == 0)
    line.erase(0, colon + 2);
  while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
  *g_log_first_error = line;
}

struct GgufDeleter {
  void operator()(gguf_context* ctx) const { gguf_free(ctx); }
};
using GgufPtr = std::unique_ptr<gguf_context, GgufDeleter>;

template <typename Open>
GgufPtr open_gguf(const std::string& label, Open open) {
  std::string first_error;
  gguf_context* ctx;
  {
    std::lock_guard<std::mutex> lock(g_log_mutex);
    g_log_first_error = &first_error;
    ggml_log_set(capture_ggml_log, nullptr);
    ctx = open();
    ggml_log_set(nullptr, nullptr);
    g_log_first_error = nullptr;
  }
  if (ctx == nullptr)
    throw Error(label + ": not a valid GGUF file: " + (first_error.empty() ? "unreadable header" : first_error));
  return GgufPtr(ctx);
}

bool is_integer_type(gguf_type t) {
  switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16:
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_UINT64: case GGUF_TYPE_INT64:
      return true;
    default:
      return false;
  }
}

class Metadata {
 public:
  Metadata(const gguf_context* ctx, const std::string& label) : ctx_(ctx), label_(label) {}

  // An integer under `key` of any integer width; nullopt when absent.
  std::optional<int64_t> integer(const std::string& key) const {
    int64_t id = gguf_find_key(ctx_, key.c_str());
    if (id < 0) return std::nullopt;
    gguf_type t = gguf_get_kv_type(ctx_, id);
    if (!is_integer_type(t)) wrong_type(key, t, "an integer");
    switch (t) {
      case GGUF_TYPE_UINT8: return gguf_get_val_u8(ctx_, id);
      case GGUF_TYPE_INT8: return gguf_get_val_i8(ctx_, id);
      case GGUF_TYPE_UINT16: return gguf_get_val_u16(ctx_, id);
      case GGUF_TYPE_INT16: return gguf_get_val_i16(ctx_, id);
      case GGUF_TYPE_UINT32: return gguf_get_val_u32(ctx_, id);
      case GGUF_TYPE_INT32: return gguf_get_val_i32(ctx_, id);
      case GGUF_TYPE_INT64: return gguf_get_val_i64(ctx_, id);
      default: {
        uint64_t v = gguf_get_val_u64(ctx_, id);
        if (v > static_cast<uint64_t>(INT64_MAX)) out_of_range(key, "too large");
        return static_cast<int64_t>(v);
      }
    }
  }

  // A non-negative integer no larger than `max`; nullopt when absent.
  std::optional<uint64_t> count(const std::string& key, uint64_t max) const {
    auto v = integer(key);
    if (!v) return std::nullopt;
    if (*v < 0) out_of_range(key, "negative (" + std::to_string(*v) + ")");
    if (static_cast<uint64_t>(*v) > max) out_of_range(key, "absurdly large (" + std::to_string(*v) + ")");
    return static_cast<uint64_t>(*v);
  }

  // An array of 32-bit integers (signed or not), each no larger than `max`; empty when absent.
  std::vector<int64_t> integers(const std::string& key, uint64_t max) const {
    int64_t id = gguf_find_key(ctx_, key.c_str());
    if (id < 0) return {};
    gguf_type t = gguf_get_kv_type(ctx_, id);
    if (t != GGUF_TYPE_ARRAY) wrong_type(key, t, "an array of integers");
    const gguf_type at = gguf_get_arr_type(ctx_, id);
    if (at != GGUF_TYPE_INT32 && at != GGUF_TYPE_UINT32)
      throw Error(label_ + ": metadata " + key + " is an array of " + gguf_type_name(at) + ", expected 32-bit integers");
    const size_t n = gguf_get_arr_n(ctx_, id);
    if (n > max) out_of_range(key, "absurdly long (" + std::to_string(n) + " entries)");
    std::vector<int64_t> out;
    const void* data = gguf_get_arr_data(ctx_, id);
    for (size_t i = 0; i < n; ++i) {
      const int64_t v = at == GGUF_TYPE_INT32 ? int64_t{static_cast<const int32_t*>(data)[i]}
                                              : int64_t{static_cast<const uint32_t*>(data)[i]};
      if (v < 0 || static_cast<uint64_t>(v) > max)
        throw Error(label_ + ": metadata " + key + " holds " + std::to_string(v) + ", out of range");
      out.push_back(v);
    }
    return out;
  }

  std::optional<std::string> string(const std::string& key) const {
    int64_t id = gguf_find_key(ctx_, key.c_str());
    if (id < 0) return std::nullopt;
    gguf_type t = gguf_get_kv_type(ctx_, id);
    if (t != GGUF_TYPE_STRING) wrong_type(key, t, "a string");
    return std::string(gguf_get_val_str(ctx_, id));
  }

 private:
  [[noreturn]] void wrong_type(const std::string& key, gguf_type t, const char* want) const {
    throw Error(label_ + ": metadata " + key + " is " + gguf_type_name(t) + ", expected " + want);
  }
  [[noreturn]] void out_of_range(const std::string& key, const std::string& what) const {
    throw Error(label_ + ": metadata " + key + " is " + what);
  }

  const gguf_context* ctx_;
  const std::string& label_;
};

// Upper bounds that no real model reaches; beyond them a value is corrupt, not big.
constexpr uint64_t kMaxExperts = 1u << 16;
constexpr uint64_t kMaxContext = 1ull << 32;
constexpr uint64_t kMaxLayers = 1u << 12;
constexpr uint64_t kMaxBlock = 1u << 12;
constexpr uint64_t kMaxWidth = 1u << 20;
constexpr uint64_t kMaxFileType = 1u << 16;
constexpr uint64_t kMaxPoolingType = 16;

ModelFacts facts_from_context(const gguf_context* ctx, const std::string& label) {
  Metadata md(ctx, label);
  ModelFacts f;
  f.path = label;
  auto arch = md.string("general.architecture");
  if (!arch || arch->empty()) throw Error(label + ": GGUF has no general.architecture");
  f.architecture = *arch;
  f.name = md.string("general.name").value_or("");
  f.expert_count = static_cast<int64_t>(md.count(f.architecture + ".expert_count", kMaxExperts).value_or(0));
  f.moe = f.expert_count > 0;
  if (auto ft = md.count("general.file_type", kMaxFileType)) f.file_type = static_cast<uint32_t>(*ft);
  if (auto h = md.integer("onebit.hadamard_q4_0")) {
    if (*h != 32)
      throw Error(label + ": metadata onebit.hadamard_q4_0 is " + std::to_string(*h) + ", only 32 is supported");
    f.hadamard_q4_0 = true;
  }
  f.context_length = md.count(f.architecture + ".context_length", kMaxContext);
  if (auto p = md.count(f.architecture + ".pooling_type", kMaxPoolingType)) f.pooling_type = static_cast<uint32_t>(*p);
  f.nextn_layers = static_cast<uint32_t>(md.count(f.architecture + ".nextn_predict_layers", kMaxLayers).value_or(0));
  if (auto n = md.count(f.architecture + ".block_count", kMaxLayers)) f.block_count = static_cast<uint32_t>(*n);
  if (f.block_count && f.nextn_layers > *f.block_count)
    throw Error(label + ": metadata " + f.architecture + ".nextn_predict_layers (" + std::to_string(f.nextn_layers) +
                ") exceeds " + f.architecture + ".block_count (" + std::to_string(*f.block_count) + ")");
  if (auto n = md.count(f.architecture + ".embedding_length", kMaxWidth)) f.embedding_length = static_cast<uint32_t>(*n);
  if (int64_t id = gguf_find_key(ctx, "tokenizer.ggml.tokens"); id >= 0 && gguf_get_kv_type(ctx, id) == GGUF_TYPE_ARRAY)
    f.vocab_size = gguf_get_arr_n(ctx, id);
  if (f.architecture == "dflash" || f.architecture == "eagle3") {
    f.drafter = f.architecture;
    f.target_layers = md.integers(f.architecture + ".target_layers", kMaxLayers);
  } else if (f.nextn_layers > 0 && gguf_find_tensor(ctx, "blk.0.attn_norm.weight") < 0) {
    // The engine's own test for a head published apart from its model: MTP layers, no trunk.
    f.drafter = "mtp-head";
  }
  if (auto b = md.count(f.architecture + ".block_size", kMaxBlock); b && f.drafter == "dflash") {
    if (*b < 2) throw Error(label + ": metadata dflash.block_size is " + std::to_string(*b) + ", expected at least 2");
    f.block_size = static_cast<uint32_t>(*b);
  }
  if (f.drafter == "eagle3")
    if (auto n = md.count("eagle3.target_hidden_size", kMaxWidth)) f.target_hidden_size = static_cast<uint32_t>(*n);
  if (auto m = md.count("tokenizer.ggml.mask_token_id", UINT32_MAX)) f.mask_token = static_cast<uint32_t>(*m);
  f.tensor_count = gguf_get_n_tensors(ctx);
  return f;
}

constexpr size_t kMinHeader = 4 + 4 + 8 + 8;  // magic, version, tensor count, kv count

}  // namespace

std::string model_kind(const ModelFacts& facts) {
  // llama_pooling_type: 0 none, 1 mean, 2 cls, 3 last, 4 rank.
  if (!facts.pooling_type || *facts.pooling_type == 0) return "llm";
  return *facts.pooling_type == 4 ? "reranking" : "embedding";
}

ModelFacts read_model_facts(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) throw Error(path + ": " + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw Error(path + ": is a directory, not a GGUF file");
  if (!S_ISREG(st.st_mode)) throw Error(path + ": is not a regular file");
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) throw Error(path + ": " + std::strerror(errno));
  std::unique_ptr<FILE, int (*)(FILE*)> closer(file, std::fclose);
  char magic[4] = {};
  size_t got = std::fread(magic, 1, 4, file);
  if (got < 4 || std::memcmp(magic, "GGUF", 4) != 0)
    throw Error(path + ": not a GGUF file (no GGUF magic at the start)");
  if (static_cast<uint64_t>(st.st_size) < kMinHeader) throw Error(path + ": truncated GGUF header");
  std::rewind(file);
  gguf_init_params params{/*no_alloc=*/true, /*ctx=*/nullptr};
  GgufPtr ctx = open_gguf(path, [&] { return gguf_init_from_file_ptr(file, params); });
  ModelFacts f = facts_from_context(ctx.get(), path);
  f.file_size = static_cast<uint64_t>(st.st_size);
  return f;
}

ModelFacts model_facts_from_buffer(const void* data, size_t size, const std::string& label) {
  if (size < 4 || std::memcmp(data, "GGUF", 4) != 0)
    throw Error(label + ": not a GGUF file (no GGUF magic at the start)");
  if (size < kMinHeader) throw Error(label + ": truncated GGUF header");
  gguf_init_params params{/*no_alloc=*/true, /*ctx=*/nullptr};
  GgufPtr ctx = open_gguf(label, [&] { return gguf_init_from_buffer(data, size, params); });
  ModelFacts f = facts_from_context(ctx.get(), label);
  f.file_size = size;
  return f;
}

uint32_t trunk_layers(const ModelFacts& facts) {
  return facts.block_count ? *facts.block_count - facts.nextn_layers : 0;
}

std::string file_type_name(uint32_t t) {
  static const char* const names[] = {
      "F32", "F16", "Q4_0", "Q4_1", nullptr, nullptr, nullptr, "Q8_0", "Q5_0", "Q5_1",
      "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K",
      "IQ2_XXS", "IQ2_XS", "Q2_K_S", "IQ3_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ3_M",
      "IQ2_S", "IQ2_M", "IQ4_XS", "IQ1_M", "BF16", nullptr, nullptr, nullptr, "TQ1_0", "TQ2_0",
      "MXFP4_MOE", "NVFP4", "Q1_0", "Q2_0"};
  if (t < sizeof(names) / sizeof(names[0]) && names[t] != nullptr) return names[t];
  return "type " + std::to_string(t);
}

}  // namespace onebit
