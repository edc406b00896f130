#include "recipes/recipes.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "bench/machine.h"
#include "engine/device.h"

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

// The built-in recipe with this id; nullptr when there is none.
const Recipe* builtin(const std::string& id) {
  for (const Recipe& r : builtin_recipes().recipes)
    if (r.id == id) return &r;
  return nullptr;
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

// rpc matches launches with workers (or without); gpus counts the device's local GPUs.
TEST(Recipes, RpcAndGpuCountMatchTheLaunch) {
  RecipeSet s = parse_recipes(R"({"recipes": [
      {"id": "r", "match": {"rpc": true}, "args": ["-ub", "1024"], "measured": "m"},
      {"id": "g", "match": {"device": ["cuda"], "gpus": [2, 8]}, "args": ["-sm", "row"], "measured": "m"}]})",
                              "r.json", EngineArgs::builtin());
  ModelFacts llama = facts("llama", false, false);
  RecipeTarget local{"cpu", "", "none", &llama};
  EXPECT_EQ(recipe_mismatch(s.recipes[0], local), "needs a launch with RPC workers");
  RecipeTarget with_workers = local;
  with_workers.rpc = true;
  EXPECT_EQ(recipe_mismatch(s.recipes[0], with_workers), "");
  RecipeTarget one_gpu{"cuda", "NVIDIA H200", "none", &llama};
  one_gpu.gpus = 1;
  EXPECT_EQ(recipe_mismatch(s.recipes[1], one_gpu), "gpus 1 not in 2..8");
  RecipeTarget two_gpus = one_gpu;
  two_gpus.gpus = 2;
  EXPECT_EQ(recipe_mismatch(s.recipes[1], two_gpus), "");
  EXPECT_EQ(recipe_conditions(s.recipes[1]), "device cuda; gpus 2..8");
  EXPECT_EQ(recipe_conditions(s.recipes[0]), "rpc true");
  EXPECT_NE(error_of(R"({"recipes": [{"id": "x", "match": {"rpc": 1}, "args": ["-ub", "1"], "measured": "m"}]})")
                .find("match.rpc must be true or false"),
            std::string::npos);
}

// device: [vulkan] matches a Vulkan launch only, and a GPU model counts on Vulkan as on CUDA.
TEST(Recipes, VulkanRecipesMatchVulkanLaunches) {
  RecipeSet s = parse_recipes(R"({"recipes": [
      {"id": "v", "match": {"device": ["vulkan"], "gpu": ["AMD Radeon RX 7900 XTX"]}, "args": ["-ub", "1024"], "measured": "m"}]})",
                              "r.json", EngineArgs::builtin());
  ModelFacts llama = facts("llama", false, false);
  EXPECT_EQ(recipe_mismatch(s.recipes[0], RecipeTarget{"vulkan", "AMD Radeon RX 7900 XTX", "none", &llama}), "");
  EXPECT_EQ(recipe_mismatch(s.recipes[0], RecipeTarget{"cuda", "AMD Radeon RX 7900 XTX", "none", &llama}),
            "device cuda not in [vulkan]");
  EXPECT_EQ(recipe_mismatch(s.recipes[0], RecipeTarget{"vulkan", "llvmpipe", "none", &llama}),
            "gpu llvmpipe not in [AMD Radeon RX 7900 XTX]");
}

TEST(Recipes, TheBuiltInSetLoads) {
  const RecipeSet& b = builtin_recipes();
  EXPECT_EQ(b.origin, "built-in recipes");
  for (const Recipe& r : b.recipes) EXPECT_FALSE(r.measured.empty()) << r.id;
}

// The gemv-q4_0 switch was measured on speculative decoding with CUDA: it must not reach a plain
// launch or the CPU.
TEST(Recipes, TheBuiltInGemvRecipeNeedsADrafterAndCuda) {
  const Recipe* gemv = builtin("llama-cuda-draft-onebit-gemv-q4_0-auto");
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

// The dflash and eagle3 drafters have their own measurement of the switch; a draft model and MTP
// are not covered by it.
TEST(Recipes, TheBuiltInGemvRecipeForDflashAndEagle3) {
  const Recipe* gemv = builtin("llama-cuda-dflash-eagle3-onebit-gemv-q4_0-auto");
  ASSERT_NE(gemv, nullptr);
  ASSERT_EQ(gemv->env.size(), 1u);
  EXPECT_EQ(gemv->env[0], std::make_pair(std::string("ONEBIT_GEMV_Q4_0"), std::string("auto")));
  ModelFacts llama = facts("llama", false, false);
  EXPECT_EQ(recipe_mismatch(*gemv, RecipeTarget{"cuda", "NVIDIA H200", "dflash", &llama}), "");
  EXPECT_EQ(recipe_mismatch(*gemv, RecipeTarget{"cuda", "NVIDIA H200", "eagle3", &llama}), "");
  EXPECT_EQ(recipe_mismatch(*gemv, RecipeTarget{"cuda", "NVIDIA H200", "mtp", &llama}), "drafter mtp not in [dflash, eagle3]");
  EXPECT_EQ(recipe_mismatch(*gemv, RecipeTarget{"cuda", "NVIDIA H200", "none", &llama}), "drafter none not in [dflash, eagle3]");
}

// On the H100 the switch was measured with a draft model and a dflash drafter, not with eagle3.
TEST(Recipes, TheBuiltInH100GemvRecipeForDraftAndDflash) {
  const Recipe* gemv = builtin("llama-cuda-h100-draft-dflash-onebit-gemv-q4_0-auto");
  ASSERT_NE(gemv, nullptr);
  ASSERT_EQ(gemv->env.size(), 1u);
  EXPECT_EQ(gemv->env[0], std::make_pair(std::string("ONEBIT_GEMV_Q4_0"), std::string("auto")));
  const std::string h100 = "NVIDIA H100 80GB HBM3";
  ModelFacts llama = facts("llama", false, false);
  EXPECT_EQ(recipe_mismatch(*gemv, RecipeTarget{"cuda", h100, "draft", &llama}), "");
  EXPECT_EQ(recipe_mismatch(*gemv, RecipeTarget{"cuda", h100, "dflash", &llama}), "");
  EXPECT_EQ(recipe_mismatch(*gemv, RecipeTarget{"cuda", h100, "eagle3", &llama}), "drafter eagle3 not in [draft, dflash]");
  EXPECT_EQ(recipe_mismatch(*gemv, RecipeTarget{"cuda", h100, "none", &llama}), "drafter none not in [draft, dflash]");
  EXPECT_EQ(recipe_mismatch(*gemv, RecipeTarget{"cuda", "NVIDIA H200", "dflash", &llama}),
            "gpu NVIDIA H200 not in [" + h100 + "]");
}

// Patches 0012, 0017 and 0022 were measured on an H100 decoding Llama 3 8B Q4_0 without a drafter,
// each against the engine's way: their recipes stay there (a verification's 2-4 columns were slower
// with 0017).
TEST(Recipes, TheBuiltInH100DecodeRecipes) {
  const std::vector<std::pair<std::string, std::string>> wanted = {
      {"llama-q4_0-h100-q8_1-shared", "ONEBIT_Q8_1_SHARED"},
      {"llama-q4_0-h100-mmvq-pdl-3", "ONEBIT_MMVQ_PDL"},
      {"llama-q4_0-h100-gemv-one-col-v7", "ONEBIT_GEMV_ONE_COL"}};
  const std::string h100 = "NVIDIA H100 80GB HBM3";
  ModelFacts q4_0 = facts("llama", false, false);
  q4_0.file_type = 2;  // LLAMA_FTYPE_MOSTLY_Q4_0
  ModelFacts q8_0 = q4_0;
  q8_0.file_type = 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
  for (const auto& [id, var] : wanted) {
    const Recipe* r = builtin(id);
    ASSERT_NE(r, nullptr) << id;
    ASSERT_EQ(r->env.size(), 1u) << id;
    EXPECT_EQ(r->env[0].first, var);
    EXPECT_EQ(recipe_mismatch(*r, RecipeTarget{"cuda", h100, "none", &q4_0}), "") << id;
    EXPECT_EQ(recipe_mismatch(*r, RecipeTarget{"cuda", h100, "draft", &q4_0}), "drafter draft not in [none]") << id;
    EXPECT_EQ(recipe_mismatch(*r, RecipeTarget{"cuda", h100, "none", &q8_0}), "file_type Q8_0 not in [Q4_0]") << id;
    EXPECT_EQ(recipe_mismatch(*r, RecipeTarget{"cuda", "NVIDIA H200", "none", &q4_0}), "gpu NVIDIA H200 not in [" + h100 + "]")
        << id;
  }
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
            "r.json: recipe \"a\": match.device: unknown value \"gpu\" (known: cpu, cuda, vulkan)");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "match": {"gpu": "NVIDIA H200"}, "args": ["-ub", "1"], "measured": "m"})")),
            "r.json: recipe \"a\": match.gpu must be a list of strings");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "match": {"gpu": []}, "args": ["-ub", "1"], "measured": "m"})")),
            "r.json: recipe \"a\": match.gpu must name GPU models");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "match": {"gpu": [""]}, "args": ["-ub", "1"], "measured": "m"})")),
            "r.json: recipe \"a\": match.gpu must name GPU models");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "match": {"device": ["cpu"], "gpu": ["X"]}, "args": ["-ub", "1"], "measured": "m"})")),
            "r.json: recipe \"a\": match.gpu names GPU models, but match.device leaves out cuda and vulkan");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "match": {"drafter": ["eagle"]}, "args": ["-ub", "1"], "measured": "m"})")),
            "r.json: recipe \"a\": match.drafter: unknown value \"eagle\" (known: none, draft, dflash, eagle3, mtp)");
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

// A recipe `1bit tune` writes is bound to the machine and the model it was measured on.
const char* kMachineBound = R"({"recipes": [
  {"id": "here", "match": {"cpu": ["Test CPU 9000", "Other CPU"], "engine": ["0123456789abcdef"],
                           "file_type": ["Q8_0"], "size_bytes": [1000, 2000]},
   "args": ["-ub", "256"], "measured": "m"}]})";

ModelFacts sized(uint32_t file_type, uint64_t size) {
  ModelFacts f = facts("qwen3", false, false);
  f.file_type = file_type;
  f.file_size = size;
  return f;
}

TEST(Recipes, MachineKeysParse) {
  const Recipe r = parse_recipes(kMachineBound, "t.json", EngineArgs::builtin()).recipes.at(0);
  EXPECT_EQ(*r.match.cpu, (std::vector<std::string>{"Test CPU 9000", "Other CPU"}));
  EXPECT_EQ(*r.match.engine, std::vector<std::string>{"0123456789abcdef"});
  EXPECT_EQ(*r.match.file_type, std::vector<std::string>{"Q8_0"});
  EXPECT_EQ(*r.match.size_bytes, (std::pair<uint64_t, uint64_t>{1000, 2000}));
  EXPECT_EQ(recipe_conditions(r),
            "cpu Test CPU 9000, Other CPU; engine 0123456789abcdef; file_type Q8_0; size_bytes [1000, 2000]");
  EXPECT_EQ(recipe_adds(r), "-ub 256");
  // The whole entry is kept as JSON, for `1bit recipes show`.
  EXPECT_EQ(nlohmann::json::parse(r.entry)["match"]["size_bytes"], nlohmann::json({1000, 2000}));
}

TEST(Recipes, MachineKeysMatchOnlyTheirMachineAndModel) {
  const Recipe r = parse_recipes(kMachineBound, "t.json", EngineArgs::builtin()).recipes.at(0);
  const RecipeMachine here{"Other CPU", "0123456789abcdef"};
  const ModelFacts model = sized(7, 1500);  // 7: Q8_0
  EXPECT_EQ(recipe_mismatch(r, RecipeTarget{"cpu", "", "none", &model, here}), "");
  EXPECT_EQ(recipe_mismatch(r, RecipeTarget{"cpu", "", "none", &model, {"Test CPU 90", here.engine}}),
            "cpu Test CPU 90 not in [Test CPU 9000, Other CPU]");
  EXPECT_EQ(recipe_mismatch(r, RecipeTarget{"cpu", "", "none", &model, {"", here.engine}}),
            "cpu unknown not in [Test CPU 9000, Other CPU]");
  EXPECT_EQ(recipe_mismatch(r, RecipeTarget{"cpu", "", "none", &model, {here.cpu, "fedcba9876543210"}}),
            "engine fedcba9876543210 not in [0123456789abcdef]");
  EXPECT_EQ(recipe_mismatch(r, RecipeTarget{"cpu", "", "none", &model, {here.cpu, ""}}),
            "engine unknown not in [0123456789abcdef]");
  const ModelFacts q4 = sized(2, 1500), unstated = facts("qwen3", false, false);
  EXPECT_EQ(recipe_mismatch(r, RecipeTarget{"cpu", "", "none", &q4, here}), "file_type Q4_0 not in [Q8_0]");
  EXPECT_EQ(recipe_mismatch(r, RecipeTarget{"cpu", "", "none", &unstated, here}), "file_type not stated not in [Q8_0]");
  // The size range is inclusive at both ends.
  for (uint64_t size : {1000u, 2000u}) {
    const ModelFacts edge = sized(7, size);
    EXPECT_EQ(recipe_mismatch(r, RecipeTarget{"cpu", "", "none", &edge, here}), "") << size;
  }
  for (uint64_t size : {999u, 2001u}) {
    const ModelFacts out = sized(7, size);
    EXPECT_EQ(recipe_mismatch(r, RecipeTarget{"cpu", "", "none", &out, here}),
              "size_bytes " + std::to_string(size) + " not in [1000, 2000]");
  }
  // `1bit facts` skips only the device and the GPU: the CPU and engine build are this machine's.
  EXPECT_EQ(recipe_mismatch(r, RecipeTarget{"", "", "none", &model, {"Else", here.engine}}, true),
            "cpu Else not in [Test CPU 9000, Other CPU]");
  // apply_recipes matches the same way: a target that names no machine gets none of it.
  EXPECT_EQ(apply(parse_recipes(kMachineBound, "t.json", EngineArgs::builtin()), model, "cpu", "none").recipes.size(), 0u);
}

TEST(Recipes, ThisMachineIsTheEnginesBuildAndTheCpu) {
  const RecipeMachine& here = RecipeMachine::here();
  EXPECT_EQ(here.cpu, cpu_model());
  EXPECT_EQ(here.engine, engine_build_key());
  EXPECT_EQ(here.engine.size(), 16u) << "engine.json has a 16-hex key";
  EXPECT_EQ(here.engine.find_first_not_of("0123456789abcdef"), std::string::npos) << here.engine;
}

TEST(Recipes, MachineKeyValidationMessages) {
  auto with = [](const std::string& match) {
    return error_of(recipe(R"({"id": "a", "match": )" + match + R"(, "args": ["-ub", "1"], "measured": "m"})"));
  };
  EXPECT_EQ(with(R"({"cpu": "X"})"), "r.json: recipe \"a\": match.cpu must be a list of strings");
  EXPECT_EQ(with(R"({"cpu": []})"), "r.json: recipe \"a\": match.cpu must name CPU models");
  EXPECT_EQ(with(R"({"cpu": [""]})"), "r.json: recipe \"a\": match.cpu must name CPU models");
  EXPECT_EQ(with(R"({"engine": []})"), "r.json: recipe \"a\": match.engine must name engine builds");
  for (const char* key : {"0123456789ABCDEF", "0123456789abcde", "0123456789abcdef0", "0123456789abcdeg"})
    EXPECT_EQ(with(std::string(R"({"engine": [")") + key + R"("]})"),
              std::string("r.json: recipe \"a\": match.engine: \"") + key +
                  "\" is not an engine build key (16 hex digits, engine.json's \"key\")");
  EXPECT_EQ(with(R"({"file_type": []})"), "r.json: recipe \"a\": match.file_type must name file types");
  const std::string unknown = with(R"({"file_type": ["q8_0"]})");
  EXPECT_EQ(unknown.rfind("r.json: recipe \"a\": match.file_type: unknown value \"q8_0\" (known: F32, F16, Q4_0, Q4_1, Q8_0,", 0), 0u)
      << unknown;
  EXPECT_NE(unknown.find("BF16"), std::string::npos) << unknown;
  const std::string range = "r.json: recipe \"a\": match.size_bytes must be [min, max]: two whole numbers";
  for (const char* bad : {"1000", "[1000]", "[1, 2, 3]", "[-1, 2]", "[1.5, 2]", "[\"1\", \"2\"]", "{}"})
    EXPECT_EQ(with(std::string(R"({"size_bytes": )") + bad + "}"), range) << bad;
  EXPECT_EQ(with(R"({"size_bytes": [2000, 1000]})"), "r.json: recipe \"a\": match.size_bytes: min 2000 is above max 1000");
  EXPECT_EQ(error_of(recipe(R"({"id": "a", "match": {"size_bytes": [0, 18446744073709551615]}, "args": ["-ub", "1"], "measured": "m"})")),
            "(no error)");
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
