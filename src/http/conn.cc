#include "http/conn.h"

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <optional>

namespace onebit {

bool HttpConn::fill(int timeout_ms) { return wait_readable(fd_.get(), timeout_ms) && receive(); }

bool HttpConn::receive() {
  char tmp[16384];
  ssize_t n;
  do n = ::recv(fd_.get(), tmp, sizeof(tmp), 0);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  buf_.append(tmp, static_cast<size_t>(n));
  return true;
}

ReadStatus HttpConn::read_head(std::string& head, int idle_ms, int whole_ms) {
  std::optional<std::chrono::steady_clock::time_point> deadline;
  while (true) {
    // Empty lines between messages are ignored (RFC 9112 2.2).
    size_t skip = 0;
    while (skip < buf_.size() && (buf_[skip] == '\r' || buf_[skip] == '\n')) ++skip;
    if (skip > 0) buf_.erase(0, skip);
    if (size_t end = find_head_end(buf_); end > 0) {
      head.assign(buf_, 0, end);
      buf_.erase(0, end);
      return ReadStatus::kOk;
    }
    bool had_bytes = !buf_.empty();
    int wait_ms = idle_ms;
    if (had_bytes) {
      auto now = std::chrono::steady_clock::now();
      if (!deadline) deadline = now + std::chrono::milliseconds(whole_ms);
      if (now >= *deadline) return ReadStatus::kTimeout;
      wait_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - now).count()) + 1;
    }
    if (!wait_readable(fd_.get(), wait_ms)) return had_bytes ? ReadStatus::kTimeout : ReadStatus::kClosed;
    if (!receive()) {
      if (had_bytes) throw HttpError(400, "connection closed inside the request head");
      return ReadStatus::kClosed;
    }
  }
}

ReadStatus HttpConn::read_body(const BodyFraming& framing, uint64_t limit, std::string& body, int timeout_ms) {
  body.clear();
  switch (framing.kind) {
    case BodyKind::kNone:
      return ReadStatus::kOk;
    case BodyKind::kLength: {
      if (framing.length > limit) return ReadStatus::kTooLarge;
      while (buf_.size() < framing.length)
        if (!fill(timeout_ms)) return ReadStatus::kClosed;
      body.assign(buf_, 0, framing.length);
      buf_.erase(0, framing.length);
      if (buf_.capacity() > (1u << 20)) buf_.shrink_to_fit();  // a big body leaves no big buffer behind
      return ReadStatus::kOk;
    }
    case BodyKind::kChunked: {
      ChunkedDecoder dec;
      while (true) {
        size_t used = dec.feed(buf_.data(), buf_.size(), &body);
        buf_.erase(0, used);
        if (dec.payload_bytes() > limit) return ReadStatus::kTooLarge;
        if (dec.done()) {
          if (buf_.capacity() > (1u << 20)) buf_.shrink_to_fit();
          return ReadStatus::kOk;
        }
        if (!fill(timeout_ms)) return ReadStatus::kClosed;
      }
    }
    case BodyKind::kUntilClose: {
      while (true) {
        if (buf_.size() > limit) return ReadStatus::kTooLarge;
        if (!fill(timeout_ms)) break;
      }
      body.swap(buf_);
      buf_.clear();
      return ReadStatus::kOk;
    }
  }
  return ReadStatus::kOk;
}

HttpResult http_fetch(const std::string& host, int port, const std::string& method, const std::string& target,
                      const std::string& body, const Headers& headers, int timeout_ms) {
  HttpResult result;
  Fd fd = connect_tcp(host, port, timeout_ms, &result.error);
  if (!fd.valid()) return result;
  RequestHead req;
  req.method = method;
  req.target = target;
  // A caller's own Host replaces ours.
  const bool own_host = find_header(headers, "Host") != nullptr;
  req.headers = {{"Connection", "close"}};
  if (!own_host) req.headers.insert(req.headers.begin(), {"Host", host + ":" + std::to_string(port)});
  if (!body.empty() || method == "POST" || method == "PUT")
    req.headers.push_back({"Content-Length", std::to_string(body.size())});
  req.headers.insert(req.headers.end(), headers.begin(), headers.end());
  if (!write_all(fd.get(), serialize(req) + body)) {
    result.error = "connection lost while sending the request";
    return result;
  }
  HttpConn conn(std::move(fd));
  try {
    std::string head;
    if (conn.read_head(head, timeout_ms) != ReadStatus::kOk) {
      result.error = "no response within " + std::to_string(timeout_ms) + " ms";
      return result;
    }
    ResponseHead resp = parse_response_head(head);
    if (conn.read_body(response_framing(resp, method), 1ull << 30, result.body, timeout_ms) != ReadStatus::kOk) {
      result.error = "response body cut short";
      return result;
    }
    result.status = resp.status;
    result.headers = std::move(resp.headers);
  } catch (const HttpError& e) {
    result.error = e.what();
  }
  return result;
}

}  // namespace onebit
