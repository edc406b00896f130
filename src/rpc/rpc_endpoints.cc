#include "rpc/rpc_endpoints.h"

#include <algorithm>

#include "base/cli.h"
#include "base/error.h"
#include "engine/device.h"
#include "http/net.h"

namespace onebit {

std::string RpcEndpoint::text() const {
  const std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

std::vector<RpcEndpoint> parse_rpc_endpoints(const std::string& list, const std::string& option) {
  std::vector<RpcEndpoint> workers;
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw Error(option + ": an empty entry in \"" + list + "\"; give HOST:PORT[,HOST:PORT...]");
    RpcEndpoint e;
    std::string port;
    if (item[0] == '[') {
      const size_t close = item.find(']');
      if (close == std::string::npos || close + 1 >= item.size() || item[close + 1] != ':')
        throw Error(option + ": \"" + item + "\" is not [IPV6]:PORT");
      e.host = item.substr(1, close - 1);
      port = item.substr(close + 2);
    } else {
      const size_t colon = item.rfind(':');
      if (colon == std::string::npos || item.find(':') != colon)
        throw Error(option + ": \"" + item + "\" is not HOST:PORT (an IPv6 address goes in brackets: [::1]:50052)");
      e.host = item.substr(0, colon);
      port = item.substr(colon + 1);
    }
    if (e.host.empty()) throw Error(option + ": \"" + item + "\" has no host");
    e.port = static_cast<int>(parse_int_option(option + " " + item, port, 1, 65535));
    if (std::find(workers.begin(), workers.end(), e) != workers.end())
      throw Error(option + ": " + e.text() + " is given twice (a worker serves one engine at a time)");
    workers.push_back(e);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return workers;
}

std::string rpc_list(const std::vector<RpcEndpoint>& workers) {
  std::string s;
  for (const auto& w : workers) s += (s.empty() ? "" : ",") + w.text();
  return s;
}

std::string rpc_unreachable(const RpcEndpoint& worker, int timeout_ms) {
  std::string error;
  Fd fd = connect_tcp(worker.host, worker.port, timeout_ms, &error);
  return fd.valid() ? "" : (error.empty() ? "no connection" : error);
}

void check_rpc_workers(const std::vector<RpcEndpoint>& workers) {
  for (const auto& w : workers)
    if (std::string why = rpc_unreachable(w); !why.empty()) {
      // connect_tcp names the address itself: keep only the cause.
      if (const size_t cause = why.rfind(": "); cause != std::string::npos) why = why.substr(cause + 2);
      throw Error("cannot connect to rpc worker " + w.text() + " (" + why + "); start one there with 1bit rpc-worker --port " +
                  std::to_string(w.port));
    }
}

std::vector<std::string> rpc_devices(const std::string& program, const std::vector<RpcEndpoint>& workers) {
  std::vector<std::string> rpc;
  for (const auto& d : list_engine_devices(program, {"--rpc", rpc_list(workers)}))
    if (d.rfind("RPC", 0) == 0) rpc.push_back(d);
  return rpc;
}

}  // namespace onebit
