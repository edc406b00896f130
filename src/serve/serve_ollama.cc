#include "serve/serve_ollama.h"

namespace onebit {

ServeOllamaHost::ServeOllamaHost(const std::string& name, const ModelFacts& facts, std::string device)
    : model_(ollama_model(name, facts)), device_(std::move(device)) {}

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
  r.on_gpu = device_ != "cpu";
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
