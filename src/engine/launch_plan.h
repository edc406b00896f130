// The launch plan: from serve's options, the model's facts and the recipes to the exact engine
// command line and environment. Pure (no processes, no files), so dry-run and a real launch
// print and run the very same thing.
//
// Order of the command line: the base (-m M --host 127.0.0.1 --port P [--rpc W] -ngl 99|0 --jinja),
// serve's own options (-c, -fa, -np), the drafter's flags, the arguments given after "--", then
// recipes. With RPC workers every layer is offloaded: to the local GPU and the workers by their
// free memory, or with --device cpu to the workers alone.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/device.h"
#include "engine/engine_args.h"
#include "model/gguf_facts.h"
#include "recipes/recipes.h"
#include "serve/serve_options.h"

namespace onebit {

struct LaunchInputs {
  const ServeOptions* options = nullptr;
  std::string model_path;                 // the target model (serve's -m, or --long-model's)
  const ModelFacts* model = nullptr;
  const ModelFacts* drafter = nullptr;    // the drafter's file (--draft, --dflash, --eagle3, --mtp FILE)
  std::string program;                    // the llama-server binary
  DeviceChoice where;                     // cpu, cuda or vulkan (already resolved); the GPU model for recipes
  std::vector<std::string> rpc_devices;   // the engine's names of the --rpc workers' devices ("RPC0", ...)
  int port = 0;                           // the engine's loopback port
  const RecipeSet* recipes = nullptr;     // nullptr: --no-recipes
  RecipeMachine machine = RecipeMachine::here();  // the CPU and engine build recipes are matched against
  std::map<std::string, std::string> environment;  // this process's environment
};

struct LaunchPlan {
  std::string program;
  std::vector<std::string> args;                               // after the program name
  std::vector<std::pair<std::string, std::string>> env_added;  // set for the child only
  std::vector<std::string> env_removed;                        // unset for the child only
  std::vector<AppliedRecipe> applied;

  // "[env -u X ...] K=V ... program args...", shell-quoted on one line.
  std::string command_line() const;
  // "<who>: recipe <id>: <added>" for each recipe that added something.
  std::vector<std::string> recipe_lines(const std::string& who = "1bit serve") const;
};

// Throws Error for a Hadamard-rotated model or drafter on an engine other than 1bit's own (which
// alone rotates the activations to match), and
// when the arguments after "--" collide with what serve owns (-m, --host, --port,
// --api-key, --api-prefix, TLS, --rpc) or repeat a serve option. The engine variables for those
// options are removed from the child's environment.
LaunchPlan plan_launch(const LaunchInputs& in, const EngineArgs& engine);

// This process's environment as a map.
std::map<std::string, std::string> current_environment();

}  // namespace onebit
