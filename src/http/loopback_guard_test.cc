#include "http/loopback_guard.h"

#include <gtest/gtest.h>

namespace onebit {
namespace {

RequestHead head(Headers headers) {
  RequestHead h;
  h.method = "POST";
  h.target = "/v1/chat/completions";
  h.headers = std::move(headers);
  return h;
}

}  // namespace

TEST(LoopbackGuard, LoopbackNames) {
  for (const char* h : {"localhost", "localhost:8080", "LOCALHOST:1", "127.0.0.1", "127.0.0.1:8080", "127.8.9.10:1",
                        "[::1]", "[::1]:8080", "app.localhost:3000"})
    EXPECT_TRUE(is_loopback_host(h)) << h;
  for (const char* h : {"evil.example", "evil.example:8080", "127.0.0.1.evil.example", "128.0.0.1", "0.0.0.0:8080",
                        "[::2]:8080", "localhost.example", "", "127.0.0.256", "1270.0.0.1"})
    EXPECT_FALSE(is_loopback_host(h)) << h;
  EXPECT_TRUE(is_loopback_address("::1"));
  EXPECT_TRUE(is_loopback_address("127.0.0.1"));
  EXPECT_FALSE(is_loopback_address("0.0.0.0"));
}

TEST(LoopbackGuard, HostAndOrigin) {
  // Programs: a loopback Host, no Origin (HTTP/1.0 without a Host too).
  EXPECT_EQ(loopback_refusal(head({{"Host", "127.0.0.1:8080"}}), {}), "");
  EXPECT_EQ(loopback_refusal(head({}), {}), "");
  // A name that resolves here by DNS rebinding.
  EXPECT_EQ(loopback_refusal(head({{"Host", "rebind.example:8080"}}), {}),
            "Host \"rebind.example:8080\" is not a loopback name: this server answers only programs on this machine");
  EXPECT_EQ(loopback_refusal(head({{"Host", "127.0.0.1:8080"}, {"host", "evil.example"}}), {}), "more than one Host header");
  // The server's own pages, under either loopback name, pass; other sites, other local ports and
  // file pages ("null") do not, unless allowed.
  EXPECT_EQ(loopback_refusal(head({{"Host", "127.0.0.1:8080"}, {"Origin", "http://127.0.0.1:8080"}}), {}), "");
  EXPECT_EQ(loopback_refusal(head({{"Host", "127.0.0.1:8080"}, {"Origin", "http://localhost:8080"}}), {}), "");
  EXPECT_EQ(loopback_refusal(head({{"Host", "127.0.0.1:8080"}, {"Origin", "https://evil.example"}}), {}),
            "Origin \"https://evil.example\" is not this server's own (allow it with --allow-origin https://evil.example)");
  EXPECT_NE(loopback_refusal(head({{"Host", "127.0.0.1:8080"}, {"Origin", "http://localhost:3000"}}), {}), "");
  EXPECT_NE(loopback_refusal(head({{"Host", "127.0.0.1:8080"}, {"Origin", "null"}}), {}), "");
  EXPECT_EQ(loopback_refusal(head({{"Host", "127.0.0.1:8080"}, {"Origin", "http://localhost:3000"}}), {"http://localhost:3000"}), "");
}

}  // namespace onebit
