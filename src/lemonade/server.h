// The HTTP face of `1bit lemonade`: Lemonade's API under /api/v0, /api/v1, /v0 and /v1 (the
// same handler for each), /live and /metrics at the root, Ollama's API under /api
// (lemonade/lemonade_ollama.h), and a small web page at /. Inference
// requests are forwarded to the model's engine through the shared HTTP server core, streams
// passing through unchanged.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/server.h"
#include "lemonade/catalog.h"
#include "lemonade/lemonade_ollama.h"
#include "lemonade/model_manager.h"

namespace onebit {

class LemonadeServer {
 public:
  // `allowed_origins`: non-null on loopback, where other Hosts and foreign Origins get 403
  // (http/loopback_guard.h) unless listed.
  LemonadeServer(Catalog& catalog, ModelManager& models, const std::string& api_key, uint64_t max_body_bytes,
                 const std::vector<std::string>* allowed_origins);

  void adopt(Fd listener) { server_.adopt(std::move(listener)); }
  int port() const { return server_.port(); }
  void start() { server_.start(); }
  void stop() { server_.stop(); }

 private:
  struct Call;
  using Handler = bool (LemonadeServer::*)(const Call&, Responder&);
  // A route under every API prefix: method, pattern ("models/{id}": any rest), handler, and for
  // inference routes where the engine serves them.
  struct Route {
    const char* method;
    const char* pattern;
    Handler handler;
    const char* engine_path = nullptr;
  };
  // One API request as its handler sees it: its route, the part a pattern's "{id}" matched, and
  // (POST) the body as a JSON object.
  struct Call {
    const Request& req;
    const Route& route;
    std::string id;
    nlohmann::json body;
  };
  static const std::vector<Route>& routes();

  bool handle(const Request& req, Responder& r);
  bool send_json(Responder& r, int status, const nlohmann::json& body);
  std::string metrics() const;

  bool live(const Call& c, Responder& r);
  bool health(const Call& c, Responder& r);
  bool list_models(const Call& c, Responder& r);
  bool show_model(const Call& c, Responder& r);
  bool machine_info(const Call& c, Responder& r);
  bool machine_stats(const Call& c, Responder& r);
  bool last_request_stats(const Call& c, Responder& r);
  bool load(const Call& c, Responder& r);
  bool unload(const Call& c, Responder& r);
  bool pull(const Call& c, Responder& r);
  bool remove(const Call& c, Responder& r);
  bool infer(const Call& c, Responder& r);

  Catalog& catalog_;
  ModelManager& models_;
  LemonadeOllamaHost ollama_host_;
  OllamaRoutes ollama_;
  HttpServer server_;

  mutable std::mutex stats_mu_;
  nlohmann::json last_stats_;
  std::map<std::string, uint64_t> requests_;  // per route
  uint64_t errors_ = 0, prompt_tokens_ = 0, generated_tokens_ = 0;
};

}  // namespace onebit
