#include "rpc/rpc_endpoints.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "http/net.h"

namespace onebit {
namespace {

std::string error_of(const std::string& list) {
  try {
    parse_rpc_endpoints(list);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RpcEndpoints, ParsesHostsPortsAndIpv6) {
  const auto w = parse_rpc_endpoints("127.0.0.1:50052,gpu-box:7000,[::1]:50053");
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].host, "127.0.0.1");
  EXPECT_EQ(w[0].port, 50052);
  EXPECT_EQ(w[1].host, "gpu-box");
  EXPECT_EQ(w[2].host, "::1");
  EXPECT_EQ(w[2].text(), "[::1]:50053");
  EXPECT_EQ(rpc_list(w), "127.0.0.1:50052,gpu-box:7000,[::1]:50053");
}

TEST(RpcEndpoints, RejectsMalformedEntriesByName) {
  EXPECT_EQ(error_of(""), "--rpc: an empty entry in \"\"; give HOST:PORT[,HOST:PORT...]");
  EXPECT_EQ(error_of("a:1,,b:2"), "--rpc: an empty entry in \"a:1,,b:2\"; give HOST:PORT[,HOST:PORT...]");
  EXPECT_EQ(error_of("localhost"), "--rpc: \"localhost\" is not HOST:PORT (an IPv6 address goes in brackets: [::1]:50052)");
  EXPECT_EQ(error_of("::1:50052"), "--rpc: \"::1:50052\" is not HOST:PORT (an IPv6 address goes in brackets: [::1]:50052)");
  EXPECT_EQ(error_of("[::1]50052"), "--rpc: \"[::1]50052\" is not [IPV6]:PORT");
  EXPECT_EQ(error_of(":50052"), "--rpc: \":50052\" has no host");
  EXPECT_NE(error_of("h:0").find("--rpc h:0"), std::string::npos);
  EXPECT_NE(error_of("h:70000").find("--rpc h:70000"), std::string::npos);
  EXPECT_NE(error_of("h:x").find("--rpc h:x"), std::string::npos);
  EXPECT_EQ(error_of("h:1,h:1"), "--rpc: h:1 is given twice (a worker serves one engine at a time)");
}

TEST(RpcEndpoints, ReachabilityNamesTheWorker) {
  Fd listener = listen_tcp("127.0.0.1", 0);
  const RpcEndpoint up{"127.0.0.1", bound_port(listener.get())};
  EXPECT_EQ(rpc_unreachable(up), "");
  const int closed_port = pick_free_port("127.0.0.1");
  const RpcEndpoint down{"127.0.0.1", closed_port};
  EXPECT_NE(rpc_unreachable(down), "");
  try {
    check_rpc_workers({up, down});
    FAIL() << "no error for a closed port";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "cannot connect to rpc worker 127.0.0.1:" + std::to_string(closed_port) +
                                         " (Connection refused); start one there with 1bit rpc-worker --port " +
                                         std::to_string(closed_port));
  }
}

}  // namespace
}  // namespace onebit
