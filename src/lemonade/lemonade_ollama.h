// `1bit lemonade` as the host of Ollama's routes (ollama/ollama_routes.h): the catalog's models
// on disk, loaded on demand under the same limits as Lemonade's own routes, and unloaded after a
// request's keep_alive (0: at once; negative: never; without one, a model stays until evicted, as
// lemonade keeps models). Pull and delete are lemonade's own: pull takes a GGUF already in a
// models directory, by its file name, and registers it as user.<name>; a hub name is refused with
// the reason, as nothing is downloaded; delete forgets a pulled model, never a file.
#pragma once

#include "lemonade/catalog.h"
#include "lemonade/model_manager.h"
#include "ollama/ollama_routes.h"

namespace onebit {

class LemonadeOllamaHost : public OllamaHost {
 public:
  LemonadeOllamaHost(Catalog& catalog, ModelManager& models) : catalog_(catalog), models_(models) {}

  std::vector<OllamaModel> models() override;
  std::optional<OllamaModel> find(const std::string& name) override;
  std::vector<OllamaRunning> running() override;
  OllamaLease use(const std::string& name) override;
  void keep_alive(const std::string& name, const KeepAlive& k) override;
  bool unload(const std::string& name) override { return models_.unload(name); }
  void pull(const std::string& name) override;
  void remove(const std::string& name) override;

 private:
  Catalog& catalog_;
  ModelManager& models_;
};

}  // namespace onebit
