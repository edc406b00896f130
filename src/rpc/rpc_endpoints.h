// RPC workers as serve and lemonade name them: the addresses of the engine's own RPC servers
// (ggml-rpc, started by `1bit rpc-worker`), which llama-server's --rpc takes to place layers on
// them. The protocol has no authentication and the engine aborts when a worker it was given
// cannot be reached, so 1bit checks each one itself first and names the one that fails.
#pragma once

#include <string>
#include <vector>

namespace onebit {

struct RpcEndpoint {
  std::string host;  // a name, an IPv4 address or an IPv6 one (without brackets)
  int port = 0;

  // "host:port", with brackets around an IPv6 address: what the engine's --rpc takes.
  std::string text() const;
  bool operator==(const RpcEndpoint& o) const { return host == o.host && port == o.port; }
};

// Parses "HOST:PORT[,HOST:PORT...]" ("[::1]:50052" for IPv6). Throws Error("<option>: ...")
// naming the entry that is malformed, empty, or given twice.
std::vector<RpcEndpoint> parse_rpc_endpoints(const std::string& list, const std::string& option = "--rpc");

// The list back in --rpc's form: "a:1,b:2".
std::string rpc_list(const std::vector<RpcEndpoint>& workers);

// "" when the worker accepts a TCP connection within `timeout_ms`, else why not ("connection
// refused").
std::string rpc_unreachable(const RpcEndpoint& worker, int timeout_ms = 3000);

// Throws Error("rpc worker HOST:PORT cannot be reached (...); start it with 1bit rpc-worker ...")
// for the first worker that cannot be reached.
void check_rpc_workers(const std::vector<RpcEndpoint>& workers);

// The devices the engine at `program` sees through `workers` ("RPC0: 127.0.0.1:50052 (24105 MiB,
// 24105 MiB free)", one or more per worker, in the workers' order). Throws Error when the engine
// cannot list them.
std::vector<std::string> rpc_devices(const std::string& program, const std::vector<RpcEndpoint>& workers);

}  // namespace onebit
