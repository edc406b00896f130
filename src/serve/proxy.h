// The front of `1bit serve`: answers 503 until the engine is ready, then forwards every request
// to a backend (an engine child), through the long-model router when there are two.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "http/server.h"
#include "ollama/ollama_routes.h"

namespace onebit {

struct Backend {
  std::string name;  // "main", "long"
  Upstream engine;   // its port on 127.0.0.1 and its key
};

struct RouteDecision {
  size_t backend = 0;
  std::string header;    // value of X-1bit-Route, empty for none
  int error_status = 0;  // non-zero: answer with this status and `error` instead of forwarding
  std::string error;
};

// Picks the backend for a request; called on the connection's thread.
using Router = std::function<RouteDecision(const RequestHead&, const std::string& body)>;

struct ProxyConfig {
  std::string api_key;                    // empty: no key required
  uint64_t max_body_bytes = 64ull << 20;  // larger bodies get 413
  bool loopback_guard = false;            // http/loopback_guard.h
  std::vector<std::string> allowed_origins;
};

class Proxy {
 public:
  // `ollama`: the host of Ollama's routes (/api/chat, ...), which go to it rather than the engine.
  Proxy(ProxyConfig config, std::vector<Backend> backends, Router router = nullptr, OllamaHost* ollama = nullptr);

  // Serves on a socket already listening (http/net.h's listen_tcp).
  void adopt(Fd listener) { server_.adopt(std::move(listener)); }
  int port() const { return server_.port(); }
  void start() { server_.start(); }
  // Ready: requests go to the backends. Not ready: 503, "Loading model" or set_unavailable's why.
  void set_ready(bool ready);
  // Not ready, with `why` in every 503 (/health's too) until set_ready(true).
  void set_unavailable(const std::string& why);
  // Points a backend at another engine (a restarted one); only while not ready, when no request
  // reaches the backends.
  void set_engine(size_t backend, Upstream engine) { backends_.at(backend).engine = std::move(engine); }
  // Stops accepting, shuts every open connection and waits for their threads.
  void stop() { server_.stop(); }

 private:
  bool handle(const Request& req, Responder& r);

  std::vector<Backend> backends_;
  Router router_;
  std::optional<OllamaRoutes> ollama_;
  std::atomic<bool> ready_{false};
  std::mutex why_mu_;
  std::string why_unavailable_;
  HttpServer server_;
};

}  // namespace onebit
