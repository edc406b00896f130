#include "recipes/recipes_command.h"

#include <algorithm>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "base/cli.h"
#include "base/error.h"
#include "engine/engine_args.h"
#include "model/gguf_facts.h"
#include "recipes/recipe_store.h"

namespace onebit {
namespace {

struct RecipesOptions {
  std::string model, recipes_file;
};

CliOption recipes_file_option(RecipesOptions& o) {
  return {{"--recipes"}, "FILE", "FILE's recipes in place of the built-in ones, as serve --recipes",
          [&o](const std::string& v) { o.recipes_file = v; }};
}

struct Subcommand {
  const char* name;
  const char* words;    // what follows the name in the synopsis
  const char* summary;
  size_t ids;           // how many recipe ids it takes (0 or 1)
  std::vector<CliOption> (*table)(RecipesOptions&);
  int (*run)(const RecipesOptions&, const std::string& id);
};

bool has_id(const RecipeSet& set, const std::string& id) {
  return std::any_of(set.recipes.begin(), set.recipes.end(), [&](const Recipe& r) { return r.id == id; });
}

const Recipe& recipe_in(const RecipeLayer& layer, const std::string& id) {
  return *std::find_if(layer.set.recipes.begin(), layer.set.recipes.end(), [&](const Recipe& r) { return r.id == id; });
}

int list(const RecipesOptions& o, const std::string&) {
  const RecipeChoice choice(o.recipes_file, /*none=*/false, EngineArgs::builtin());
  std::optional<ModelFacts> facts;
  std::vector<RecipeVerdict> verdicts;
  if (!o.model.empty()) {
    facts = read_model_facts(o.model);
    verdicts = judge_recipes(choice, *facts);
    std::cout << "model " << o.model << ": judged on this machine without a drafter\n"
              << "(the device and GPU a recipe needs are named, not checked)\n\n";
  }
  if (choice.layers().front().name != "user") {
    const std::string& path = choice.store_path();
    std::cout << (path.empty() ? "user store: none (neither XDG_CONFIG_HOME nor HOME is an absolute path)"
                               : "user store " + path + ": none (no such file)")
              << "\n";
  }
  for (const RecipeLayer& layer : choice.layers()) {
    const size_t n = layer.set.recipes.size();
    std::cout << layer.title() << ": " << (n == 0 ? "none" : std::to_string(n) + (n == 1 ? " recipe" : " recipes")) << "\n";
    for (const Recipe& r : layer.set.recipes) {
      std::cout << "  " << r.id << "\n"
                << "    adds   " << recipe_adds(r) << "\n"
                << "    where  " << recipe_conditions(r) << "\n";
      for (const RecipeVerdict& v : verdicts)
        if (v.recipe == &r) std::cout << "    model  " << v.text() << "\n";
      if (const RecipeLayer* owner = choice.layer_of(r.id); facts == std::nullopt && owner != &layer)
        std::cout << "    note   replaced by the recipe of the same id in the " << owner->title() << "\n";
    }
  }
  return 0;
}

int show(const RecipesOptions& o, const std::string& id) {
  const RecipeChoice choice(o.recipes_file, /*none=*/false, EngineArgs::builtin());
  const RecipeLayer* layer = choice.layer_of(id);
  if (layer == nullptr) throw Error("no recipe \"" + id + "\" (1bit recipes list shows them all)");
  nlohmann::ordered_json out = {{"id", id},
                                {"layer", layer->name},
                                {"file", layer->set.origin},
                                {"recipe", nlohmann::json::parse(recipe_in(*layer, id).entry)}};
  for (const RecipeLayer& other : choice.layers())
    if (&other != layer && has_id(other.set, id)) out["replaces"].push_back({{"layer", other.name}, {"file", other.set.origin}});
  std::cout << out.dump(2) << "\n";
  return 0;
}

int remove(const RecipesOptions&, const std::string& id) {
  const std::string path = required_recipe_store_path();
  const EngineArgs& engine = EngineArgs::builtin();
  const std::optional<RecipeSet> store = load_recipe_store(path, engine);
  const bool builtin = has_id(builtin_recipes(), id);
  if ((!store || !has_id(*store, id)) && builtin)
    throw Error("\"" + id + "\" is a built-in recipe: only the user store's recipes can be removed (" + path +
                "); --no-recipes turns every recipe off");
  remove_from_recipe_store(path, id, engine);
  std::cout << "removed recipe " << id << " from " << path
            << (builtin ? "; the built-in recipe of the same id applies again" : "") << "\n";
  return 0;
}

int path(const RecipesOptions&, const std::string&) {
  std::cout << required_recipe_store_path() << "\n";
  return 0;
}

const Subcommand kSubcommands[] = {
    {"list", "[-m MODEL] [--recipes FILE]", "every recipe of every layer: what it adds and where it applies", 0,
     [](RecipesOptions& o) {
       return std::vector<CliOption>{
           {{"-m", "--model"}, "MODEL", "also judge each recipe for MODEL on this machine, as 1bit facts does",
            [&o](const std::string& v) { o.model = v; }},
           recipes_file_option(o)};
     },
     list},
    {"show", "ID [--recipes FILE]", "the recipe's whole entry as JSON, with its layer and file", 1,
     [](RecipesOptions& o) { return std::vector<CliOption>{recipes_file_option(o)}; }, show},
    {"remove", "ID", "take a recipe out of the user store (rewritten atomically)", 1,
     [](RecipesOptions&) { return std::vector<CliOption>{}; }, remove},
    {"path", "", "print the user store's path", 0, [](RecipesOptions&) { return std::vector<CliOption>{}; }, path},
};

}  // namespace

std::string recipes_usage() {
  std::string s =
      "usage: 1bit recipes <list|show|remove|path> [ID] [options]\n\n"
      "Recipes are engine settings, each quoting the measurement that earned it. serve, lemonade and\n"
      "facts apply them in layers: the user store first, then the built-in recipes (or --recipes\n"
      "FILE in their place). A user recipe replaces the built-in one of the same id; --no-recipes\n"
      "turns every layer off. The user store is $XDG_CONFIG_HOME/1bit/recipes.json\n"
      "(~/.config/1bit/recipes.json when XDG_CONFIG_HOME is unset, empty or relative), in the\n"
      "format of config/recipes.json; a missing file holds no recipes.\n\nsubcommands:\n";
  for (const Subcommand& c : kSubcommands) {
    const std::string head = std::string("  ") + c.name + (*c.words ? " " : "") + c.words;
    s += head + std::string(head.size() < 36 ? 36 - head.size() : 1, ' ') + c.summary + "\n";
  }
  for (const Subcommand& c : kSubcommands) {
    RecipesOptions o;
    const std::vector<CliOption> table = c.table(o);
    if (!table.empty()) s += std::string("\n") + c.name + " options:\n" + format_options(table);
  }
  return s;
}

int run_recipes(const std::vector<std::string>& args) {
  try {
    if (args.empty()) throw Error("expected a subcommand: list, show, remove or path (see 1bit recipes --help)");
    if (args[0] == "-h" || args[0] == "--help") {
      std::cout << recipes_usage();
      return 0;
    }
    const Subcommand* c = nullptr;
    for (const Subcommand& s : kSubcommands)
      if (args[0] == s.name) c = &s;
    if (c == nullptr)
      throw Error("unknown subcommand \"" + args[0] + "\" (list, show, remove or path; see 1bit recipes --help)");
    RecipesOptions o;
    CliParse p = parse_cli(c->table(o), std::vector<std::string>(args.begin() + 1, args.end()));
    if (p.help) {
      std::cout << recipes_usage();
      return 0;
    }
    if (p.positional.size() < c->ids)
      throw Error(std::string(c->name) + " needs a recipe ID (1bit recipes list shows them)");
    if (p.positional.size() > c->ids) throw Error("unexpected argument \"" + p.positional[c->ids] + "\"");
    return c->run(o, c->ids ? p.positional[0] : "");
  } catch (const Error& e) {
    std::cerr << "1bit recipes: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace onebit
