// The HTTP/1.1 server under `1bit serve` and `1bit lemonade`: one thread per client connection,
// the API key and body limit enforced before any handler runs, and a Responder through which a
// handler either answers itself or forwards the request to an engine on loopback, relaying the
// engine's response byte for byte as it arrives (SSE streams pass chunk by chunk).
//
// Each client connection keeps its own kept-alive connection to each engine port it used, so an
// engine sees the same connection pattern as with direct clients; a client that disconnects
// mid-response closes that connection, which makes the engine cancel the request.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include "http/conn.h"
#include "http/message.h"
#include "http/net.h"

namespace onebit {

struct Request {
  RequestHead head;
  std::string path;  // head.target without the query
  std::string body;  // whole, de-chunked
};

// Observes the bytes of a relayed response body as they pass (for statistics); never blocks. A
// last call with data == nullptr says the body is complete; it comes before the body's last bytes
// go to the client, so what the tap records is in place when the client sees the end.
using BodyTap = std::function<void(const char* data, size_t size)>;

// Turns an engine's response into another API's as it passes (Ollama's NDJSON from the engine's
// SSE): the client gets the engine's status with the translation's content type and body,
// chunked, each piece written as soon as the translation returns it.
class BodyTranslation {
 public:
  virtual ~BodyTranslation() = default;
  // The engine's status; returns the content type of the client's answer.
  virtual std::string begin(int status) = 0;
  // A piece of the engine's body (de-chunked); returns what the client gets for it, maybe "".
  virtual std::string feed(std::string_view data) = 0;
  // The engine's body is complete; returns the rest of the client's.
  virtual std::string end() = 0;
};

// An engine on 127.0.0.1: its port and the key it demands (engine/engine_key.h; empty: none).
struct Upstream {
  int port = 0;
  std::string key;
  // The header that presents the key to the engine.
  Header authorization() const { return {"Authorization", "Bearer " + key}; }
};

class Responder {
 public:
  Responder(HttpConn& client, std::map<int, std::unique_ptr<HttpConn>>& upstreams, bool client_close)
      : client_(client), upstreams_(upstreams), client_close_(client_close) {}

  // A complete response. Returns whether the connection can serve another request.
  bool send(int status, const std::string& content_type, const std::string& body, const Headers& extra = {});
  // The engine's JSON error shape: {"error":{"code","message","type"}}.
  bool send_error(int status, const std::string& message, const std::string& type);
  // Forwards `req` (with `body` in place of req.body) to the engine `to` and relays the answer,
  // adding `extra` headers to it. With an engine key, the client's own credentials (Authorization,
  // X-Api-Key) are replaced by the engine's. 502 when the engine cannot be reached.
  bool forward(const Upstream& to, const Request& req, const std::string& body, const Headers& extra = {},
               const BodyTap& tap = nullptr);
  bool forward(const Upstream& to, const Request& req, const Headers& extra = {}, const BodyTap& tap = nullptr) {
    return forward(to, req, req.body, extra, tap);
  }
  // Sends `req` (with `body`) to the engine `to` and answers the client with the translation of
  // the engine's response. The engine's body arrives uncompressed (no Accept-Encoding goes
  // along). When the engine cannot be reached, the translation gets a 502 with the engine's
  // error shape.
  bool translate(const Upstream& to, const Request& req, const std::string& body, BodyTranslation& translation);
  // The client's connection, for handlers that wait long: true once it has hung up.
  bool client_gone() const;
  // Whether the client asked to close after this response.
  bool closing() const { return client_close_; }

 private:
  enum class Exchange { kAnswered, kClientGone, kFailed };
  // Sends the request to the engine and reads its response head into `head` and `framing`;
  // kFailed with `failure` saying why when the engine cannot be reached or answers badly.
  // `uncompressed`: no Accept-Encoding goes along.
  Exchange exchange(const Upstream& to, const Request& req, const std::string& body, bool uncompressed,
                    HttpConn*& conn, ResponseHead& head, BodyFraming& framing, std::string& failure);
  bool relay_body(HttpConn& conn, const BodyFraming& framing, std::string prefix, const BodyTap& tap,
                  BodyTranslation* translation = nullptr);

  HttpConn& client_;
  std::map<int, std::unique_ptr<HttpConn>>& upstreams_;
  bool client_close_;
};

// Returns whether the connection can serve another request.
using Handler = std::function<bool(const Request&, Responder&)>;

struct ServerConfig {
  std::string api_key;                    // empty: no key required
  // Requests that need no key even when one is set (health checks, static pages).
  std::function<bool(const RequestHead&, const std::string& path)> is_public;
  uint64_t max_body_bytes = 64ull << 20;  // larger bodies get 413
  int idle_timeout_ms = 60000;            // a keep-alive connection with no request for this long is closed
  int head_timeout_ms = 30000;            // a request head must arrive whole within this, once begun
  int body_timeout_ms = 60000;            // a request body that stalls this long is dropped
  size_t max_connections = 1024;          // more concurrent clients get 503 at once
  // The 401 body; the engine's JSON error by default (Lemonade answers {"error": "..."}).
  std::string unauthorized_body;
  // Headers on every answer the server gives by itself (401, 413, ...), e.g. CORS's, so that a
  // browser can read why it was refused.
  Headers refusal_headers;
  // On loopback: refuse other Hosts and foreign Origins with 403 (http/loopback_guard.h).
  bool loopback_guard = false;
  std::vector<std::string> allowed_origins;
};

class HttpServer {
 public:
  HttpServer(ServerConfig config, Handler handler);
  ~HttpServer();

  // Serves on a socket already listening (http/net.h's listen_tcp).
  void adopt(Fd listener);
  int port() const { return port_; }
  void start();
  // Stops accepting, shuts every open connection and waits for their threads.
  void stop();

 private:
  void accept_loop();
  void serve_connection(int fd);

  ServerConfig config_;
  Handler handler_;
  Fd listener_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable idle_;
  std::set<int> open_;  // client sockets being served
};

}  // namespace onebit
