// Where the recipes a command applies come from, and in which order.
//
// The layers, first first:
//   1. the user's store, $XDG_CONFIG_HOME/1bit/recipes.json (~/.config/1bit/recipes.json when
//      XDG_CONFIG_HOME is unset, empty or relative): the recipes remembered for this machine, in
//      the format of config/recipes.json. A missing file is a store with no recipes; one that
//      cannot be read or is malformed stops the command (Error "<file>: <problem>").
//   2. the built-in set (config/recipes.json, compiled in), or `--recipes FILE` in its place.
// The applied set is every layer's recipes in that order; an id names one recipe, so a recipe
// whose id an earlier layer already has is left out (the user's entry replaces the built-in one
// of the same id). `--no-recipes` turns every layer off, the store included (it is not read).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/engine_args.h"
#include "model/gguf_facts.h"
#include "recipes/recipes.h"

namespace onebit {

// The store's path for these values of XDG_CONFIG_HOME and HOME (nullptr: unset): XDG_CONFIG_HOME
// when it is an absolute path (an empty or relative one is ignored, as the XDG base directory
// spec says), else HOME/.config; "" when neither gives an absolute path (no store).
std::string recipe_store_path(const char* xdg_config_home, const char* home);
// The same from this process's environment.
std::string recipe_store_path();
// The same, or Error("no user recipe store: ...") when there is none.
std::string required_recipe_store_path();

// The store at `path`: nullopt when there is no such file (or `path` is ""). Throws
// Error("<path>: <problem>") when it cannot be read or is not a valid recipes file.
std::optional<RecipeSet> load_recipe_store(const std::string& path, const EngineArgs& engine);

// Takes the recipe `id` out of the store at `path` and rewrites it atomically; every other entry
// stays as it was, and removing the last one leaves a valid file with an empty list. Throws Error
// when the store is missing, malformed or has no such recipe.
void remove_from_recipe_store(const std::string& path, const std::string& id, const EngineArgs& engine);

// Writes `text` to a temporary file beside `path` and renames it over `path` (keeping the old
// file's permissions), so a reader sees the old file or the new one, never a part of either.
// Throws Error("<path>: cannot write: <why>").
void write_file_atomically(const std::string& path, const std::string& text);

struct RecipeLayer {
  std::string name;  // "user" (the store), "built-in", "file" (--recipes FILE)
  RecipeSet set;
  // "user store /home/u/.config/1bit/recipes.json", "built-in recipes", "recipes file r.json".
  std::string title() const;
};

// The recipes a command applies, from its --recipes FILE and --no-recipes and the user's store.
// Every file is read when this is constructed, so a bad one stops the command before anything
// starts.
class RecipeChoice {
 public:
  RecipeChoice(const std::string& file, bool none, const EngineArgs& engine,
               const std::string& store = recipe_store_path());

  // The applied set (every layer's recipes in order, each id once), or nullptr with --no-recipes;
  // valid while this object lives.
  const RecipeSet* set() const { return none_ ? nullptr : &applied_; }
  // The layers read, first first: the store (only when its file exists), then the built-in set or
  // FILE's; none with --no-recipes.
  const std::vector<RecipeLayer>& layers() const { return layers_; }
  // The layer whose recipe `id` is the one applied, or nullptr when no layer has it.
  const RecipeLayer* layer_of(const std::string& id) const;
  const std::string& store_path() const { return store_; }

 private:
  bool none_;
  std::string store_;
  std::vector<RecipeLayer> layers_;
  RecipeSet applied_;
};

// A recipe of a layer judged for a model file on this machine, as `1bit facts` and `1bit recipes
// list -m` show it: the device and GPU are named, not checked (the same file may be served on
// either), the drafter is none, and the CPU and engine build are `machine`'s.
struct RecipeVerdict {
  const RecipeLayer* layer;
  const Recipe* recipe;
  std::string mismatch;  // empty: applies; else why not (also when an earlier layer replaces it)
  // "applies on device cuda (gpu NVIDIA H200)", "does not apply: needs a MoE model".
  std::string text() const;
};
std::vector<RecipeVerdict> judge_recipes(const RecipeChoice& choice, const ModelFacts& facts,
                                         const RecipeMachine& machine = RecipeMachine::here());

}  // namespace onebit
