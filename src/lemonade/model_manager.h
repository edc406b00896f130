// The loaded models of `1bit lemonade`: each one engine child launched through serve's launch
// path (facts, recipes, the same command line), on its own loopback port.
//
// Rules: a request for a model that is not loaded loads it first; at most `max_loaded` models of
// each type (llm, embedding, reranking; -1 = no limit) stay loaded, the least recently used going
// first; a model serving a request is busy and is not evicted or reloaded until it is done; one
// load runs at a time; a failed load leaves the server healthy and the other models loaded: the
// ones it evicted to make room (stopped before the new engine starts, so that both never hold
// memory at once) are loaded again before it reports the failure; a backend that dies is noticed
// within 250 ms, reported by health(), and loaded again on the next request. A model given a
// keep-alive (Ollama's keep_alive) is unloaded once it has been idle that long, checked as often.
//
// Children are started from one long-lived thread, since the parent-death signal that ties a
// child to 1bit fires when the thread that forked it ends.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "engine/child_process.h"
#include "engine/device.h"
#include "engine/engine_process.h"
#include "http/server.h"
#include "lemonade/catalog.h"
#include "model/gguf_facts.h"
#include "recipes/recipes.h"
#include "serve/serve_options.h"

namespace onebit {

// A failure with Lemonade's error shape: {"error": {message, type, param, code, requested_model}}.
struct ModelError : Error {
  ModelError(int status, std::string code, const std::string& message, std::string model)
      : Error(message), status(status), code(std::move(code)), model(std::move(model)) {}
  int status;
  std::string code;  // model_not_found, model_not_supported, model_load_error, model_invalidated
  std::string model;
  nlohmann::json to_json() const;
};

struct ManagerConfig {
  int max_loaded = 1;                  // per type; -1: no limit
  std::optional<int64_t> ctx_size;     // server-wide default
  std::string llamacpp_args;           // server-wide default engine arguments
  std::string rpc;                     // server-wide default RPC workers (HOST:PORT,...)
  std::string llama_server;            // the engine binary
  std::string log_dir;                 // one log per model
  double load_timeout_s = 600;
  const RecipeSet* recipes = &builtin_recipes();  // applied to every launch; nullptr: none
};

struct LoadedModel {
  std::string name, checkpoint, path, type, device;
  nlohmann::json options;  // the effective load options
  std::string key;  // the engine's own key (engine/engine_key.h)
  std::unique_ptr<EngineProcess> engine;
  int64_t last_use_ms = 0;
  int busy = 0;
  bool stopping = false;  // waiting to be unloaded: new requests wait and load it again
  std::optional<int64_t> keep_alive_ms;  // unloaded after this long idle; none: stays until evicted
};

// A loaded model as Ollama's /api/ps shows it.
struct LoadedView {
  std::string name, path, device;
  Upstream engine;
  std::optional<int64_t> expires_ms;  // epoch ms, counted from its last use
};

class ModelManager {
 public:
  ModelManager(Catalog& catalog, ManagerConfig config);
  ~ModelManager();  // stops every backend

  // Loads `name` (again, when loaded) with request options over saved ones over server defaults.
  // With "save_options": true the request's options are kept for this model. Throws ModelError.
  nlohmann::json load(const std::string& name, const nlohmann::json& request);

  // A loaded model held for one request; the model is busy until the lease ends.
  class Lease {
   public:
    Lease(ModelManager* m, std::shared_ptr<LoadedModel> model) : m_(m), model_(std::move(model)) {}
    Lease(Lease&& o) noexcept : m_(o.m_), model_(std::move(o.model_)) { o.m_ = nullptr; }
    Lease(const Lease&) = delete;
    ~Lease();
    int port() const { return model_->engine->port(); }
    Upstream engine() const { return {model_->engine->port(), model_->key}; }
    const LoadedModel& model() const { return *model_; }

   private:
    ModelManager* m_;
    std::shared_ptr<LoadedModel> model_;
  };
  // The model, loaded first if it is not. Throws ModelError.
  Lease acquire(const std::string& name);

  // Unloads one model; false when it is not loaded. Waits until it is not busy.
  bool unload(const std::string& name);
  void unload_all();

  // What "auto" means on this machine and engine (the engine's device list at start).
  const DeviceChoice& auto_device() const { return auto_device_; }

  // /health's model fields: model_loaded, all_models_loaded, max_models, and backends that died.
  nlohmann::json health() const;
  std::vector<std::string> loaded_names() const;
  std::vector<LoadedView> loaded_views() const;

  // Unload `name` after `ms` of idleness (none: never), from its last use on. False when it is
  // not loaded.
  bool set_keep_alive(const std::string& name, std::optional<int64_t> ms);

 private:
  nlohmann::json load_locked(const std::string& name, const nlohmann::json& request, const nlohmann::json& options,
                             bool only_if_missing);
  std::shared_ptr<LoadedModel> start_backend(const CatalogEntry& entry, const nlohmann::json& options);
  // After a failed load: the models unloaded for it (its own previous instance, those evicted to
  // make room) are loaded again with their options (best effort; load_mu_ held, mu_ free).
  void restore(const std::vector<std::shared_ptr<LoadedModel>>& evicted);
  // Starts m's engine and waits for it to load. Throws ModelError when it does not.
  void launch_backend(const CatalogEntry& entry, const ServeOptions& options, const ModelFacts& facts,
                      const std::string& device, LoadedModel& m);
  // Takes its own reference: it erases the map entry that a caller's reference might point into.
  void stop_when_idle(std::unique_lock<std::mutex>& lock, std::shared_ptr<LoadedModel> m);
  void release(LoadedModel& m);
  void monitor();
  // Unloads the models whose keep-alive has passed (one try each: never waits for a load).
  void unload_expired();
  std::unique_ptr<ChildProcess> spawn(const ChildSpec& spec);
  void spawner();

  Catalog& catalog_;
  ManagerConfig config_;
  DeviceChoice auto_device_;  // what "auto" means on this machine and engine

  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  std::map<std::string, std::shared_ptr<LoadedModel>> loaded_;
  std::string last_used_;
  std::vector<nlohmann::json> crashed_;
  std::mutex load_mu_;  // one load at a time

  std::mutex spawn_mu_;
  std::condition_variable spawn_cv_;
  std::deque<std::function<void()>> spawn_queue_;
  bool stopping_ = false;
  std::thread spawner_;
  std::thread monitor_;
};

}  // namespace onebit
