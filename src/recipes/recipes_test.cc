#include "recipes/recipes.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "base/error.h"

namespace onebit {
namespace {

const char* kSet = R"({
  "about": "test set",
  "recipes": [
    {"id": "moe-h32", "match": {"moe": true, "hadamard_q4_0": true, "device": ["cuda"]},
     "args": ["-ub", "2048", "--no-mmap"], "env": {"GGML_CUDA_X": "1"},
     "why": "w", "measured": "m", "source": "s"},
    {"id": "draft-n", "match": {"drafter": ["draft"]}, "args": ["--spec-draft-n-max", "8"], "measured": "m"},
    {"id": "llama-cpu", "match": {"architecture": ["llama"], "device": ["cpu"]}, "args": ["-b", "512"], "measured": "m"}
  ]
})";

RecipeSet test_set() { return parse_recipes(kSet, "test.json", EngineArgs::builtin()); }

ModelFacts facts(const std::string& arch, bool moe, bool h32) {
  ModelFacts f;
  f.architecture = arch;
  f.moe = moe;
  f.expert_count = moe ? 8 : 0;
  f.hadamard_q4_0 = h32;
  return f;
}

struct Applied {
  std::vector<AppliedRecipe> recipes;
  std::vector<std::string> argv;
  ChildEnv env;
};

Applied apply(const RecipeSet& set, const ModelFacts& f, const std::string& device, const std::string& drafter,
              std::vector<std::string> argv = {}, std::map<std::string, std::string> env = {}) {
  Applied a;
  a.argv = std::move(argv);
  a.env.inherited = std::move(env);
  a.recipes = apply_recipes(set, RecipeTarget{device, "", drafter, &f}, EngineArgs::builtin(), a.argv, a.env);
  return a;
}

std::string error_of(const std::string& json) {
  try {
    parse_recipes(json, "r.json", EngineArgs::builtin());
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string recipe(const std::string& body) { return R"({"recipes": [)" + body + "]}"; }

}  // namespace

TEST(Recipes, ParsesEveryField) {
  RecipeSet s = test_set();
  EXPECT_EQ(s.origin, "test.json");
  EXPECT_EQ(s.about, "test set");
  ASSERT_EQ(s.recipes.size(), 3u);
  const Recipe& r = s.recipes[0];
  EXPECT_EQ(r.id, "moe-h32");
  EXPECT_EQ(r.args, (std::vector<std::string>{"-ub", "2048", "--no-mmap"}));
  ASSERT_EQ(r.env.size(), 1u);
  EXPECT_EQ(r.env[0].first, "GGML_CUDA_X");
  EXPECT_EQ(r.why, "w");
  EXPECT_EQ(r.source, "s");
  EXPECT_EQ(*r.match.moe, true);
  EXPECT_EQ(*r.match.device, std::vector<std::string>{"cuda"});
}

TEST(Recipes, RotatedMoeGetsItsRecipeDenseDoesNot) {
  Applied moe = apply(test_set(), facts("qwen3moe", true, true), "cuda", "none", {"-m", "x"});
  ASSERT_EQ(moe.recipes.size(), 1u);
  EXPECT_EQ(moe.recipes[0].id, "moe-h32");
  EXPECT_EQ(moe.recipes[0].describe(), "-ub 2048 --no-mmap GGML_CUDA_X=1");
  EXPECT_EQ(moe.argv, (std::vector<std::string>{"-m", "x", "-ub", "2048", "--no-mmap"}));
  ASSERT_EQ(moe.env.added.size(), 1u);

  EXPECT_TRUE(apply(test_set(), facts("qwen3", false, true), "cuda", "none").recipes.empty());
  EXPECT_TRUE(apply(test_set(), facts("qwen3moe", true, false), "cuda", "none").recipes.empty());
  EXPECT_TRUE(apply(test_set(), facts("qwen3moe", true, true), "cpu", "none").recipes.empty());
}

TEST(Recipes, ADrafterRecipeAppearsOnce) {
  std::vector<std::string> argv = {"--spec-type", "draft-simple", "-md", "d.gguf"};
  Applied a = apply(test_set(), facts("qwen3", false, false), "cuda", "draft", argv);
  ASSERT_EQ(a.recipes.size(), 1u);
  EXPECT_EQ(a.recipes[0].id, "draft-n");
  EXPECT_EQ(std::count(a.argv.begin(), a.argv.end(), "--spec-draft-n-max"), 1);
  // Applying the same set again to the result adds nothing: the flag is already there.
  Applied again = apply(test_set(), facts("qwen3", false, false), "cuda", "draft", a.argv);
  EXPECT_TRUE(again.recipes.empty());
  EXPECT_EQ(again.argv, a.argv);
}

TEST(Recipes, TheUsersValueWinsUnderAnySpelling) {
  for (const auto& user : std::vector<std::vector<std::string>>{
           {"-ub", "64"}, {"--ubatch-size", "64"}, {"--ubatch_size", "64"}}) {
    Applied a = apply(test_set(), facts("qwen3moe", true, true), "cuda", "none", user);
    ASSERT_EQ(a.recipes.size(), 1u);
    EXPECT_EQ(a.recipes[0].describe(), "--no-mmap GGML_CUDA_X=1") << user[0];
  }
  // The engine's environment variable for the option counts as setting it.
  Applied env = apply(test_set(), facts("qwen3moe", true, true), "cuda", "none", {}, {{"LLAMA_ARG_UBATCH", "64"}});
  EXPECT_EQ(env.recipes[0].describe(), "--no-mmap GGML_CUDA_X=1");
  // A negation is the same option: --mmap from the user keeps --no-mmap out.
  Applied neg = apply(test_set(), facts("qwen3moe", true, true), "cuda", "none", {"--mmap"});
  EXPECT_EQ(neg.recipes[0].describe(), "-ub 2048 GGML_CUDA_X=1");
  // An env variable already set is left alone; a recipe with nothing left to add is not listed.
  Applied all = apply(test_set(), facts("qwen3moe", true, true), "cuda", "none", {"-ub", "1", "--mmap"},
                      {{"GGML_CUDA_X", "0"}});
  EXPECT_TRUE(all.recipes.empty());
  EXPECT_TRUE(all.env.added.empty());
}

TEST(Recipes, MismatchSaysWhy) {
  RecipeSet s = test_set();
  ModelFacts dense = facts("qwen3", false, false);
  EXPECT_EQ(recipe_mismatch(s.recipes[0], RecipeTarget{"cuda", "", "none", &dense}), "needs a MoE model");
  EXPECT_EQ(recipe_mismatch(s.recipes[2], RecipeTarget{"cpu", "", "none", &dense}), "architecture qwen3 not in [llama]");
  EXPECT_EQ(recipe_mismatch(s.recipes[1], RecipeTarget{"cpu", "", "none", &dense}), "drafter none not in [draft]");
  ModelFacts llama = facts("llama", false, false);
  EXPECT_EQ(recipe_mismatch(s.recipes[2], RecipeTarget{"cuda", "", "none", &llama}), "device cuda not in [cpu]");
  EXPECT_EQ(recipe_mismatch(s.recipes[2], RecipeTarget{"cuda", "", "none", &llama}, true), "");
}

TEST(Recipes, TheBuiltInSetLoads) {
  const RecipeSet& b = builtin_recipes();
  EXPECT_EQ(b.origin, "built-in recipes");
  for (const Recipe& r : b.recipes) EXPECT_FALSE(r.measured.empty()) << r.id;
}

// The gemv-q4_0 switch was measured on speculative decoding with CUDA: it must not reach a plain
// launch or the CPU.
TEST(Recipes, TheBuiltInGemvRecipeNeedsADrafterAndCuda) {
  const RecipeSet& b = builtin_recipes();
  const Recipe* gemv = nullptr;
  for (const Recipe& r : b.recipes)
    if (r.id == "llama-cuda-draft-onebit-gemv-q4_0-auto") gemv = &r;
  ASSERT_NE(gemv, nullptr);
  ASSERT_EQ(gemv->env.size(), 1u);
  EXPECT_EQ(gemv->env[0], std::make_pair(std::string("ONEBIT_GEMV_Q4_0"), std::string("auto")));
  ModelFacts llama = facts("llama", false, false), qwen = facts("qwen3", false, false);
  EXPECT_EQ(recipe_mismatch(*gemv, RecipeTarget{"cuda", "NVIDIA H200", "draft", &llama}), "");
  EXPECT_EQ(recipe_mismatch(*gemv, RecipeTarget{"cuda", "NVIDIA H200", "none", &llama}), "drafter none not in [draft]");
  EXPECT_EQ(recipe_mismatch(*gemv, RecipeTarget{"cpu", "", "draft", &llama}), "device cpu not in [cuda]");
  EXPECT_EQ(recipe_mismatch(*gemv, RecipeTarget{"cuda", "NVIDIA H200", "draft", &qwen}), "architecture qwen3 not in [llama]");
  // Measured on the H200 only: another GPU, or one the engine did not name, does not get it.
  EXPECT_EQ(recipe_mismatch(*gemv, RecipeTarget{"cuda", "NVIDIA GeForce RTX 4090", "draft", &llama}),
            "gpu NVIDIA GeForce RTX 4090 not in [NVIDIA H200]");
  EXPECT_EQ(recipe_mismatch(*gemv, RecipeTarget{"cuda", "", "draft", &llama}), "gpu none not in [NVIDIA H200]");
  // A GPU model implies cuda: on the CPU the engine's GPU does not count.
  Recipe gpu_only = *gemv;
  gpu_only.match.device.reset();
  EXPECT_EQ(recipe_mismatch(gpu_only, RecipeTarget{"cpu", "NVIDIA H200", "draft", &llama}), "gpu none not in [NVIDIA H200]");
  // `1bit facts` judges the file alone: neither the device nor the GPU is checked.
  EXPECT_EQ(recipe_mismatch(*gemv, RecipeTarget{"", "", "draft", &llama}, true), "");
}

// Every built-in recipe that needs CUDA was measured on one GPU model and says which.
TEST(Recipes, BuiltInCudaRecipesNameTheirGpu) {
  int cuda = 0;
  for (const Recipe& r : builtin_recipes().recipes)
    if (!r.match.device || std::find(r.match.device->begin(), r.match.device->end(), "cuda") != r.match.device->end()) {
      ++cuda;
      ASSERT_TRUE(r.match.gpu.has_value()) << r.id;
      for (const std::string& gpu : *r.match.gpu) EXPECT_NE(r.measured.find(gpu), std::string::npos) << r.id;
    }
  EXPECT_GT(cuda, 0);
}

TEST(Recipes, ValidationMessages) {
  EXPECT_EQ(error_of("{"), "r.json: invalid JSON: parse error at line 1, column 2: syntax error while parsing object key - unexpected end of input; expected string literal");
  EXPECT_EQ(error_of("[]"), "r.json: the top level must be an object with a \"recipes\" list");
  EXPECT_EQ(error_of("{}"), "r.json: no \"recipes\" list");
  EXPECT_EQ(error_of(R"({"recipes": {}})"), "r.json: \"recipes\" must be a list");
  EXPECT_EQ(error_of(R"({"recipes": [], "extra": 1})"), "r.json: unknown key \"extra\" at the top level");
  EXPECT_EQ(error_of(R"({"about": 3, "recipes": []})"), "r.json: \"about\" must be a string");
  EXPECT_EQ(error_of(recipe("7")), "r.json: recipes[0] is not an object");
  EXPECT_EQ(error_of(recipe(R"({"args": ["-ub", "1"], "measured": "m"})")), "r.json: recipes[0] has no \"id\"");
  EXPECT_EQ(error_of(recipe(R"({"id": 5})")), "r.json: recipes[0]: \"id\" must be a non-empty string");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "args": ["-ub", "1"]})")),
            "r.json: recipe \"a\" has no \"measured\": every recipe needs the measurement behind it");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "measured": "m"})")), "r.json: recipe \"a\" adds nothing (no args and no env)");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "args": [], "env": {}, "measured": "m"})")),
            "r.json: recipe \"a\" adds nothing (no args and no env)");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "colour": "red", "measured": "m"})")), "r.json: recipe \"a\": unknown key \"colour\"");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "match": {"archtecture": ["llama"]}, "args": ["-ub", "1"], "measured": "m"})")),
            "r.json: recipe \"a\": unknown match key \"archtecture\"");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "match": {"moe": "yes"}, "args": ["-ub", "1"], "measured": "m"})")),
            "r.json: recipe \"a\": match.moe must be true or false");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "match": {"device": "cuda"}, "args": ["-ub", "1"], "measured": "m"})")),
            "r.json: recipe \"a\": match.device must be a list of strings");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "match": {"device": ["gpu"]}, "args": ["-ub", "1"], "measured": "m"})")),
            "r.json: recipe \"a\": match.device: unknown value \"gpu\" (known: cpu, cuda)");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "match": {"gpu": "NVIDIA H200"}, "args": ["-ub", "1"], "measured": "m"})")),
            "r.json: recipe \"a\": match.gpu must be a list of strings");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "match": {"gpu": []}, "args": ["-ub", "1"], "measured": "m"})")),
            "r.json: recipe \"a\": match.gpu must name GPU models");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "match": {"gpu": [""]}, "args": ["-ub", "1"], "measured": "m"})")),
            "r.json: recipe \"a\": match.gpu must name GPU models");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "match": {"device": ["cpu"], "gpu": ["X"]}, "args": ["-ub", "1"], "measured": "m"})")),
            "r.json: recipe \"a\": match.gpu names GPU models, but match.device leaves out cuda");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "match": {"drafter": ["eagle"]}, "args": ["-ub", "1"], "measured": "m"})")),
            "r.json: recipe \"a\": match.drafter: unknown value \"eagle\" (known: none, draft, dflash, mtp)");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "match": [], "args": ["-ub", "1"], "measured": "m"})")),
            "r.json: recipe \"a\": \"match\" must be an object");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "args": "-ub 1", "measured": "m"})")),
            "r.json: recipe \"a\": \"args\" must be a list of strings");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "args": ["1024", "-ub"], "measured": "m"})")),
            "r.json: recipe \"a\": args must start with a flag, not \"1024\"");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "args": ["--ubatchsize", "1"], "measured": "m"})")),
            "r.json: recipe \"a\": args: \"--ubatchsize\" is not a llama-server option");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "args": ["-ub"], "measured": "m"})")), "r.json: recipe \"a\": args: -ub needs 1 value");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "args": ["--jinja", "yes"], "measured": "m"})")),
            "r.json: recipe \"a\": args: \"yes\" follows --jinja, which takes 0 values");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "env": {"X": 1}, "measured": "m"})")), "r.json: recipe \"a\": env.X must be a string");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "env": {"1X": "1"}, "measured": "m"})")),
            "r.json: recipe \"a\": env: \"1X\" is not a valid variable name");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "env": ["X"], "measured": "m"})")), "r.json: recipe \"a\": \"env\" must be an object of strings");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "args": ["-ub", "1"], "measured": 5})")), "r.json: recipe \"a\": \"measured\" must be a string");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "args": ["-ub", "1"], "measured": "m"}, {"id": "a", "args": ["-b", "1"], "measured": "m"})")),
            "r.json: duplicate recipe id \"a\"");
}

TEST(Recipes, LoadsAFileAndNamesAMissingOne) {
  EXPECT_THROW(load_recipes_file("/nonexistent/recipes.json", EngineArgs::builtin()), Error);
  try {
    load_recipes_file("/nonexistent/recipes.json", EngineArgs::builtin());
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "/nonexistent/recipes.json: cannot read the recipes file");
  }
}

}  // namespace onebit
