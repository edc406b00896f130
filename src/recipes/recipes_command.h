// `1bit recipes list|show|remove|path`: the recipes of every layer (the user's store, then the
// built-in set: recipes/recipe_store.h), one recipe's whole entry, taking a recipe out of the
// store, and where the store is.
#pragma once

#include <string>
#include <vector>

namespace onebit {

int run_recipes(const std::vector<std::string>& args);
std::string recipes_usage();

}  // namespace onebit
