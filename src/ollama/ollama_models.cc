#include "ollama/ollama_models.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>

#include "ollama/ollama_reply.h"

namespace onebit {
namespace {

using nlohmann::json;
using std::chrono::system_clock;

// FNV-1a over the file's identity, as 64 hex digits (Ollama's digests are sha256-long).
std::string version_digest(const OllamaModel& m) {
  const std::string id = m.facts.path + '\0' + std::to_string(m.facts.file_size) + '\0' + std::to_string(m.modified_ns);
  std::string hex;
  uint64_t h = 1469598103934665603ull;
  for (int round = 0; round < 4; ++round) {
    for (unsigned char c : id) h = (h ^ c) * 1099511628211ull;
    h = (h ^ static_cast<uint64_t>(round)) * 1099511628211ull;
    char part[17];
    std::snprintf(part, sizeof(part), "%016llx", static_cast<unsigned long long>(h));
    hex += part;
  }
  return hex;
}

std::string time_of(int64_t ns) {
  return ollama_time(system_clock::time_point(std::chrono::duration_cast<system_clock::duration>(std::chrono::nanoseconds(ns))));
}

json details(const OllamaModel& m, const EngineMeta* meta) {
  const std::string& arch = m.facts.architecture;
  return {{"parent_model", ""},
          {"format", "gguf"},
          {"family", arch},
          {"families", json::array({arch})},
          {"parameter_size", meta && meta->parameters ? parameter_size(*meta->parameters) : ""},
          {"quantization_level", m.facts.file_type ? file_type_name(*m.facts.file_type) : ""}};
}

std::optional<uint64_t> unsigned_field(const json& j, const char* key) {
  if (j.contains(key) && j[key].is_number_unsigned()) return j[key].get<uint64_t>();
  if (j.contains(key) && j[key].is_number_integer() && j[key].get<int64_t>() >= 0) return j[key].get<int64_t>();
  return std::nullopt;
}

}  // namespace

OllamaModel ollama_model(const std::string& name, const ModelFacts& facts) {
  OllamaModel m;
  m.name = name;
  m.facts = facts;
  m.kind = model_kind(facts);
  struct stat st {};
  if (::stat(facts.path.c_str(), &st) == 0)
    m.modified_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return m;
}

std::string parameter_size(uint64_t n) {
  char buf[32];
  if (n >= 1000000000ull) std::snprintf(buf, sizeof(buf), "%.1fB", n / 1e9);
  else if (n >= 1000000ull) std::snprintf(buf, sizeof(buf), "%.0fM", n / 1e6);
  else std::snprintf(buf, sizeof(buf), "%.0fK", n / 1e3);
  return buf;
}

EngineMeta engine_meta(const json& v1_models) {
  EngineMeta m;
  if (!v1_models.is_object() || !v1_models.contains("data") || !v1_models["data"].is_array() || v1_models["data"].empty())
    return m;
  const json meta = v1_models["data"][0].value("meta", json::object());
  m.context = unsigned_field(meta, "n_ctx");
  m.parameters = unsigned_field(meta, "n_params");
  m.bytes = unsigned_field(meta, "size");
  return m;
}

json ollama_tag(const OllamaModel& m) {
  return {{"name", m.name},
          {"model", m.name},
          {"modified_at", time_of(m.modified_ns)},
          {"size", m.facts.file_size},
          {"digest", version_digest(m)},
          {"details", details(m, nullptr)}};
}

json ollama_show(const OllamaModel& m, const EngineMeta* meta) {
  const std::string& arch = m.facts.architecture;
  json info = {{"general.architecture", arch}, {"general.file_type", m.facts.file_type.value_or(0)}};
  if (!m.facts.name.empty()) info["general.name"] = m.facts.name;
  if (meta && meta->parameters) info["general.parameter_count"] = *meta->parameters;
  if (m.facts.context_length) info[arch + ".context_length"] = *m.facts.context_length;
  if (m.facts.embedding_length) info[arch + ".embedding_length"] = *m.facts.embedding_length;
  if (m.facts.block_count) info[arch + ".block_count"] = *m.facts.block_count;
  if (m.facts.vocab_size) info["tokenizer.ggml.tokens_count"] = *m.facts.vocab_size;
  json capabilities = json::array();
  if (m.kind == "llm") capabilities.push_back("completion");
  else if (m.kind == "embedding") capabilities.push_back("embedding");
  return {{"modelfile", ""},
          {"parameters", ""},
          {"template", ""},
          {"details", details(m, meta)},
          {"model_info", info},
          {"capabilities", capabilities},
          {"modified_at", time_of(m.modified_ns)}};
}

json ollama_ps_entry(const OllamaRunning& r) {
  json j = ollama_tag(r.model);
  j.erase("modified_at");
  j["details"] = details(r.model, &r.meta);
  const uint64_t size = r.meta.bytes.value_or(r.model.facts.file_size);
  j["size"] = size;
  j["size_vram"] = r.on_gpu ? size : 0;
  // A model that stays loaded expires never; Ollama shows a time far ahead, and so does this.
  j["expires_at"] = r.expires_ms ? time_of(*r.expires_ms * 1000000) : "9999-12-31T23:59:59.000000Z";
  if (r.meta.context) j["context_length"] = *r.meta.context;
  return j;
}

}  // namespace onebit
