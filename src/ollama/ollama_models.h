// Models as Ollama's /api/tags, /api/show and /api/ps describe them, from what 1bit reads of a
// GGUF (model/gguf_facts.h) and, for a loaded model, what its engine reports (/v1/models' meta).
//
// What Ollama has and 1bit has not: a Modelfile (shown empty) and a content digest. The digest
// here names the file version (path, size, modification time) rather than hashing gigabytes on
// every listing: it changes when the file does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "model/gguf_facts.h"

namespace onebit {

struct OllamaModel {
  std::string name;
  ModelFacts facts;
  std::string kind;         // llm, embedding or reranking (model/gguf_facts.h's model_kind)
  int64_t modified_ns = 0;  // the file's modification time
};

// The model named `name` whose file is at facts.path: its kind and its file's modification time.
OllamaModel ollama_model(const std::string& name, const ModelFacts& facts);

// What a loaded model's engine reports of itself (its /v1/models entry's "meta").
struct EngineMeta {
  std::optional<uint64_t> context;  // n_ctx of a slot: the context a request gets
  std::optional<uint64_t> parameters;
  std::optional<uint64_t> bytes;    // the weights' size
};
EngineMeta engine_meta(const nlohmann::json& v1_models);

// A running model: when it unloads (epoch ms; none: it stays) and where.
struct OllamaRunning {
  OllamaModel model;
  std::optional<int64_t> expires_ms;
  bool on_gpu = false;
  EngineMeta meta;
};

// The entry of /api/tags.
nlohmann::json ollama_tag(const OllamaModel& m);
// /api/show's answer; `meta` when the model is loaded.
nlohmann::json ollama_show(const OllamaModel& m, const EngineMeta* meta);
// The entry of /api/ps.
nlohmann::json ollama_ps_entry(const OllamaRunning& r);

// "8.0B", "137M": a parameter count as Ollama prints it.
std::string parameter_size(uint64_t parameters);

}  // namespace onebit
