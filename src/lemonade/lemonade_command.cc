#include "lemonade/lemonade_command.h"

#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>

#include "base/cli.h"
#include "base/error.h"
#include "base/paths.h"
#include "base/process_setup.h"
#include "http/loopback_guard.h"
#include "http/net.h"
#include "lemonade/catalog.h"
#include "lemonade/model_manager.h"
#include "lemonade/server.h"
#include "recipes/recipe_store.h"
#include "rpc/rpc_endpoints.h"

namespace onebit {
namespace {

struct LemonadeOptions {
  std::string host = "127.0.0.1";
  int port = 13305;
  std::vector<std::string> allowed_origins;
  std::string models_dir, extra_models_dir, api_key, llamacpp_args, rpc, llama_server, state_dir, recipes_file;
  bool no_recipes = false;
  int max_loaded = 1;
  std::optional<int64_t> ctx_size;
  double load_timeout_s = 600;
  int64_t max_body_mb = 64;
};

// Each option, its Lemonade environment variable (read first, so the flag wins) and its help.
std::vector<CliOption> table(LemonadeOptions& o) {
  auto text = [](std::string& f) { return [&f](const std::string& v) { f = v; }; };
  return {
      {{"--host"}, "HOST", "address to listen on (default: 127.0.0.1; $LEMONADE_HOST)", text(o.host)},
      {{"--port"}, "PORT", "port to listen on (default: 13305; $LEMONADE_PORT)",
       [&o](const std::string& v) { o.port = static_cast<int>(parse_int_option("--port", v, 0, 65535)); }},
      {{"--models-dir"}, "DIR", "where GGUF models are (default: the shipped models/; $LEMONADE_MODELS_DIR)",
       text(o.models_dir)},
      {{"--extra-models-dir"}, "DIR", "a second directory of GGUF models ($LEMONADE_EXTRA_MODELS_DIR)",
       text(o.extra_models_dir)},
      {{"--max-loaded-models"}, "N", "models of each type kept loaded, -1 for no limit (default: 1;\n"
                                     "$LEMONADE_MAX_LOADED_MODELS)",
       [&o](const std::string& v) {
         o.max_loaded = static_cast<int>(parse_int_option("--max-loaded-models", v, -1, 1000));
         if (o.max_loaded == 0) throw Error("--max-loaded-models: 0 would load nothing; use -1 for no limit");
       }},
      {{"--ctx-size"}, "N", "context size for every model unless a load says otherwise ($LEMONADE_CTX_SIZE)",
       [&o](const std::string& v) { o.ctx_size = parse_int_option("--ctx-size", v, 0, 1ll << 32); }},
      {{"--api-key"}, "KEY", "require \"Authorization: Bearer KEY\" on the API ($LEMONADE_API_KEY)", text(o.api_key)},
      {{"--allow-origin"}, "ORIGIN", "on loopback, let browser pages from ORIGIN call the API too;\nrepeatable (default: only the server's own pages)",
       [&o](const std::string& v) { o.allowed_origins.push_back(v); }},
      {{"--llamacpp-args"}, "ARGS", "engine arguments for every model unless a load says otherwise\n"
                                    "($LEMONADE_LLAMACPP_ARGS)",
       text(o.llamacpp_args)},
      {{"--rpc"}, "HOST:PORT,...", "RPC workers (1bit rpc-worker) for every model unless a load says\n"
                                   "otherwise (its \"rpc\" option; \"\" for none); a worker serves one model at a time",
       [&o](const std::string& v) {
         parse_rpc_endpoints(v);
         o.rpc = v;
       }},
      {{"--state-dir"}, "DIR", "pulled models, saved options and engine logs (default:\n"
                               "~/.cache/1bit/lemonade; $LEMONADE_CACHE_DIR)",
       text(o.state_dir)},
      {{"--recipes"}, "FILE", "use the recipes in FILE instead of the built-in ones (the user\n"
                              "store's still come first: 1bit recipes --help)",
       text(o.recipes_file)},
      {{"--no-recipes"}, "", "apply no recipes, not even the user store's",
       [&o](const std::string&) { o.no_recipes = true; }},
      {{"--llama-server"}, "PATH", "the engine binary (default: $ONEBIT_LLAMA_SERVER, else the one beside 1bit)",
       text(o.llama_server)},
      {{"--load-timeout"}, "S", "seconds a model may take to load (default: 600)",
       [&o](const std::string& v) { o.load_timeout_s = parse_double_option("--load-timeout", v, 1, 1e6); }},
      {{"--max-body-mb"}, "N", "largest request body accepted, in MiB (default: 64; larger: 413)",
       [&o](const std::string& v) { o.max_body_mb = parse_int_option("--max-body-mb", v, 1, 1 << 20); }},
  };
}

// Lemonade's environment variables, applied as if given first on the command line.
std::vector<std::string> from_environment() {
  static const std::pair<const char*, const char*> vars[] = {
      {"LEMONADE_HOST", "--host"}, {"LEMONADE_PORT", "--port"}, {"LEMONADE_MODELS_DIR", "--models-dir"},
      {"LEMONADE_EXTRA_MODELS_DIR", "--extra-models-dir"}, {"LEMONADE_MAX_LOADED_MODELS", "--max-loaded-models"},
      {"LEMONADE_CTX_SIZE", "--ctx-size"}, {"LEMONADE_API_KEY", "--api-key"},
      {"LEMONADE_LLAMACPP_ARGS", "--llamacpp-args"}, {"LEMONADE_CACHE_DIR", "--state-dir"},
      {"ONEBIT_LLAMA_SERVER", "--llama-server"}};
  std::vector<std::string> args;
  for (const auto& [env, flag] : vars)
    if (const char* v = std::getenv(env); v && *v) {
      args.push_back(flag);
      args.push_back(v);
    }
  return args;
}

}  // namespace

std::string lemonade_usage() {
  LemonadeOptions o;
  return "usage: 1bit lemonade [options]\n\n"
         "Serves every model of the models directories behind Lemonade's API (under /api/v0,\n"
         "/api/v1, /v0 and /v1), each loaded on demand as its own engine, launched the 1bit way\n"
         "(facts, recipes), with a web page at /. Options also come from Lemonade's environment\n"
         "variables; a flag wins over its variable.\n\noptions:\n" +
         format_options(table(o));
}

int run_lemonade(const std::vector<std::string>& args) {
  try {
    LemonadeOptions o;
    std::vector<std::string> all = from_environment();
    all.insert(all.end(), args.begin(), args.end());
    CliParse p = parse_cli(table(o), all);
    if (p.help) {
      std::cout << lemonade_usage();
      return 0;
    }
    if (!p.positional.empty()) throw Error("unexpected argument \"" + p.positional.front() + "\"");
    if (o.models_dir.empty()) o.models_dir = default_models_dir();
    if (o.models_dir.empty()) throw Error("no models directory: pass --models-dir DIR");
    if (o.state_dir.empty()) {
      const char* xdg = std::getenv("XDG_CACHE_HOME");
      const char* home = std::getenv("HOME");
      o.state_dir = std::string(xdg && *xdg ? xdg : std::string(home ? home : ".") + "/.cache") + "/1bit/lemonade";
    }
    if (o.llama_server.empty()) o.llama_server = default_llama_server();
    // Read before anything starts: a bad file is the user's error, not a model's load error.
    const RecipeChoice recipes(o.recipes_file, o.no_recipes, EngineArgs::builtin());
    std::vector<std::string> dirs = {o.models_dir};
    if (!o.extra_models_dir.empty()) dirs.push_back(o.extra_models_dir);

    const sigset_t signals = block_stop_signals();
    raise_fd_limit();

    Catalog catalog(dirs, o.state_dir);
    Fd listener = listen_tcp(o.host, o.port);
    std::filesystem::create_directories(o.state_dir + "/logs");
    ManagerConfig mc;
    mc.max_loaded = o.max_loaded;
    mc.ctx_size = o.ctx_size;
    mc.llamacpp_args = o.llamacpp_args;
    mc.rpc = o.rpc;
    mc.llama_server = o.llama_server;
    mc.log_dir = o.state_dir + "/logs";
    mc.load_timeout_s = o.load_timeout_s;
    mc.recipes = recipes.set();
    ModelManager models(catalog, mc);
    LemonadeServer server(catalog, models, o.api_key, static_cast<uint64_t>(o.max_body_mb) << 20,
                          is_loopback_address(o.host) ? &o.allowed_origins : nullptr);
    server.adopt(std::move(listener));
    server.start();
    print_line("1bit lemonade: listening on http://" + o.host + ":" + std::to_string(server.port()) + " (models in " +
               o.models_dir + (o.extra_models_dir.empty() ? "" : " and " + o.extra_models_dir) + ")");
    int sig;
    sigwait(&signals, &sig);
    std::cerr << "1bit lemonade: stopping\n";
    server.stop();  // clients first: their streams end and release their models
    return 0;       // then ~ModelManager stops every engine
  } catch (const Error& e) {
    std::cerr << "1bit lemonade: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace onebit
