// `1bit serve` as the host of Ollama's routes (ollama/ollama_routes.h): its one model, named by
// serve's --alias or else by its file ("1bit-tiny-32m-q8_0" for models/1bit-tiny-32m-q8_0.gguf),
// always loaded. keep_alive
// is accepted and the model stays loaded, since serve exists to serve it; pull succeeds for that
// model only and delete is refused, as serve neither downloads nor removes files.
#pragma once

#include <mutex>
#include <string>

#include "ollama/ollama_routes.h"

namespace onebit {

class ServeOllamaHost : public OllamaHost {
 public:
  ServeOllamaHost(const std::string& name, const ModelFacts& facts, std::string device);

  // The main engine, once it has its port (and again when it moves to another).
  void set_engine(Upstream engine);

  std::vector<OllamaModel> models() override { return {model_}; }
  std::optional<OllamaModel> find(const std::string& name) override;
  std::vector<OllamaRunning> running() override;
  OllamaLease use(const std::string& name) override;
  void keep_alive(const std::string&, const KeepAlive&) override {}
  bool unload(const std::string&) override { return false; }
  void pull(const std::string& name) override;
  void remove(const std::string& name) override;

 private:
  Upstream engine() const;

  OllamaModel model_;
  std::string device_;
  mutable std::mutex mu_;
  Upstream engine_;
};

}  // namespace onebit
