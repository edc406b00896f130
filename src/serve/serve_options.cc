#include "serve/serve_options.h"

#include <cstdlib>

#include "base/cli.h"
#include "base/error.h"
#include "engine/engine_args.h"

namespace onebit {

std::vector<CliOption> serve_option_table(ServeOptions& o) {
  auto text = [](std::string& field) { return [&field](const std::string& v) { field = v; }; };
  return {
      {{"-m", "--model"}, "FILE", "the GGUF model to serve (default: the shipped 1bit-small model, else 1bit-tiny)", text(o.model)},
      {{"-a", "--alias"}, "NAME", "the model's name for clients: /v1/models, replies, Ollama's listings\n"
                                  "(default: the file's path, and for Ollama the file's name)",
       text(o.alias)},
      {{"--host"}, "HOST", "address to listen on (default: 127.0.0.1)", text(o.host)},
      {{"--port"}, "PORT", "port to listen on (default: 8080; 0 picks a free one)",
       [&o](const std::string& v) { o.port = static_cast<int>(parse_int_option("--port", v, 0, 65535)); }},
      {{"--device"}, "DEV", "auto, cpu, cuda or vulkan (default: auto = cuda when the engine lists a CUDA\ndevice, else vulkan when it lists a Vulkan GPU, else cpu)",
       [&o](const std::string& v) {
         if (v != "auto" && v != "cpu" && v != "cuda" && v != "vulkan")
           throw Error("--device: \"" + v + "\" is not one of auto, cpu, cuda, vulkan");
         o.device = v;
       }},
      {{"--rpc"}, "HOST:PORT,...", "also place layers on these RPC workers (1bit rpc-worker there), by\n"
                                   "their free memory beside the local GPU's; on --device cpu only on them",
       [&o](const std::string& v) { o.rpc = parse_rpc_endpoints(v); }},
      {{"-c", "--ctx-size"}, "N", "context size in tokens (default: the engine's)",
       [&o](const std::string& v) { o.ctx_size = parse_int_option("--ctx-size", v, 0, 1ll << 32); }},
      {{"-fa", "--flash-attn"}, "", "flash attention; alone it means on",
       [&o](const std::string& v) { o.flash_attn = v.empty() ? "on" : v; }, {"on", "off", "auto"}},
      {{"-np", "--parallel"}, "N", "number of parallel slots",
       [&o](const std::string& v) { o.parallel = parse_int_option("--parallel", v, 1, 4096); }},
      {{"--draft"}, "FILE", "speculative decoding with a small draft model of the same vocabulary", text(o.draft)},
      {{"--dflash"}, "FILE", "speculative decoding with a dflash drafter (a block of tokens per step)", text(o.dflash)},
      {{"--eagle3"}, "FILE", "speculative decoding with an eagle3 drafter", text(o.eagle3)},
      {{"--mtp"}, "", "speculative decoding with the model's own next-token (MTP) layer, or with\n"
                      "the one in HEAD.gguf (published apart from its model; or --mtp=FILE)",
       [&o](const std::string& v) {
         o.mtp = true;
         o.mtp_head = v;
       },
       {}, [](const std::string& next) { return next.size() > 5 && next.compare(next.size() - 5, 5, ".gguf") == 0 && next[0] != '-'; },
       "HEAD.gguf"},
      {{"--draft-max"}, "N", "most tokens drafted per step (default: a recipe's, else dflash: block size - 1, others: the engine's 3)",
       [&o](const std::string& v) { o.draft_max = parse_int_option("--draft-max", v, 1, 1024); }},
      {{"--draft-p-min"}, "P", "least probability for a drafted token to be kept, 0..1",
       [&o](const std::string& v) {
         parse_double_option("--draft-p-min", v, 0.0, 1.0);
         o.draft_p_min = v;
       }},
      {{"--batch-invariant"}, "", "decode every token with the bits it has alone, whatever its batch (greedy\n"
                                  "answers with a drafter are then exactly those without one; on CUDA other\n"
                                  "kernels, at a cost in decode speed; the CPU engine always is)",
       [&o](const std::string&) { o.batch_invariant = true; }},
      {{"--recipes"}, "FILE", "use the recipes in FILE instead of the built-in ones (the user\n"
                              "store's still come first: 1bit recipes --help)",
       text(o.recipes_file)},
      {{"--no-recipes"}, "", "apply no recipes, not even the user store's",
       [&o](const std::string&) { o.no_recipes = true; }},
      {{"--dry-run"}, "", "print the engine command (after the recipe lines) and exit",
       [&o](const std::string&) { o.dry_run = true; }},
      {{"--llama-server"}, "PATH", "the engine binary (default: $ONEBIT_LLAMA_SERVER, else the one\nbuilt beside 1bit)",
       text(o.llama_server)},
      {{"--load-timeout"}, "S", "seconds to wait for the model to load (default: 600)",
       [&o](const std::string& v) { o.load_timeout_s = parse_double_option("--load-timeout", v, 0.001, 1e6); }},
      {{"--api-key"}, "KEY", "require \"Authorization: Bearer KEY\" (default: $ONEBIT_API_KEY)", text(o.api_key)},
      {{"--allow-origin"}, "ORIGIN", "on loopback, let browser pages from ORIGIN (http://localhost:3000) call\n"
                                     "the API too; repeatable (default: only the server's own pages)",
       [&o](const std::string& v) { o.allowed_origins.push_back(v); }},
      {{"--long-model"}, "FILE", "a second model for long conversations (see --long-from)", text(o.long_model)},
      {{"--long-from"}, "N", "conversations whose first request has at least N tokens go to\n--long-model (default: 2048)",
       [&o](const std::string& v) { o.long_from = parse_int_option("--long-from", v, 1, 1ll << 32); }},
      {{"--engine-log"}, "FILE", "append the engine's output to FILE", text(o.engine_log)},
      {{"--max-body-mb"}, "N", "largest request body accepted, in MiB (default: 64; larger: 413)",
       [&o](const std::string& v) { o.max_body_mb = parse_int_option("--max-body-mb", v, 1, 1 << 20); }},
      {{"-v", "--verbose"}, "", "copy the engine's output to stderr", [&o](const std::string&) { o.verbose = true; }},
  };
}

std::string ServeOptions::drafter_kind() const {
  if (!draft.empty()) return "draft";
  if (!dflash.empty()) return "dflash";
  if (!eagle3.empty()) return "eagle3";
  if (mtp) return "mtp";
  return "none";
}

const std::string& ServeOptions::drafter_file() const {
  if (!draft.empty()) return draft;
  if (!dflash.empty()) return dflash;
  if (!eagle3.empty()) return eagle3;
  return mtp_head;
}

ServeOptions parse_serve_options(const std::vector<std::string>& args) {
  ServeOptions o;
  if (const char* v = std::getenv("ONEBIT_LLAMA_SERVER"); v && *v) o.llama_server = v;
  if (const char* v = std::getenv("ONEBIT_API_KEY"); v && *v) o.api_key = v;
  bool long_from_set = false;
  std::vector<CliOption> table = serve_option_table(o);
  for (auto& opt : table)
    if (opt.names.back() == "--long-from") {
      auto inner = opt.set;
      opt.set = [inner, &long_from_set](const std::string& v) {
        inner(v);
        long_from_set = true;
      };
    }
  // Any llama-server option works on serve's command line as it would on the engine's: one serve
  // does not have goes to the engine as if given after "--".
  const EngineArgs& engine = EngineArgs::builtin();
  CliParse p = parse_cli(table, args, [&engine](const std::string& name) { return engine.values_of(name); });
  o.help = p.help;
  if (!p.positional.empty()) throw Error("unexpected argument \"" + p.positional.front() + "\" (the model goes after -m)");
  o.engine_args = p.foreign;
  o.engine_args.insert(o.engine_args.end(), p.after_dashes.begin(), p.after_dashes.end());
  int drafters = !o.draft.empty() + !o.dflash.empty() + !o.eagle3.empty() + o.mtp;
  if (drafters > 1) throw Error("--draft, --dflash, --eagle3 and --mtp exclude each other: choose one drafter");
  if (drafters == 0 && (o.draft_max || !o.draft_p_min.empty()))
    throw Error("--draft-max and --draft-p-min need a drafter (--draft, --dflash, --eagle3 or --mtp)");
  if (long_from_set && o.long_model.empty()) throw Error("--long-from needs --long-model");
  return o;
}

std::string serve_usage() {
  ServeOptions o;
  return "usage: 1bit serve [options] [-- engine arguments...]\n\n"
         "Serves one GGUF model behind an OpenAI-compatible API: reads the model's facts, applies\n"
         "the matching recipes, starts llama-server as a private child on a free loopback port and\n"
         "proxies every request to it. Any other llama-server option works here as it would on\n"
         "llama-server's command line (-ub 1024, -ctk q8_0, --temp 0.7), and so do arguments after\n"
         "\"--\"; where serve has an option of the same name, serve's is meant.\n\n"
         "options:\n" +
         format_options(serve_option_table(o));
}

}  // namespace onebit
