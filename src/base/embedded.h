// Texts compiled into the binary at build time (see cmake/embed.cmake): the built-in recipes,
// and facts about the engine build that 1bit launches.
#pragma once

namespace onebit::embedded {

extern const char* const kRecipesJson;      // config/recipes.json
extern const char* const kTuneSpaceJson;    // config/tune_space.json: what 1bit tune searches
extern const char* const kLlamaServerHelp;  // `llama-server --help` of the pinned build
extern const char* const kEngineManifest;   // engine.json written by scripts/engine.sh
extern const char* const kLemonadeModelsJson;  // config/lemonade_models.json: lemonade's registry
extern const char* const kLemonadePage;        // src/lemonade/page.html: lemonade's web page

}  // namespace onebit::embedded
