// Ollama's HTTP API on 1bit's servers: GET /api/version, /api/tags, /api/ps; POST /api/show,
// /api/chat, /api/generate, /api/embed, /api/embeddings, /api/pull; DELETE /api/delete. Each
// request is translated (ollama_api.h), sent to the model's engine and its answer translated back
// as it arrives (ollama_reply.h). Errors are Ollama's: {"error": "..."}, 400 for bad input, 404
// for an unknown model, 405 for a wrong method.
//
// The server behind the routes is an OllamaHost: `1bit serve` with its one model, `1bit
// lemonade` with its catalog, which loads models on demand and unloads them after keep_alive.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http/server.h"
#include "ollama/ollama_api.h"
#include "ollama/ollama_models.h"
#include "ollama/ollama_reply.h"

namespace onebit {

// A model's engine, held for one request (a loaded model is not unloaded while it is held).
struct OllamaLease {
  Upstream engine;
  int64_t load_ns = 0;         // how long it took to load it for this request; 0 when loaded already
  std::shared_ptr<void> hold;  // the server's own hold on it, released with the lease
};

class OllamaHost {
 public:
  virtual ~OllamaHost() = default;
  virtual std::vector<OllamaModel> models() = 0;
  virtual std::optional<OllamaModel> find(const std::string& name) = 0;
  virtual std::vector<OllamaRunning> running() = 0;
  // The model's engine, loaded first when it is not. Throws OllamaError (404: unknown).
  virtual OllamaLease use(const std::string& name) = 0;
  // The keep_alive a request gave (k.given), set before it is answered, so that a client that
  // asks /api/ps right after sees it; a model whose time has passed is not listed as running.
  virtual void keep_alive(const std::string& name, const KeepAlive& k) = 0;
  // Unloads the model now; false when it was not loaded.
  virtual bool unload(const std::string& name) = 0;
  // Makes a local model known (never downloads). Throws OllamaError saying why not.
  virtual void pull(const std::string& name) = 0;
  // Forgets a model. Throws OllamaError (404: unknown).
  virtual void remove(const std::string& name) = 0;
};

class OllamaRoutes {
 public:
  explicit OllamaRoutes(OllamaHost& host) : host_(host) {}

  // Whether `path` is one of Ollama's routes.
  static bool handles(const std::string& path);
  // Answers a request for one of them; returns whether the connection can serve another.
  bool serve(const Request& req, Responder& r);

 private:
  bool dispatch(const Request& req, Responder& r);
  bool generate(const Request& req, Responder& r, const EngineCall& call, ReplyKind kind);
  bool show(const Request& req, Responder& r);
  bool ps(Responder& r);
  bool pull(const Request& req, Responder& r);
  bool remove(const Request& req, Responder& r);

  OllamaHost& host_;
};

// An engine's /v1/models meta, asked for with its key; empty when it does not answer.
EngineMeta fetch_engine_meta(const Upstream& engine);

}  // namespace onebit
