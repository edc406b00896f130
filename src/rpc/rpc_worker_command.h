// `1bit rpc-worker`: the engine's RPC server (ggml-rpc-server) as a supervised child, offering this
// machine's CPU or GPUs to an engine elsewhere (`1bit serve --rpc HOST:PORT`).
#pragma once

#include <string>
#include <vector>

namespace onebit {

int run_rpc_worker(const std::vector<std::string>& args);

}  // namespace onebit
