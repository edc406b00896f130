// HTTP/1.1 message parsing (RFC 9112), without I/O: request and response heads, body framing and
// an incremental chunked decoder. Input is untrusted (it comes from any local client), so every
// limit is explicit and malformed input raises HttpError carrying the status to answer with.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace onebit {

struct HttpError : Error {
  HttpError(int status, const std::string& message) : Error(message), status(status) {}
  int status;  // 400, 413, 431, 501, ...
};

struct Header {
  std::string name;
  std::string value;
};
using Headers = std::vector<Header>;

// The value of the first header named `name` (case-insensitive), or nullptr.
const std::string* find_header(const Headers& headers, std::string_view name);
// Whether a comma-separated header (Connection, Transfer-Encoding) lists `token`, ignoring case.
bool header_has_token(const Headers& headers, std::string_view name, std::string_view token);
bool iequals(std::string_view a, std::string_view b);

struct RequestHead {
  std::string method;
  std::string target;  // origin-form: "/v1/chat/completions?x=1"
  int minor = 1;       // HTTP/1.minor
  Headers headers;
  std::string path() const;  // target without the query
};

struct ResponseHead {
  int status = 0;
  std::string reason;
  int minor = 1;
  Headers headers;
};

constexpr size_t kMaxHeadBytes = 64 * 1024;
constexpr size_t kMaxHeaders = 128;

// The length of the head (through its blank line) when `buf` starts with a whole head, else 0.
// Throws HttpError(431) when no head ends within kMaxHeadBytes.
size_t find_head_end(std::string_view buf);
// Parse a complete head as returned by find_head_end. Throw HttpError(400, ...) when malformed.
RequestHead parse_request_head(std::string_view head);
ResponseHead parse_response_head(std::string_view head);

std::string serialize(const RequestHead& head);
std::string serialize(const ResponseHead& head);

enum class BodyKind { kNone, kLength, kChunked, kUntilClose };
struct BodyFraming {
  BodyKind kind = BodyKind::kNone;
  uint64_t length = 0;  // for kLength
};
// How a request body is delimited. Throws HttpError: 400 for a bad Content-Length, 501 for a
// transfer coding other than chunked.
BodyFraming request_framing(const RequestHead& head);
// How a response body is delimited, given the request method it answers.
BodyFraming response_framing(const ResponseHead& head, std::string_view request_method);

// Decodes a chunked body incrementally. feed() consumes as much of `data` as it can, appends the
// payload to `out` when given, and returns the bytes consumed (less than `size` only once done).
// Throws HttpError(400) on malformed framing.
class ChunkedDecoder {
 public:
  size_t feed(const char* data, size_t size, std::string* out);
  bool done() const { return state_ == State::kDone; }
  uint64_t payload_bytes() const { return payload_; }

 private:
  enum class State { kSize, kExtension, kSizeLf, kData, kDataCr, kDataLf, kTrailerStart, kTrailerLine, kTrailerLf, kDone };
  State state_ = State::kSize;
  uint64_t remaining_ = 0;
  uint64_t payload_ = 0;
  int size_digits_ = 0;
  size_t line_bytes_ = 0;
};

// A JSON error body in the engine's shape: {"error":{"code":..,"message":..,"type":..}}.
std::string json_error_body(int status, const std::string& message, const std::string& type);
// A complete response with a JSON body; `close` adds "Connection: close".
std::string json_response(int status, const std::string& body, bool close, const Headers& extra = {});
const char* reason_phrase(int status);

}  // namespace onebit
