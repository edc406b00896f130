#include "proxy.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <system_error>

#include "http_conn.h"

namespace onebit {
namespace {

constexpr int kUpstreamConnectMs = 5000;

bool is_hop_by_hop(const std::string& name) {
  for (const char* h : {"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Upgrade",
                        "Transfer-Encoding", "Expect", "Content-Length", "Host"})
    if (iequals(name, h)) return true;
  return false;
}

// What stays open when an API key is set, as in the engine: health checks, CORS preflights, and
// the web UI's page and static files (GET of "/" or of a path whose last segment has a file
// extension; no API route has one), so a browser can load the UI and then send the key.
bool is_public(const RequestHead& req, const std::string& path) {
  if (req.method == "OPTIONS" || path == "/health" || path == "/v1/health") return true;
  if (req.method != "GET" && req.method != "HEAD") return false;
  return path == "/" || path.find('.', path.rfind('/')) != std::string::npos;
}

bool key_matches(const std::string& expected, const Headers& headers) {
  std::string given;
  if (const std::string* auth = find_header(headers, "Authorization")) {
    given = *auth;
    if (given.size() >= 7 && iequals(std::string_view(given).substr(0, 7), "Bearer ")) given.erase(0, 7);
  } else if (const std::string* x = find_header(headers, "X-Api-Key")) {
    given = *x;
  }
  // Compare in constant time: the key's length is not a secret worth hiding, its bytes are.
  if (given.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < given.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ expected[i]);
  return diff == 0;
}

// What happened to the client while we waited on the engine.
enum class Wait { kUpstream, kClientGone, kTimeout };

// Waits for the upstream socket to be readable while watching the client for a hang-up.
Wait wait_upstream(int upstream, int client, int timeout_ms) {
  pollfd p[2] = {{upstream, POLLIN, 0}, {client, POLLRDHUP, 0}};
  while (true) {
    int rc = ::poll(p, 2, timeout_ms);
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) return Wait::kTimeout;
    if (rc < 0) return Wait::kClientGone;
    if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return Wait::kClientGone;
    return Wait::kUpstream;
  }
}

// Per-connection state: the client and one lazily opened connection per backend.
class Session {
 public:
  Session(int client_fd, const ProxyConfig& config, const std::vector<Backend>& backends, const Router& router,
          const std::atomic<bool>& ready)
      : client_(Fd(client_fd)), config_(config), backends_(backends), router_(router), ready_(ready),
        upstream_(backends.size()) {}

  ~Session() { client_.socket().release(); }  // the Proxy owns and closes the client fd

  void run() {
    while (true) {
      std::string head;
      RequestHead req;
      try {
        ReadStatus st = client_.read_head(head, config_.idle_timeout_ms, config_.head_timeout_ms);
        if (st == ReadStatus::kTimeout) reply_error(408, "request head not received in time", "invalid_request_error", true);
        if (st != ReadStatus::kOk) return;
        req = parse_request_head(head);
      } catch (const HttpError& e) {
        reply_error(e.status, e.what(), "invalid_request_error", true);
        return;
      }
      if (!handle(req)) return;
    }
  }

 private:
  // Handles one request; false when the connection must close.
  bool handle(const RequestHead& req) {
    bool client_close = req.minor == 0 ? !header_has_token(req.headers, "Connection", "keep-alive")
                                       : header_has_token(req.headers, "Connection", "close");
    const std::string path = req.path();
    if (!config_.api_key.empty() && !is_public(req, path) && !key_matches(config_.api_key, req.headers)) {
      reply_error(401, "Invalid API Key", "authentication_error", true);
      return false;
    }
    BodyFraming framing;
    try {
      framing = request_framing(req);
    } catch (const HttpError& e) {
      reply_error(e.status, e.what(), "invalid_request_error", true);
      return false;
    }
    if (framing.kind == BodyKind::kLength && framing.length > config_.max_body_bytes) {
      reply_too_large();
      return false;
    }
    if (header_has_token(req.headers, "Expect", "100-continue") && framing.kind != BodyKind::kNone &&
        !write_all(client_.fd(), "HTTP/1.1 100 Continue\r\n\r\n"))
      return false;
    std::string body;
    try {
      ReadStatus st = client_.read_body(framing, config_.max_body_bytes, body, config_.body_timeout_ms);
      if (st == ReadStatus::kTooLarge) {
        reply_too_large();
        return false;
      }
      if (st != ReadStatus::kOk) return false;
    } catch (const HttpError& e) {
      reply_error(e.status, e.what(), "invalid_request_error", true);
      return false;
    }
    if (!ready_) return reply_error(503, "Loading model", "unavailable_error", client_close) && !client_close;


    RouteDecision route;
    if (router_) {
      try {
        route = router_(req, body);
      } catch (const std::exception& e) {
        route.error_status = 500;
        route.error = std::string("routing failed: ") + e.what();
      }
    }
    if (route.error_status != 0)
      return reply_error(route.error_status, route.error, "server_error", client_close) && !client_close;
    return forward(req, body, route, client_close);
  }

  bool forward(const RequestHead& req, const std::string& body, const RouteDecision& route, bool client_close) {
    const Backend& backend = backends_[route.backend];
    RequestHead up;
    up.method = req.method;
    up.target = req.target;
    up.headers.push_back({"Host", "127.0.0.1:" + std::to_string(backend.port)});
    for (const auto& h : req.headers)
      if (!is_hop_by_hop(h.name)) up.headers.push_back(h);
    if (!body.empty() || req.method == "POST" || req.method == "PUT" || req.method == "PATCH")
      up.headers.push_back({"Content-Length", std::to_string(body.size())});
    // Small bodies go out with the head in one write; large ones are not copied.
    constexpr size_t kCopyLimit = 64 * 1024;
    std::string request_bytes = serialize(up);
    const bool body_apart = body.size() > kCopyLimit;
    if (!body_apart) request_bytes += body;

    std::unique_ptr<HttpConn>& conn = upstream_[route.backend];
    std::string head;
    for (int attempt = 0;; ++attempt) {
      bool reused = conn != nullptr;
      if (!conn) {
        std::string err;
        Fd fd = connect_tcp("127.0.0.1", backend.port, kUpstreamConnectMs, &err);
        if (!fd.valid()) {
          reply_error(502, "engine unreachable: " + err, "server_error", true);
          return false;
        }
        conn = std::make_unique<HttpConn>(std::move(fd));
      }
      bool sent = write_all(conn->fd(), request_bytes) && (!body_apart || write_all(conn->fd(), body));
      Wait w = sent ? read_upstream_head(*conn, head) : Wait::kUpstream;
      if (w == Wait::kClientGone) {
        conn.reset();
        return false;
      }
      if (sent && !head.empty()) break;
      // A kept-alive engine connection may have been closed just before we used it: retry once
      // on a fresh one. Nothing of the response has reached the client yet.
      conn.reset();
      if (!reused || attempt > 0) {
        reply_error(502, "the engine closed the connection without answering", "server_error", true);
        return false;
      }
    }

    ResponseHead resp;
    BodyFraming framing;
    try {
      resp = parse_response_head(head);
      framing = response_framing(resp, req.method);
    } catch (const HttpError& e) {
      conn.reset();
      reply_error(502, std::string("bad response from the engine: ") + e.what(), "server_error", true);
      return false;
    }
    const bool upstream_close = header_has_token(resp.headers, "Connection", "close") || resp.minor == 0;
    const bool close_after = client_close || framing.kind == BodyKind::kUntilClose;

    ResponseHead out;
    out.status = resp.status;
    out.reason = resp.reason;
    for (auto& h : resp.headers)
      if (!iequals(h.name, "Connection") && !iequals(h.name, "Keep-Alive")) out.headers.push_back(std::move(h));
    if (!route.header.empty()) out.headers.push_back({"X-1bit-Route", route.header});
    if (close_after) out.headers.push_back({"Connection", "close"});

    bool ok = relay_body(*conn, framing, serialize(out));
    if (!ok || upstream_close) conn.reset();
    return ok && !close_after;
  }

  // Reads the engine's response head, watching the client meanwhile. `head` stays empty when the
  // engine closed first.
  Wait read_upstream_head(HttpConn& conn, std::string& head) {
    head.clear();
    while (true) {
      if (size_t end = find_head_end(conn.buffer()); end > 0) {
        head.assign(conn.buffer(), 0, end);
        conn.buffer().erase(0, end);
        return Wait::kUpstream;
      }
      Wait w = wait_upstream(conn.fd(), client_.fd(), -1);
      if (w != Wait::kUpstream) return w;
      if (!conn.receive()) return Wait::kUpstream;
    }
  }

  // Relays the body per its framing. `prefix` (the response head) goes out with the first bytes.
  bool relay_body(HttpConn& conn, const BodyFraming& framing, std::string prefix) {
    std::string& buf = conn.buffer();
    uint64_t left = framing.length;
    ChunkedDecoder chunks;
    while (true) {
      size_t take = 0;
      bool done = false;
      switch (framing.kind) {
        case BodyKind::kNone:
          done = true;
          break;
        case BodyKind::kLength:
          take = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
          left -= take;
          done = left == 0;
          break;
        case BodyKind::kChunked:
          try {
            take = chunks.feed(buf.data(), buf.size(), nullptr);
          } catch (const HttpError&) {
            return false;
          }
          done = chunks.done();
          break;
        case BodyKind::kUntilClose:
          take = buf.size();
          break;
      }
      prefix.append(buf, 0, take);
      buf.erase(0, take);
      if (!prefix.empty()) {
        if (!write_all(client_.fd(), prefix)) return false;
        prefix.clear();
      }
      if (done) return true;
      Wait w = wait_upstream(conn.fd(), client_.fd(), -1);
      if (w != Wait::kUpstream) return false;
      if (!conn.receive()) return framing.kind == BodyKind::kUntilClose;
    }
  }

  bool reply_error(int status, const std::string& message, const std::string& type, bool close) {
    bool ok = write_all(client_.fd(), json_response(status, json_error_body(status, message, type), close));
    if (close) linger();
    return ok;
  }

  // Before closing on a client that may still be sending (a refused upload, say), stop writing
  // and read what keeps coming for a moment: closing with unread bytes sends a reset, and the
  // client would see "connection reset" instead of our answer.
  void linger() {
    ::shutdown(client_.fd(), SHUT_WR);
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    char sink[16384];
    while (std::chrono::steady_clock::now() < end && wait_readable(client_.fd(), 1000))
      if (::recv(client_.fd(), sink, sizeof(sink), 0) <= 0) break;
  }

  void reply_too_large() {
    reply_error(413, "request body larger than " + std::to_string(config_.max_body_bytes) + " bytes",
                "invalid_request_error", true);
  }

  HttpConn client_;
  const ProxyConfig& config_;
  const std::vector<Backend>& backends_;
  const Router& router_;
  const std::atomic<bool>& ready_;
  std::vector<std::unique_ptr<HttpConn>> upstream_;
};

}  // namespace

Proxy::Proxy(ProxyConfig config, std::vector<Backend> backends, Router router)
    : config_(std::move(config)), backends_(std::move(backends)), router_(std::move(router)) {}

Proxy::~Proxy() { stop(); }

void Proxy::adopt(Fd listener) {
  listener_ = std::move(listener);
  port_ = bound_port(listener_.get());
}

void Proxy::start() { acceptor_ = std::thread(&Proxy::accept_loop, this); }

void Proxy::accept_loop() {
  while (!stopping_) {
    int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (stopping_) break;
      if (errno == EMFILE || errno == ENFILE) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    set_nodelay(fd);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) {
        ::close(fd);
        break;
      }
      if (open_.size() >= config_.max_connections) {
        static const std::string busy =
            json_response(503, json_error_body(503, "too many connections", "unavailable_error"), true);
        ::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        ::close(fd);
        continue;
      }
      open_.insert(fd);
    }
    auto finish = [this](int done_fd) {
      std::lock_guard<std::mutex> lock(mu_);
      open_.erase(done_fd);
      ::close(done_fd);
      idle_.notify_all();
    };
    try {
      std::thread([this, fd, finish] {
        serve_connection(fd);
        finish(fd);
      }).detach();
    } catch (const std::system_error&) {
      finish(fd);  // no thread to be had: drop this client, keep serving the others
    }
  }
}

void Proxy::serve_connection(int fd) {
  // Whatever goes wrong with one client (even memory) ends that connection, not the server.
  try {
    Session session(fd, config_, backends_, router_, ready_);
    session.run();
  } catch (...) {
  }
}

void Proxy::stop() {
  if (stopping_.exchange(true)) return;
  if (listener_.valid()) ::shutdown(listener_.get(), SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  listener_.reset();
  std::unique_lock<std::mutex> lock(mu_);
  for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
  idle_.wait(lock, [this] { return open_.empty(); });
}

}  // namespace onebit
