// The model catalog of `1bit lemonade`: a registry of known models (config/lemonade_models.json,
// compiled in), every GGUF found in the models directories, and models registered with `pull`
// (names with the `user.` prefix), plus per-model saved load options. Nothing is downloaded:
// a model is "downloaded" when its GGUF is on disk under a models directory.
//
// Paths never leave the models directories: a checkpoint is resolved with realpath and must lie
// inside one of them, so `..`, absolute paths elsewhere and symlinks pointing out are refused.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace onebit {

struct CatalogEntry {
  std::string id;
  std::string checkpoint;        // as registered: a file name under a models dir, or a hub name
  std::vector<std::string> labels;
  bool suggested = false;
  std::optional<double> size_gb;
  std::string path;              // the GGUF on disk; empty when not downloaded
  bool user = false;             // registered through pull
  std::string type() const;      // llm, embedding or reranking, from the labels
};

class Catalog {
 public:
  // `state_dir` keeps user.* registrations and saved options across restarts.
  Catalog(std::vector<std::string> model_dirs, std::string state_dir);

  // The models on disk (registry, files, user registrations), without those larger than 80% of
  // memory; `all`: every model, those not on disk included.
  std::vector<CatalogEntry> list(bool all) const;
  std::optional<CatalogEntry> find(const std::string& id) const;

  // pull: registers `name` (given a `user.` prefix if it has none) for a GGUF inside a models dir.
  // Throws Error naming the problem (a remote checkpoint cannot be fetched here; a path outside
  // the models dirs; not a GGUF).
  CatalogEntry pull(const std::string& name, const std::string& checkpoint, const std::vector<std::string>& labels);
  // delete: forgets a user.* registration. Returns false for an unknown name; throws Error for a
  // model that is not a user registration (its file is the user's to remove).
  bool remove(const std::string& id);

  nlohmann::json saved_options(const std::string& id) const;
  void save_options(const std::string& id, const nlohmann::json& options);

  // The JSON entry of /models.
  static nlohmann::json to_json(const CatalogEntry& e, const nlohmann::json& options);

 private:
  std::vector<CatalogEntry> list_all(bool with_missing) const;
  std::string resolve(const std::string& checkpoint) const;  // "" when not inside a models dir
  void persist() const;
  // The labels a file's metadata implies (embeddings, reranking), read once per file version.
  std::vector<std::string> implied_labels(const std::string& path) const;

  struct Implied {
    int64_t mtime_ns = 0, size = -1;
    std::vector<std::string> labels;
  };

  std::vector<std::string> dirs_;  // canonical
  std::string state_file_;
  mutable std::mutex mu_;
  nlohmann::json user_;     // id -> {checkpoint, labels}
  nlohmann::json options_;  // id -> saved load options
  mutable std::map<std::string, Implied> implied_;  // path -> what its metadata said
};

}  // namespace onebit
