// The HTTP face of `1bit lemonade`: Lemonade's API under /api/v0, /api/v1, /v0 and /v1 (the
// same handler for each), /live and /metrics at the root, and a small web page at /. Inference
// requests are forwarded to the model's engine through the shared HTTP server core, streams
// passing through unchanged.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "http/server.h"
#include "lemonade/catalog.h"
#include "lemonade/model_manager.h"

namespace onebit {

class LemonadeServer {
 public:
  LemonadeServer(Catalog& catalog, ModelManager& models, const std::string& api_key, uint64_t max_body_bytes);

  void adopt(Fd listener) { server_.adopt(std::move(listener)); }
  int port() const { return server_.port(); }
  void start() { server_.start(); }
  void stop() { server_.stop(); }

 private:
  bool handle(const Request& req, Responder& r);
  bool route_api(const std::string& route, const Request& req, Responder& r);
  bool infer(const std::string& route, const Request& req, nlohmann::json body, Responder& r);
  bool send_json(Responder& r, int status, const nlohmann::json& body);
  std::string metrics() const;

  Catalog& catalog_;
  ModelManager& models_;
  HttpServer server_;

  mutable std::mutex stats_mu_;
  nlohmann::json last_stats_;
  std::map<std::string, uint64_t> requests_;  // per route
  uint64_t errors_ = 0, prompt_tokens_ = 0, generated_tokens_ = 0;
};

}  // namespace onebit
