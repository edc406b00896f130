#include "serve/serve_ollama.h"

#include <sys/stat.h>

#include <filesystem>

namespace onebit {
namespace {

int64_t modified_ns(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

ServeOllamaHost::ServeOllamaHost(const std::string& model_path, const ModelFacts& facts, std::string device)
    : device_(std::move(device)) {
  model_.name = std::filesystem::path(model_path).stem().string();
  model_.facts = facts;
  model_.kind = model_kind(facts);
  model_.modified_ns = modified_ns(model_path);
}

void ServeOllamaHost::set_engine(Upstream engine) {
  std::lock_guard<std::mutex> lock(mu_);
  engine_ = std::move(engine);
}

Upstream ServeOllamaHost::engine() const {
  std::lock_guard<std::mutex> lock(mu_);
  return engine_;
}

std::optional<OllamaModel> ServeOllamaHost::find(const std::string& name) {
  if (name != model_.name) return std::nullopt;
  return model_;
}

std::vector<OllamaRunning> ServeOllamaHost::running() {
  OllamaRunning r;
  r.model = model_;
  r.on_gpu = device_ == "cuda";
  r.meta = fetch_engine_meta(engine());
  return {r};
}

OllamaLease ServeOllamaHost::use(const std::string& name) {
  if (name != model_.name)
    throw OllamaError(404, "model \"" + name + "\" not found: this server serves \"" + model_.name + "\"");
  return {engine(), 0, nullptr};
}

void ServeOllamaHost::pull(const std::string& name) {
  if (name != model_.name)
    throw OllamaError(400, "cannot pull \"" + name + "\": 1bit serve serves \"" + model_.name +
                               "\" and downloads nothing (start 1bit serve -m FILE for another model, or 1bit "
                               "lemonade for many)");
}

void ServeOllamaHost::remove(const std::string& name) {
  throw OllamaError(400, "1bit serve does not delete models (\"" + name + "\"): it serves its file, which is yours to remove");
}

}  // namespace onebit
