// Recipes: tuned engine settings kept as data, each with the measurement that justifies it.
//
// A recipes file is JSON: {"about": "...", "recipes": [ {id, match, args, env, why, measured,
// source} ]}. `id` and `measured` are required; `match` keys (all optional, missing = any) are
// device, gpu, architecture, drafter, cpu, engine, file_type (lists of strings), moe,
// hadamard_q4_0, rpc (booleans), size_bytes and gpus ([min, max], inclusive). rpc says whether
// the launch has RPC workers (serve --rpc); gpus counts the local GPUs of the launch's device. gpu names GPU models exactly
// as the engine lists them ("NVIDIA H200"; it implies cuda): a setting measured on one GPU is not
// assumed to win on another. cpu, engine, file_type and size_bytes bind a recipe to the machine
// and model it was measured on (`1bit tune` writes them): the CPU's model name as
// /proc/cpuinfo gives it, the engine build's key (engine.json's 16-hex "key"), the model's file
// type name ("Q8_0") and its file size in bytes. A recipe must add something: args (starting
// with a flag) or env. The built-in set is config/recipes.json, compiled in; where recipes come
// from and in which order (the user's store, then the built-in set) is recipes/recipe_store.h.
//
// Application happens in file order after serve's own arguments. A flag is added only when the
// engine command line has no spelling of that option yet (aliases included, and its LLAMA_ARG_*
// variable counts as a spelling); an env variable only when it is not set.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/device.h"
#include "engine/engine_args.h"
#include "model/gguf_facts.h"

namespace onebit {

// The values of a match's device and drafter keys (the tune space's `when` takes the same).
const std::vector<std::string>& recipe_devices();  // cpu, cuda
const std::vector<std::string>& drafter_kinds();   // none, draft, dflash, eagle3, mtp

struct RecipeMatch {
  std::optional<std::vector<std::string>> device;
  std::optional<std::vector<std::string>> gpu;
  std::optional<std::vector<std::string>> architecture;
  std::optional<std::vector<std::string>> drafter;
  std::optional<std::vector<std::string>> cpu;        // CPU model names (/proc/cpuinfo "model name")
  std::optional<std::vector<std::string>> engine;     // engine build keys (engine.json "key")
  std::optional<std::vector<std::string>> file_type;  // file_type_name()s: "Q8_0", "Q4_0", ...
  std::optional<std::pair<uint64_t, uint64_t>> size_bytes;  // the model file's size, min..max inclusive
  std::optional<std::pair<uint64_t, uint64_t>> gpus;        // local GPUs of the device, min..max inclusive
  std::optional<bool> moe;
  std::optional<bool> hadamard_q4_0;
  std::optional<bool> rpc;
};

struct Recipe {
  std::string id;
  RecipeMatch match;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // in file order
  std::string why;
  std::string measured;
  std::string source;
  std::string entry;  // the whole entry as JSON, as parsed from its file
};

struct RecipeSet {
  std::string origin;  // the file path, or "built-in recipes"
  std::string about;
  std::vector<Recipe> recipes;
};

// Parses and validates. Throws Error("<origin>: <what is wrong>").
RecipeSet parse_recipes(std::string_view json_text, const std::string& origin, const EngineArgs& engine);
RecipeSet load_recipes_file(const std::string& path, const EngineArgs& engine);
const RecipeSet& builtin_recipes();

// The machine a recipe's cpu and engine keys are matched against.
struct RecipeMachine {
  std::string cpu;     // the CPU's model name ("" unknown: matches no cpu list)
  std::string engine;  // the engine build's key ("" unknown: matches no engine list)
  // This machine's CPU (bench/machine.h cpu_model()) and the engine build 1bit was built with
  // (engine/device.h engine_build_key()), read once.
  static const RecipeMachine& here();
};

// What a recipe is matched against.
struct RecipeTarget {
  std::string device;   // cpu, cuda
  std::string gpu;      // the engine's GPU ("NVIDIA H200"; "" unknown), counted only with cuda
  std::string drafter;  // none, draft, dflash, eagle3, mtp
  const ModelFacts* facts = nullptr;
  RecipeMachine machine;
  bool rpc = false;  // the launch has RPC workers
  int gpus = 0;      // local GPUs of the device (0 on cpu)
};

// Empty when the recipe matches, else the first reason it does not ("architecture llama not in
// [qwen3moe]"). With `ignore_device`, the device and gpu conditions are skipped (used by
// `1bit facts`, which judges a file for any device; the cpu and engine keys still count).
std::string recipe_mismatch(const Recipe& recipe, const RecipeTarget& target, bool ignore_device = false);

// Where a recipe can apply, in words: "any device", "device cpu, cuda", "device cuda (gpu NVIDIA
// H200)" (a GPU model implies cuda).
std::string recipe_devices(const Recipe& recipe);

// Every match condition in words, "; " between them ("device cuda (gpu NVIDIA H200); architecture
// qwen35; moe false"), or "anywhere" when there is none.
std::string recipe_conditions(const Recipe& recipe);

// What a recipe adds, as written: "-ub 1024 ONEBIT_X=1".
std::string recipe_adds(const Recipe& recipe);

// Recipes for a GPU model cannot apply on a CUDA device whose model the engine does not name: the
// line that says so, "<who>: the engine names no GPU model; ...", when `set` has such recipes
// and `where` is cuda with no GPU named; else "".
std::string unnamed_gpu_note(const std::string& who, const RecipeSet* set, const DeviceChoice& where);

// The environment as the child will see it: the parent's variables plus those serve adds.
struct ChildEnv {
  std::map<std::string, std::string> inherited;
  std::vector<std::pair<std::string, std::string>> added;  // in order of addition
  bool has(const std::string& name) const;
  void add(const std::string& name, const std::string& value) { added.emplace_back(name, value); }
};

struct AppliedRecipe {
  std::string id;
  std::vector<std::string> args;                           // what this recipe appended
  std::vector<std::pair<std::string, std::string>> env;    // what this recipe set
  std::string describe() const;                            // "-ub 1024 GGML_X=1"
};

// Applies every matching recipe of `set` in order to `argv` (the engine command line after the
// program name) and `env`, and returns those that added something.
std::vector<AppliedRecipe> apply_recipes(const RecipeSet& set, const RecipeTarget& target,
                                         const EngineArgs& engine, std::vector<std::string>& argv,
                                         ChildEnv& env);

}  // namespace onebit
