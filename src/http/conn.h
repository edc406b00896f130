// Blocking HTTP/1.1 message I/O over one socket: reading a head, reading a whole body within a
// limit, and a small client for requests 1bit makes itself (health polls, token counts).
#pragma once

#include <string>

#include "http/message.h"
#include "http/net.h"

namespace onebit {

enum class ReadStatus { kOk, kClosed, kTimeout, kTooLarge };

// A socket with a read buffer. Bytes read past a message stay buffered for the next one.
class HttpConn {
 public:
  explicit HttpConn(Fd fd) : fd_(std::move(fd)) {}
  int fd() const { return fd_.get(); }
  Fd& socket() { return fd_; }
  std::string& buffer() { return buf_; }

  // Reads one head into `head` (buffered bytes first), waiting up to `idle_ms` for its first
  // byte and `whole_ms` from then on for the rest (a client trickling bytes gets kTimeout).
  // kClosed when the peer closed before a byte of it arrived. Throws HttpError on a malformed or
  // oversized head.
  ReadStatus read_head(std::string& head, int idle_ms, int whole_ms = 30000);
  // Reads a whole body per `framing` into `body`, decoding chunked transfer. kTooLarge as soon as
  // the payload would pass `limit` (the rest is not read).
  ReadStatus read_body(const BodyFraming& framing, uint64_t limit, std::string& body, int timeout_ms);
  // Waits up to `timeout_ms` for bytes and reads them into the buffer; false on EOF, error or
  // timeout.
  bool fill(int timeout_ms);
  // Reads what has arrived, for a caller that already saw the socket readable (one system call
  // less than fill on the proxy's hot path); false on EOF or error.
  bool receive();

 private:
  Fd fd_;
  std::string buf_;
};

struct HttpResult {
  int status = 0;  // 0 when no response came; `error` says why
  Headers headers;
  std::string body;
  std::string error;
};

// One request on a fresh connection (Connection: close), the whole response read.
HttpResult http_fetch(const std::string& host, int port, const std::string& method, const std::string& target,
                      const std::string& body = "", const Headers& headers = {}, int timeout_ms = 10000);

}  // namespace onebit
