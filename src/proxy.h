// The HTTP front of `1bit serve`: accepts clients, checks the API key and body size, answers 503
// until the engine is ready, and forwards every request to a backend (an engine child),
// relaying the response byte for byte as it arrives, so SSE streams pass chunk by chunk.
//
// Each client connection has its own thread and its own upstream connection per backend, kept
// alive as long as the client's, so the engine sees the same connection pattern as with direct
// clients. A client that disconnects mid-response closes its upstream connection, which makes
// the engine cancel the request.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "http.h"
#include "net.h"

namespace onebit {

struct Backend {
  std::string name;  // "main", "long"
  int port = 0;      // on 127.0.0.1
};

struct RouteDecision {
  size_t backend = 0;
  std::string header;  // value of X-1bit-Route, empty for none
  int error_status = 0;  // non-zero: answer with this status and `error` instead of forwarding
  std::string error;
};

// Picks the backend for a request; called on the connection's thread.
using Router = std::function<RouteDecision(const RequestHead&, const std::string& body)>;

struct ProxyConfig {
  std::string api_key;                    // empty: no key required
  uint64_t max_body_bytes = 64ull << 20;  // larger bodies get 413
  int idle_timeout_ms = 60000;            // a keep-alive connection with no request for this long is closed
  int head_timeout_ms = 30000;            // a request head must arrive whole within this, once begun
  int body_timeout_ms = 60000;            // a request body that stalls this long is dropped
  size_t max_connections = 1024;          // more concurrent clients get 503 at once
};

class Proxy {
 public:
  Proxy(ProxyConfig config, std::vector<Backend> backends, Router router = nullptr);
  ~Proxy();

  // Serves on a socket already listening (net.h's listen_tcp).
  void adopt(Fd listener);
  int port() const { return port_; }
  void start();
  void set_ready(bool ready) { ready_ = ready; }
  // Stops accepting, shuts every open connection and waits for their threads.
  void stop();

 private:
  void accept_loop();
  void serve_connection(int fd);

  ProxyConfig config_;
  std::vector<Backend> backends_;
  Router router_;
  Fd listener_;
  int port_ = 0;
  std::atomic<bool> ready_{false};
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable idle_;
  std::set<int> open_;  // client sockets being served
};

}  // namespace onebit
