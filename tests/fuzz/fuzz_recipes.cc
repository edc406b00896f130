// libFuzzer target: a recipes file (JSON from --recipes, untrusted) through parse_recipes, and a
// set that parses through apply_recipes. Rejection must be an onebit::Error; anything else is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "engine/engine_args.h"
#include "recipes/recipes.h"

namespace {

using namespace onebit;

// Applies `set` and checks what apply_recipes reports against what it changed.
void apply_and_check(const RecipeSet& set, const RecipeTarget& target, const EngineArgs& engine) {
  const std::vector<std::string> start = {"-m", "model.gguf", "-ub", "512", "--ctx-size", "4096", "--jinja"};
  std::vector<std::string> argv = start;
  ChildEnv env;
  env.inherited = {{"LLAMA_ARG_BATCH", "1024"}, {"GGML_CUDA_GRAPH_OPT", "1"}};
  auto applied = apply_recipes(set, target, engine, argv, env);

  // argv grows only by the reported args, in order; env likewise.
  std::vector<std::string> expect_argv = start;
  std::vector<std::pair<std::string, std::string>> expect_env;
  for (const auto& a : applied) {
    if (a.args.empty() && a.env.empty()) __builtin_trap();
    expect_argv.insert(expect_argv.end(), a.args.begin(), a.args.end());
    expect_env.insert(expect_env.end(), a.env.begin(), a.env.end());
    (void)a.describe();
  }
  if (argv != expect_argv || env.added != expect_env) __builtin_trap();

  // A setting is added only when absent, so a second pass must add nothing.
  if (!apply_recipes(set, target, engine, argv, env).empty()) __builtin_trap();
  for (const auto& r : set.recipes) (void)recipe_mismatch(r, target, /*ignore_device=*/true);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const EngineArgs& engine = EngineArgs::builtin();
  RecipeSet set;
  try {
    set = parse_recipes(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz", engine);
  } catch (const Error&) {
    return 0;  // a rejected file is the expected outcome for most inputs
  }
  // Two fixed targets that between them satisfy either side of every match key (the machine
  // keys too: the seeds name "Test CPU", engine 0123456789abcdef, Q8_0 and sizes around 1000).
  static const ModelFacts dense = [] {
    ModelFacts f;
    f.architecture = "llama";
    f.file_type = 7;  // Q8_0
    f.file_size = 1000;
    return f;
  }();
  static const ModelFacts moe = [] {
    ModelFacts f;
    f.architecture = "qwen3moe";
    f.expert_count = 128;
    f.moe = true;
    f.hadamard_q4_0 = true;
    return f;
  }();
  apply_and_check(set, {"cpu", "", "none", &dense, {"Test CPU", "0123456789abcdef"}}, engine);
  apply_and_check(set, {"cuda", "NVIDIA H200", "mtp", &moe, {"", ""}}, engine);
  for (const auto& r : set.recipes) (void)recipe_conditions(r);
  return 0;
}
