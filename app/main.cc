// The `1bit` dispatcher: one binary, subcommands as a table.
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/embedded.h"
#include "bench/bench_command.h"
#include "lemonade/lemonade_command.h"
#include "model/facts_command.h"
#include "model/rotate_command.h"
#include "model/synth_command.h"
#include "recipes/recipes_command.h"
#include "recipes/tune_command.h"
#include "rpc/rpc_worker_command.h"
#include "serve/serve.h"

namespace {

int run_version(const std::vector<std::string>&);
int run_help(const std::vector<std::string>&);

struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>& args);
  const char* summary;
};

const Command kCommands[] = {
    {"serve", onebit::run_serve, "serve one model behind an OpenAI-compatible API"},
    {"facts", onebit::run_facts, "print a GGUF's facts and which recipes would apply"},
    {"synth", onebit::run_synth, "write a random-weight model of a known shape"},
    {"rotate", onebit::run_rotate, "write a Hadamard-rotated Q4_0 file (H32) from an F32/F16/BF16/Q8_0 one"},
    {"bench", onebit::run_bench_command, "measure serve configurations A/B in one run"},
    {"tune", onebit::run_tune_command, "search the fastest settings for a model here; winners become recipes"},
    {"recipes", onebit::run_recipes, "list the recipes of every layer, show one, remove one from the user store"},
    {"lemonade", onebit::run_lemonade, "serve many models behind Lemonade's API, loaded on demand"},
    {"rpc-worker", onebit::run_rpc_worker, "offer this machine's CPU or GPUs to an engine elsewhere (serve --rpc)"},
    {"version", run_version, "print 1bit's version and the engine it runs"},
    {"help", run_help, "print this help, or a command's help (1bit help serve)"},
};

int run_version(const std::vector<std::string>&) {
  auto engine = nlohmann::json::parse(onebit::embedded::kEngineManifest, nullptr, false);
  std::cout << "1bit " << ONEBIT_VERSION << "\n";
  if (engine.is_object()) {
    std::cout << "engine llama.cpp " << engine.value("commit", "?") << (engine.value("cuda", false) ? " (CUDA)" : " (CPU)")
              << (engine.value("web_ui", false) ? ", web UI" : ", no web UI") << ", patches: " << engine["patches"].size()
              << "\n";
  }
  return 0;
}

int run_help(const std::vector<std::string>& args) {
  if (!args.empty()) {
    for (const Command& c : kCommands)
      if (args[0] == c.name && std::strcmp(c.name, "help") != 0) return c.run({"--help"});
    std::cerr << "1bit: unknown command \"" << args[0] << "\"\n";
    return 1;
  }
  std::cout << "usage: 1bit <command> [options]\n\n"
               "1bit serves GGUF models through a pinned llama.cpp with settings tuned for this\n"
               "machine, each backed by a measurement (recipes).\n\ncommands:\n";
  for (const Command& c : kCommands) std::cout << "  " << c.name << std::string(12 - std::strlen(c.name), ' ') << c.summary << "\n";
  std::cout << "\n1bit help COMMAND (or 1bit COMMAND --help) lists a command's options.\n"
               "\nenvironment:\n"
               "  ONEBIT_LLAMA_SERVER       the engine binary serve starts (like --llama-server)\n"
               "  ONEBIT_API_KEY            the key serve requires (like --api-key)\n"
               "  ONEBIT_MODELS_DIR         where serve looks first for the default model\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help") return run_help({});
  if (args[0] == "--version") return run_version({});
  for (const Command& c : kCommands)
    if (args[0] == c.name) return c.run(std::vector<std::string>(args.begin() + 1, args.end()));
  std::cerr << "1bit: unknown command \"" << args[0] << "\" (see 1bit --help)\n";
  return 1;
}
