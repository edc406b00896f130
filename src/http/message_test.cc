#include "http/message.h"

#include <gtest/gtest.h>

#include <cstring>

namespace onebit {

TEST(Http, ParsesARequestHead) {
  std::string buf = "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length:  12 \r\n"
                    "Connection: keep-alive, Upgrade\r\n\r\n{\"a\":1}";
  size_t end = find_head_end(buf);
  ASSERT_GT(end, 0u);
  RequestHead r = parse_request_head(std::string_view(buf).substr(0, end));
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/chat/completions?x=1");
  EXPECT_EQ(r.path(), "/v1/chat/completions");
  EXPECT_EQ(r.minor, 1);
  EXPECT_EQ(*find_header(r.headers, "content-length"), "12");
  EXPECT_TRUE(header_has_token(r.headers, "connection", "upgrade"));
  BodyFraming f = request_framing(r);
  EXPECT_EQ(f.kind, BodyKind::kLength);
  EXPECT_EQ(f.length, 12u);
}

TEST(Http, WaitsForAWholeHead) {
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\r\nHost: a\r\n"), 0u);
  EXPECT_EQ(find_head_end("GET / HTTP/1.1\n\n"), 16u);
  EXPECT_THROW(find_head_end(std::string(kMaxHeadBytes + 1, 'a')), HttpError);
}

int status_of(std::string_view head) {
  try {
    RequestHead r = parse_request_head(head);
    request_framing(r);
  } catch (const HttpError& e) {
    return e.status;
  }
  return 0;
}

TEST(Http, RejectsMalformedRequests) {
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\n\r\n"), 0);
  EXPECT_EQ(status_of("GET /\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/2.0\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET http://x/ HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(status_of("G(T / HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nBad Header: x\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nNoColon\r\n\r\n"), 400);
  EXPECT_EQ(status_of("GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), 400);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"), 501);
  EXPECT_EQ(status_of("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"), 400);
  std::string many = "GET / HTTP/1.1\r\n";
  for (size_t i = 0; i <= kMaxHeaders; ++i) many += "X-" + std::to_string(i) + ": y\r\n";
  EXPECT_EQ(status_of(many + "\r\n"), 431);
}

TEST(Http, ParsesAResponseHeadAndItsFraming) {
  ResponseHead r = parse_response_head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.reason, "OK");
  EXPECT_EQ(response_framing(r, "POST").kind, BodyKind::kChunked);
  EXPECT_EQ(response_framing(r, "HEAD").kind, BodyKind::kNone);
  r = parse_response_head("HTTP/1.1 204 No Content\r\n\r\n");
  EXPECT_EQ(response_framing(r, "GET").kind, BodyKind::kNone);
  r = parse_response_head("HTTP/1.0 200 OK\r\n\r\n");
  EXPECT_EQ(response_framing(r, "GET").kind, BodyKind::kUntilClose);
  r = parse_response_head("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(response_framing(r, "GET").kind, BodyKind::kNone);
  EXPECT_THROW(parse_response_head("HTTP/1.1 2x0 OK\r\n\r\n"), HttpError);
  EXPECT_THROW(parse_response_head(std::string("HTTP/1.1 200 OK\rX-Injected: 1\r\n\r\n")), HttpError);
  EXPECT_THROW(parse_response_head(std::string("HTTP/1.1 200 O\0K\r\n\r\n", 21)), HttpError);
}

TEST(Http, DecodesChunkedBodiesInAnyPieces) {
  const std::string wire = "4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  for (size_t piece = 1; piece <= wire.size(); ++piece) {
    ChunkedDecoder d;
    std::string out;
    size_t used = 0;
    for (size_t i = 0; i < wire.size() && !d.done(); i += piece) {
      size_t n = std::min(piece, wire.size() - i);
      used += d.feed(wire.data() + i, n, &out);
    }
    ASSERT_TRUE(d.done()) << "piece " << piece;
    EXPECT_EQ(out, "Wikipedia in\r\n\r\nchunks.");
    EXPECT_EQ(wire.substr(used), "NEXT") << "piece " << piece;
  }
}

TEST(Http, RejectsBadChunks) {
  for (const char* bad : {"x\r\n", "4\r\nWikiX", "FFFFFFFFFFFFFFFFF\r\n", "4\rX"}) {
    ChunkedDecoder d;
    EXPECT_THROW(d.feed(bad, std::strlen(bad), nullptr), HttpError) << bad;
  }
}

TEST(Http, BuildsJsonErrors) {
  EXPECT_EQ(json_error_body(503, "Loading model", "unavailable_error"),
            "{\"error\":{\"code\":503,\"message\":\"Loading model\",\"type\":\"unavailable_error\"}}");
  std::string r = json_response(401, "{}", true);
  EXPECT_EQ(r, "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json; charset=utf-8\r\n"
               "Content-Length: 2\r\nConnection: close\r\n\r\n{}");
}

}  // namespace onebit
