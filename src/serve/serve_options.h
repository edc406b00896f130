// The options of `1bit serve`, parsed and checked on their own (no files opened yet).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/cli.h"
#include "rpc/rpc_endpoints.h"

namespace onebit {

struct ServeOptions {
  std::string model;  // -m; empty: the default model
  std::string alias;  // --alias: the model's name for clients
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string device = "auto";  // auto, cpu, cuda, vulkan
  std::vector<RpcEndpoint> rpc;  // --rpc: workers the engine places layers on too
  std::optional<int64_t> ctx_size;
  std::string flash_attn;  // "", on, off, auto
  std::optional<int64_t> parallel;
  std::string draft;     // a small model of the same vocabulary
  std::string dflash;    // a dflash drafter
  std::string eagle3;    // an eagle3 drafter
  bool mtp = false;      // the model's own next-token layer, or mtp_head's
  std::string mtp_head;  // --mtp FILE: a next-token layer published apart from its model
  std::optional<int64_t> draft_max;
  std::string draft_p_min;  // kept as typed, checked to be in [0, 1]
  bool batch_invariant = false;  // --batch-invariant: each token's bits independent of its batch
  std::string recipes_file;
  bool no_recipes = false;
  bool dry_run = false;
  std::string llama_server;  // --llama-server or ONEBIT_LLAMA_SERVER
  double load_timeout_s = 600;
  std::string api_key;  // --api-key or ONEBIT_API_KEY
  std::vector<std::string> allowed_origins;  // --allow-origin, repeatable
  std::string long_model;
  int64_t long_from = 2048;
  std::string engine_log;
  int64_t max_body_mb = 64;
  bool verbose = false;
  std::vector<std::string> engine_args;  // llama-server options given directly, then those after "--"
  bool help = false;

  // "none", "draft", "dflash", "eagle3" or "mtp".
  std::string drafter_kind() const;
  // The drafter's own file; "" for none and for the model's own MTP layer.
  const std::string& drafter_file() const;
};

// Parses serve's arguments (after "serve"); environment fallbacks come from getenv. Throws Error
// for unknown options, bad values and conflicting drafter options.
ServeOptions parse_serve_options(const std::vector<std::string>& args);

std::string serve_usage();

// Serve's option table, writing into `o` (tune takes a launch's serve options through it).
std::vector<CliOption> serve_option_table(ServeOptions& o);

}  // namespace onebit
