#include "http/server.h"

#include "http/loopback_guard.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <system_error>

namespace onebit {
namespace {

constexpr int kUpstreamConnectMs = 5000;

bool is_hop_by_hop(const std::string& name) {
  for (const char* h : {"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Upgrade",
                        "Transfer-Encoding", "Expect", "Content-Length", "Host"})
    if (iequals(name, h)) return true;
  return false;
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
enum class Wait { kUpstream, kClientGone };

// Waits for the upstream socket to be readable while watching the client for a hang-up.
Wait wait_upstream(int upstream, int client) {
  pollfd p[2] = {{upstream, POLLIN, 0}, {client, POLLRDHUP, 0}};
  while (true) {
    int rc = ::poll(p, 2, -1);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return Wait::kClientGone;
    if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return Wait::kClientGone;
    return Wait::kUpstream;
  }
}

// Reads the engine's response head, watching the client meanwhile. `head` stays empty when the
// engine closed first.
Wait read_upstream_head(HttpConn& conn, int client, std::string& head) {
  head.clear();
  while (true) {
    if (size_t end = find_head_end(conn.buffer()); end > 0) {
      head.assign(conn.buffer(), 0, end);
      conn.buffer().erase(0, end);
      return Wait::kUpstream;
    }
    if (wait_upstream(conn.fd(), client) != Wait::kUpstream) return Wait::kClientGone;
    if (!conn.receive()) return Wait::kUpstream;
  }
}

// Before closing on a client that may still be sending (a refused upload, say), stop writing
// and read what keeps coming for a moment: closing with unread bytes sends a reset, and the
// client would see "connection reset" instead of our answer.
void linger(int fd) {
  ::shutdown(fd, SHUT_WR);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  char sink[16384];
  while (std::chrono::steady_clock::now() < end && wait_readable(fd, 1000))
    if (::recv(fd, sink, sizeof(sink), 0) <= 0) break;
}

// One client connection: reads requests, applies the server's rules, calls the handler.
class Session {
 public:
  Session(int fd, const ServerConfig& config, const Handler& handler)
      : client_(Fd(fd)), config_(config), handler_(handler) {}
  ~Session() { client_.socket().release(); }  // the HttpServer owns and closes the client fd

  void run() {
    while (true) {
      std::string head;
      Request req;
      try {
        ReadStatus st = client_.read_head(head, config_.idle_timeout_ms, config_.head_timeout_ms);
        if (st == ReadStatus::kTimeout) refuse(408, "request head not received in time");
        if (st != ReadStatus::kOk) return;
        req.head = parse_request_head(head);
      } catch (const HttpError& e) {
        refuse(e.status, e.what());
        return;
      }
      if (!handle(req)) return;
    }
  }

 private:
  // An error that ends the connection.
  void refuse(int status, const std::string& message, const std::string& body = "") {
    std::string b = body.empty() ? json_error_body(status, message, "invalid_request_error") : body;
    write_all(client_.fd(), json_response(status, b, true, config_.refusal_headers));
    linger(client_.fd());
  }

  bool handle(Request& req) {
    const RequestHead& h = req.head;
    const bool client_close = h.minor == 0 ? !header_has_token(h.headers, "Connection", "keep-alive")
                                           : header_has_token(h.headers, "Connection", "close");
    req.path = h.path();
    if (config_.loopback_guard)
      if (const std::string why = loopback_refusal(h, config_.allowed_origins); !why.empty()) {
        refuse(403, why);
        return false;
      }
    if (!config_.api_key.empty() && !(config_.is_public && config_.is_public(h, req.path)) &&
        !key_matches(config_.api_key, h.headers)) {
      refuse(401, "", config_.unauthorized_body.empty()
                          ? json_error_body(401, "Invalid API Key", "authentication_error")
                          : config_.unauthorized_body);
      return false;
    }
    BodyFraming framing;
    try {
      framing = request_framing(h);
    } catch (const HttpError& e) {
      refuse(e.status, e.what());
      return false;
    }
    const std::string too_large = "request body larger than " + std::to_string(config_.max_body_bytes) + " bytes";
    if (framing.kind == BodyKind::kLength && framing.length > config_.max_body_bytes) {
      refuse(413, too_large);
      return false;
    }
    if (header_has_token(h.headers, "Expect", "100-continue") && framing.kind != BodyKind::kNone &&
        !write_all(client_.fd(), "HTTP/1.1 100 Continue\r\n\r\n"))
      return false;
    try {
      ReadStatus st = client_.read_body(framing, config_.max_body_bytes, req.body, config_.body_timeout_ms);
      if (st == ReadStatus::kTooLarge) {
        refuse(413, too_large);
        return false;
      }
      if (st != ReadStatus::kOk) return false;
    } catch (const HttpError& e) {
      refuse(e.status, e.what());
      return false;
    }
    Responder r(client_, upstreams_, client_close);
    bool keep = handler_(req, r) && !client_close;
    if (!keep) linger(client_.fd());
    return keep;
  }

  HttpConn client_;
  const ServerConfig& config_;
  const Handler& handler_;
  std::map<int, std::unique_ptr<HttpConn>> upstreams_;
};

}  // namespace

bool Responder::send(int status, const std::string& content_type, const std::string& body, const Headers& extra) {
  ResponseHead h;
  h.status = status;
  h.headers = {{"Content-Type", content_type}, {"Content-Length", std::to_string(body.size())}};
  h.headers.insert(h.headers.end(), extra.begin(), extra.end());
  if (client_close_) h.headers.push_back({"Connection", "close"});
  return write_all(client_.fd(), serialize(h) + body) && !client_close_;
}

bool Responder::send_error(int status, const std::string& message, const std::string& type) {
  return send(status, "application/json; charset=utf-8", json_error_body(status, message, type));
}

bool Responder::client_gone() const {
  pollfd p{client_.fd(), POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

Responder::Exchange Responder::exchange(const Upstream& to, const Request& req, const std::string& body,
                                        bool uncompressed, HttpConn*& out, ResponseHead& resp, BodyFraming& framing,
                                        std::string& failure) {
  const int port = to.port;
  RequestHead up;
  up.method = req.head.method;
  up.target = req.head.target;
  up.headers.push_back({"Host", "127.0.0.1:" + std::to_string(port)});
  const bool keyed = !to.key.empty();
  for (const auto& h : req.head.headers) {
    if (is_hop_by_hop(h.name)) continue;
    if (keyed && (iequals(h.name, "Authorization") || iequals(h.name, "X-Api-Key"))) continue;
    if (uncompressed && iequals(h.name, "Accept-Encoding")) continue;
    up.headers.push_back(h);
  }
  if (keyed) up.headers.push_back(to.authorization());
  if (!body.empty() || up.method == "POST" || up.method == "PUT" || up.method == "PATCH")
    up.headers.push_back({"Content-Length", std::to_string(body.size())});
  // Small bodies go out with the head in one write; large ones are not copied.
  constexpr size_t kCopyLimit = 64 * 1024;
  std::string request_bytes = serialize(up);
  const bool body_apart = body.size() > kCopyLimit;
  if (!body_apart) request_bytes += body;

  std::unique_ptr<HttpConn>& conn = upstreams_[port];
  std::string head;
  for (int attempt = 0;; ++attempt) {
    bool reused = conn != nullptr;
    if (!conn) {
      std::string err;
      Fd fd = connect_tcp("127.0.0.1", port, kUpstreamConnectMs, &err);
      if (!fd.valid()) {
        failure = "engine unreachable: " + err;
        return Exchange::kFailed;
      }
      conn = std::make_unique<HttpConn>(std::move(fd));
    }
    bool sent = write_all(conn->fd(), request_bytes) && (!body_apart || write_all(conn->fd(), body));
    Wait w = sent ? read_upstream_head(*conn, client_.fd(), head) : Wait::kUpstream;
    if (w == Wait::kClientGone) {
      conn.reset();
      return Exchange::kClientGone;
    }
    if (sent && !head.empty()) break;
    // A kept-alive engine connection may have been closed just before we used it: retry once
    // on a fresh one. Nothing of the response has reached the client yet.
    conn.reset();
    if (!reused || attempt > 0) {
      failure = "the engine closed the connection without answering";
      return Exchange::kFailed;
    }
  }
  try {
    resp = parse_response_head(head);
    framing = response_framing(resp, req.head.method);
  } catch (const HttpError& e) {
    conn.reset();
    failure = std::string("bad response from the engine: ") + e.what();
    return Exchange::kFailed;
  }
  out = conn.get();
  return Exchange::kAnswered;
}

bool Responder::forward(const Upstream& to, const Request& req, const std::string& body, const Headers& extra,
                        const BodyTap& tap) {
  HttpConn* conn = nullptr;
  ResponseHead resp;
  BodyFraming framing;
  std::string failure;
  switch (exchange(to, req, body, false, conn, resp, framing, failure)) {
    case Exchange::kClientGone:
      return false;
    case Exchange::kFailed:
      send_error(502, failure, "server_error");
      return false;
    case Exchange::kAnswered:
      break;
  }
  const bool upstream_close = header_has_token(resp.headers, "Connection", "close") || resp.minor == 0;
  const bool close_after = client_close_ || framing.kind == BodyKind::kUntilClose;

  ResponseHead out;
  out.status = resp.status;
  out.reason = resp.reason;
  for (auto& h : resp.headers)
    if (!iequals(h.name, "Connection") && !iequals(h.name, "Keep-Alive")) out.headers.push_back(std::move(h));
  out.headers.insert(out.headers.end(), extra.begin(), extra.end());
  if (close_after) out.headers.push_back({"Connection", "close"});

  bool ok = relay_body(*conn, framing, serialize(out), tap);
  if (!ok || upstream_close) upstreams_.erase(to.port);
  return ok && !close_after;
}

namespace {

// One chunk of a chunked body; nothing for empty data, which would end the body.
void append_chunk(std::string& out, const std::string& data) {
  if (data.empty()) return;
  char size[20];
  snprintf(size, sizeof(size), "%zx\r\n", data.size());
  out += size;
  out += data;
  out += "\r\n";
}

}  // namespace

bool Responder::translate(const Upstream& to, const Request& req, const std::string& body,
                          BodyTranslation& translation) {
  HttpConn* conn = nullptr;
  ResponseHead resp;
  BodyFraming framing;
  std::string failure;
  const Exchange e = exchange(to, req, body, true, conn, resp, framing, failure);
  if (e == Exchange::kClientGone) return false;
  ResponseHead out;
  out.status = e == Exchange::kFailed ? 502 : resp.status;
  out.headers = {{"Content-Type", translation.begin(out.status)}, {"Transfer-Encoding", "chunked"}};
  if (client_close_) out.headers.push_back({"Connection", "close"});
  if (e == Exchange::kFailed) {
    std::string bytes = serialize(out);
    append_chunk(bytes, translation.feed(json_error_body(502, failure, "server_error")));
    append_chunk(bytes, translation.end());
    bytes += "0\r\n\r\n";
    return write_all(client_.fd(), bytes) && !client_close_;
  }
  const bool upstream_close = header_has_token(resp.headers, "Connection", "close") || resp.minor == 0;
  bool ok = relay_body(*conn, framing, serialize(out), nullptr, &translation);
  if (!ok || upstream_close || framing.kind == BodyKind::kUntilClose) upstreams_.erase(to.port);
  return ok && !client_close_;
}

bool Responder::relay_body(HttpConn& conn, const BodyFraming& framing, std::string prefix, const BodyTap& tap,
                           BodyTranslation* translation) {
  std::string& buf = conn.buffer();
  uint64_t left = framing.length;
  ChunkedDecoder chunks;
  std::string decoded;
  const bool decode = tap || translation;
  // What the client gets for a piece of the engine's body: the bytes themselves, or their
  // translation as one chunk (the last with the translation's end and the closing chunk).
  auto pass = [&](std::string_view payload, size_t raw, bool done) {
    if (!translation) {
      prefix.append(buf, 0, raw);
      return;
    }
    std::string piece = translation->feed(payload);
    if (done) piece += translation->end();
    append_chunk(prefix, piece);
    if (done) prefix += "0\r\n\r\n";
  };
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
          decoded.clear();
          take = chunks.feed(buf.data(), buf.size(), decode ? &decoded : nullptr);
        } catch (const HttpError&) {
          return false;
        }
        done = chunks.done();
        break;
      case BodyKind::kUntilClose:
        take = buf.size();
        break;
    }
    const std::string_view payload =
        framing.kind == BodyKind::kChunked ? std::string_view(decoded) : std::string_view(buf.data(), take);
    if (tap) {
      tap(payload.data(), payload.size());
      if (done) tap(nullptr, 0);
    }
    pass(payload, take, done);
    buf.erase(0, take);
    if (!prefix.empty()) {
      if (!write_all(client_.fd(), prefix)) return false;
      prefix.clear();
    }
    if (done) return true;
    if (wait_upstream(conn.fd(), client_.fd()) != Wait::kUpstream) return false;
    if (!conn.receive()) {
      if (framing.kind != BodyKind::kUntilClose) return false;
      if (tap) tap(nullptr, 0);  // such a body ends with the connection, after its last bytes went out
      if (translation) {
        pass({}, 0, true);
        return write_all(client_.fd(), prefix);
      }
      return true;
    }
  }
}

HttpServer::HttpServer(ServerConfig config, Handler handler) : config_(std::move(config)), handler_(std::move(handler)) {}

HttpServer::~HttpServer() { stop(); }

void HttpServer::adopt(Fd listener) {
  listener_ = std::move(listener);
  port_ = bound_port(listener_.get());
}

void HttpServer::start() { acceptor_ = std::thread(&HttpServer::accept_loop, this); }

void HttpServer::accept_loop() {
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

void HttpServer::serve_connection(int fd) {
  // Whatever goes wrong with one client (even memory) ends that connection, not the server.
  try {
    Session session(fd, config_, handler_);
    session.run();
  } catch (...) {
  }
}

void HttpServer::stop() {
  if (stopping_.exchange(true)) return;
  if (listener_.valid()) ::shutdown(listener_.get(), SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  listener_.reset();
  std::unique_lock<std::mutex> lock(mu_);
  for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
  idle_.wait(lock, [this] { return open_.empty(); });
}

}  // namespace onebit
