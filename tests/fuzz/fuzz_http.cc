// libFuzzer target: HTTP/1.1 heads and chunked bodies as a client or the engine may send them
// (src/http/message.h). Rejection must be an onebit::HttpError; anything else is a bug.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"
#include "http/message.h"

namespace {

using namespace onebit;

void check_status(const HttpError& e) {
  if (e.status < 400 || e.status > 599) __builtin_trap();  // it is sent back as an error status
}

bool same(const Headers& a, const Headers& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].value != b[i].value) return false;
  return true;
}

// As the proxy reads a client: skip empty lines, find the head, parse it, frame the body.
// A head that parses must survive serialize() and parse again unchanged: the proxy forwards it.
void request(std::string_view in) {
  while (!in.empty() && (in.front() == '\r' || in.front() == '\n')) in.remove_prefix(1);
  try {
    size_t end = find_head_end(in);
    if (end == 0) return;
    RequestHead r = parse_request_head(in.substr(0, end));
    (void)r.path();
    (void)request_framing(r);
    std::string again = serialize(r);
    if (find_head_end(again) != again.size()) __builtin_trap();
    RequestHead r2 = parse_request_head(again);
    if (r2.method != r.method || r2.target != r.target || r2.minor != r.minor || !same(r2.headers, r.headers))
      __builtin_trap();
  } catch (const HttpError& e) {
    check_status(e);
  }
}

// As the proxy reads the engine's answer; the same bytes also stand for a response head.
void response(std::string_view in) {
  try {
    size_t end = find_head_end(in);
    if (end == 0) return;
    ResponseHead r = parse_response_head(in.substr(0, end));
    (void)response_framing(r, "GET");
    (void)response_framing(r, "HEAD");
    std::string again = serialize(r);
    ResponseHead r2 = parse_response_head(again);
    if (r2.status != r.status || r2.minor != r.minor || !same(r2.headers, r.headers) ||
        (!r.reason.empty() && r2.reason != r.reason))
      __builtin_trap();
  } catch (const HttpError& e) {
    check_status(e);
  }
}

struct Decoded {
  bool failed = false;
  bool done = false;
  size_t used = 0;
  std::string out;
};

// Feeds `body` to a ChunkedDecoder all at once, or in pieces of 1..16 bytes drawn from `seed` as
// reads off a socket would arrive.
Decoded decode(std::string_view body, uint32_t seed, bool pieces) {
  Decoded d;
  ChunkedDecoder dec;
  try {
    while (d.used < body.size() && !dec.done()) {
      seed = seed * 1664525u + 1013904223u;
      size_t left = body.size() - d.used;
      size_t n = pieces ? std::min<size_t>(1 + (seed >> 24) % 16, left) : left;
      size_t used = dec.feed(body.data() + d.used, n, &d.out);
      if (used > n || (used < n && !dec.done())) __builtin_trap();  // short only once done
      d.used += used;
    }
  } catch (const HttpError& e) {
    check_status(e);
    d.failed = true;
  }
  d.done = dec.done();
  if (!d.failed && dec.payload_bytes() != d.out.size()) __builtin_trap();
  return d;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  uint32_t seed = data[0];  // the first byte only picks the piece sizes
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  request(in);
  response(in);

  // The body after a head (or the whole input when there is none): however it is split, the
  // decoder must reach the same verdict, consume the same bytes and yield the same payload (up to
  // the error, when there is one).
  std::string_view body = in;
  try {
    if (size_t end = find_head_end(in); end > 0) body.remove_prefix(end);
  } catch (const HttpError&) {
  }
  Decoded whole = decode(body, seed, false), split = decode(body, seed, true);
  if (whole.failed != split.failed || whole.out != split.out) __builtin_trap();
  if (!whole.failed && (whole.done != split.done || whole.used != split.used)) __builtin_trap();
  return 0;
}
