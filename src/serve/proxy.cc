#include "serve/proxy.h"

namespace onebit {
namespace {

// What stays open when an API key is set, as in the engine: health checks, CORS preflights, and
// the web UI's page and static files (GET of "/" or of a path whose last segment has a file
// extension; no API route has one), so a browser can load the UI and then send the key.
bool is_public(const RequestHead& req, const std::string& path) {
  if (req.method == "OPTIONS" || path == "/health" || path == "/v1/health") return true;
  if (req.method != "GET" && req.method != "HEAD") return false;
  return path == "/" || path.find('.', path.rfind('/')) != std::string::npos;
}

ServerConfig server_config(const ProxyConfig& c) {
  ServerConfig s;
  s.api_key = c.api_key;
  s.is_public = is_public;
  s.max_body_bytes = c.max_body_bytes;
  s.loopback_guard = c.loopback_guard;
  s.allowed_origins = c.allowed_origins;
  return s;
}

}  // namespace

Proxy::Proxy(ProxyConfig config, std::vector<Backend> backends, Router router, OllamaHost* ollama)
    : backends_(std::move(backends)),
      router_(std::move(router)),
      ollama_(ollama ? std::optional<OllamaRoutes>(std::in_place, *ollama) : std::nullopt),
      server_(server_config(config), [this](const Request& req, Responder& r) { return handle(req, r); }) {}

void Proxy::set_ready(bool ready) {
  if (ready) {
    std::lock_guard<std::mutex> lock(why_mu_);
    why_unavailable_.clear();
  }
  ready_ = ready;
}

void Proxy::set_unavailable(const std::string& why) {
  ready_ = false;
  std::lock_guard<std::mutex> lock(why_mu_);
  why_unavailable_ = why;
}

bool Proxy::handle(const Request& req, Responder& r) {
  std::string why;
  if (!ready_) {
    std::lock_guard<std::mutex> lock(why_mu_);
    why = why_unavailable_.empty() ? "Loading model" : why_unavailable_;
  }
  if (ollama_ && OllamaRoutes::handles(req.path)) {
    if (!why.empty()) return r.send(503, "application/json; charset=utf-8", ollama_error_body(why));
    return ollama_->serve(req, r);
  }
  if (!why.empty()) return r.send_error(503, why, "unavailable_error");
  RouteDecision route;
  if (router_) {
    try {
      route = router_(req.head, req.body);
    } catch (const std::exception& e) {
      route.error_status = 500;
      route.error = std::string("routing failed: ") + e.what();
    }
  }
  if (route.error_status != 0) return r.send_error(route.error_status, route.error, "server_error");
  Headers extra;
  if (!route.header.empty()) extra.push_back({"X-1bit-Route", route.header});
  return r.forward(backends_[route.backend].engine, req, extra);
}

}  // namespace onebit
