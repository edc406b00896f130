#include "recipes/recipe_store.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "base/error.h"
#include "test_support.h"

namespace onebit {
namespace {

const EngineArgs& engine() { return EngineArgs::builtin(); }

using testing::error_of;

// A store under a scratch directory, as $XDG_CONFIG_HOME/1bit/recipes.json.
struct Store {
  testing::TempDir dir;
  std::string path = dir.path() + "/1bit/recipes.json";
  void write(const std::string& text) const {
    std::filesystem::create_directories(dir.path() + "/1bit");
    testing::write_file(path, text);
  }
};

const char* kTwo = R"({"about": "mine", "recipes": [
  {"measured": "m1", "id": "first", "args": ["-ub", "256"]},
  {"id": "second", "match": {"device": ["cpu"]}, "env": {"ONEBIT_X": "1"}, "measured": "m2"}]})";

std::vector<std::string> ids(const RecipeSet& set) {
  std::vector<std::string> out;
  for (const Recipe& r : set.recipes) out.push_back(r.id);
  return out;
}

}  // namespace

TEST(RecipeStore, PathFollowsXdgConfigHomeThenHome) {
  EXPECT_EQ(recipe_store_path("/x/config", "/home/u"), "/x/config/1bit/recipes.json");
  EXPECT_EQ(recipe_store_path(nullptr, "/home/u"), "/home/u/.config/1bit/recipes.json");
  // An empty or relative XDG_CONFIG_HOME is ignored, as the XDG base directory spec says.
  EXPECT_EQ(recipe_store_path("", "/home/u"), "/home/u/.config/1bit/recipes.json");
  EXPECT_EQ(recipe_store_path("config", "/home/u"), "/home/u/.config/1bit/recipes.json");
  EXPECT_EQ(recipe_store_path("./config", "/home/u"), "/home/u/.config/1bit/recipes.json");
  // No absolute path at all: no store.
  EXPECT_EQ(recipe_store_path(nullptr, nullptr), "");
  EXPECT_EQ(recipe_store_path("", "relative/home"), "");
  EXPECT_EQ(recipe_store_path("/x", nullptr), "/x/1bit/recipes.json");
}

// The test programs run under a private XDG_CONFIG_HOME (test_support.cc), never the developer's.
TEST(RecipeStore, TestsRunUnderAPrivateConfigHome) {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  ASSERT_NE(xdg, nullptr);
  EXPECT_NE(std::string(xdg).find("/1bit-test-config-"), std::string::npos) << xdg;
  EXPECT_EQ(recipe_store_path(), std::string(xdg) + "/1bit/recipes.json");
  EXPECT_EQ(required_recipe_store_path(), recipe_store_path());
  EXPECT_FALSE(load_recipe_store(recipe_store_path(), engine()).has_value());
}

TEST(RecipeStore, AMissingStoreHoldsNoRecipes) {
  Store s;
  EXPECT_FALSE(load_recipe_store(s.path, engine()).has_value());
  EXPECT_FALSE(load_recipe_store("", engine()).has_value());
  // A path through a file is no store either (~/.config being a file, say).
  testing::write_file(s.dir.file("plain"), "x");
  EXPECT_FALSE(load_recipe_store(s.dir.file("plain") + "/1bit/recipes.json", engine()).has_value());
  RecipeChoice c("", false, engine(), s.path);
  ASSERT_EQ(c.layers().size(), 1u);
  EXPECT_EQ(c.layers()[0].name, "built-in");
  EXPECT_EQ(ids(*c.set()), ids(builtin_recipes()));
}

TEST(RecipeStore, AMalformedStoreIsAnErrorNamingTheFile) {
  Store s;
  s.write("{\"recipes\": [");
  const std::string json_error = error_of([&] { load_recipe_store(s.path, engine()); });
  EXPECT_EQ(json_error.rfind(s.path + ": invalid JSON: parse error at line 1", 0), 0u) << json_error;
  EXPECT_EQ(json_error.find('\n'), std::string::npos);
  s.write(R"({"recipes": [{"id": "x", "args": ["-ub", "1"]}]})");
  EXPECT_EQ(error_of([&] { RecipeChoice("", false, engine(), s.path); }),
            s.path + ": recipe \"x\" has no \"measured\": every recipe needs the measurement behind it");
  s.write("");
  EXPECT_EQ(error_of([&] { load_recipe_store(s.path, engine()); }).rfind(s.path + ": invalid JSON: ", 0), 0u);
  std::filesystem::remove(s.path);
  std::filesystem::create_directories(s.path);
  EXPECT_EQ(error_of([&] { load_recipe_store(s.path, engine()); }),
            s.path + ": cannot read the recipes file: it is a directory");
  // --no-recipes reads no store at all, so it works around a broken one.
  EXPECT_EQ(RecipeChoice("", true, engine(), s.path).set(), nullptr);
  EXPECT_TRUE(RecipeChoice("", true, engine(), s.path).layers().empty());
}

TEST(RecipeStore, TheStoreComesFirstThenTheBuiltInSetOrFile) {
  Store s;
  s.write(kTwo);
  RecipeChoice c("", false, engine(), s.path);
  ASSERT_EQ(c.layers().size(), 2u);
  EXPECT_EQ(c.layers()[0].name, "user");
  EXPECT_EQ(c.layers()[0].title(), "user store " + s.path);
  EXPECT_EQ(c.layers()[1].name, "built-in");
  EXPECT_EQ(c.layers()[1].title(), "built-in recipes");
  std::vector<std::string> expect = {"first", "second"};
  for (const Recipe& r : builtin_recipes().recipes) expect.push_back(r.id);
  EXPECT_EQ(ids(*c.set()), expect);
  EXPECT_EQ(c.set()->origin, "user store " + s.path + ", then built-in recipes");
  EXPECT_EQ(c.layer_of("first"), &c.layers()[0]);
  EXPECT_EQ(c.layer_of(builtin_recipes().recipes.at(0).id), &c.layers()[1]);
  EXPECT_EQ(c.layer_of("nope"), nullptr);

  // --recipes FILE takes the built-in set's place, after the store.
  testing::write_file(s.dir.file("file.json"),
                      R"({"recipes": [{"id": "from-file", "args": ["-b", "64"], "measured": "m"}]})");
  RecipeChoice f(s.dir.file("file.json"), false, engine(), s.path);
  ASSERT_EQ(f.layers().size(), 2u);
  EXPECT_EQ(f.layers()[1].name, "file");
  EXPECT_EQ(f.layers()[1].title(), "recipes file " + s.dir.file("file.json"));
  EXPECT_EQ(ids(*f.set()), (std::vector<std::string>{"first", "second", "from-file"}));
}

// An id names one recipe: the store's entry takes the place of a later layer's of the same id.
TEST(RecipeStore, AStoreRecipeReplacesTheLaterOneOfItsId) {
  Store s;
  s.write(R"({"recipes": [{"id": "shared", "env": {"ONEBIT_X": "store"}, "measured": "m"}]})");
  testing::write_file(s.dir.file("file.json"), R"({"recipes": [
    {"id": "shared", "env": {"ONEBIT_X": "file"}, "measured": "m"},
    {"id": "other", "env": {"ONEBIT_Y": "file"}, "measured": "m"}]})");
  RecipeChoice c(s.dir.file("file.json"), false, engine(), s.path);
  EXPECT_EQ(ids(*c.set()), (std::vector<std::string>{"shared", "other"}));
  EXPECT_EQ(c.set()->recipes[0].env.at(0).second, "store");
  EXPECT_EQ(c.layer_of("shared"), &c.layers()[0]);

  ModelFacts f;
  f.architecture = "llama";
  const std::vector<RecipeVerdict> v = judge_recipes(c, f, {"CPU", "0123456789abcdef"});
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].layer, &c.layers()[0]);
  EXPECT_EQ(v[0].text(), "applies on any device");
  EXPECT_EQ(v[1].layer, &c.layers()[1]);
  EXPECT_EQ(v[1].recipe->id, "shared");
  EXPECT_EQ(v[1].text(), "does not apply: replaced by the recipe of the same id in the user store " + s.path);
  EXPECT_EQ(v[2].text(), "applies on any device");
}

TEST(RecipeStore, JudgingUsesThisMachineButNotTheDevice) {
  Store s;
  s.write(R"({"recipes": [
    {"id": "gpu", "match": {"gpu": ["NVIDIA H200"]}, "env": {"A": "1"}, "measured": "m"},
    {"id": "cpu", "match": {"cpu": ["Test CPU"], "device": ["cpu"]}, "env": {"B": "1"}, "measured": "m"},
    {"id": "draft", "match": {"drafter": ["draft"]}, "env": {"C": "1"}, "measured": "m"}]})");
  RecipeChoice c("", false, engine(), s.path);
  ModelFacts f;
  f.architecture = "qwen3";
  auto v = judge_recipes(c, f, {"Test CPU", ""});
  EXPECT_EQ(v[0].text(), "applies on device cuda (gpu NVIDIA H200)");
  EXPECT_EQ(v[1].text(), "applies on device cpu");
  EXPECT_EQ(v[2].text(), "does not apply: drafter none not in [draft]");
  v = judge_recipes(c, f, {"Another CPU", ""});
  EXPECT_EQ(v[1].text(), "does not apply: cpu Another CPU not in [Test CPU]");
}

TEST(RecipeStore, RemoveRewritesTheStoreWithoutTheRecipe) {
  Store s;
  s.write(kTwo);
  chmod(s.path.c_str(), 0640);
  remove_from_recipe_store(s.path, "second", engine());
  // The rest stays as written, in the file's own key order; the mode stays.
  EXPECT_EQ(testing::read_file(s.path),
            "{\n  \"about\": \"mine\",\n  \"recipes\": [\n    {\n      \"measured\": \"m1\",\n      \"id\": \"first\",\n"
            "      \"args\": [\n        \"-ub\",\n        \"256\"\n      ]\n    }\n  ]\n}\n");
  struct stat st{};
  ASSERT_EQ(stat(s.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  // Removing the last one leaves a valid, empty store; no temporary file stays behind.
  remove_from_recipe_store(s.path, "first", engine());
  const std::optional<RecipeSet> left = load_recipe_store(s.path, engine());
  ASSERT_TRUE(left.has_value());
  EXPECT_TRUE(left->recipes.empty());
  EXPECT_EQ(left->about, "mine");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(s.dir.path() + "/1bit"), {}), 1);
}

TEST(RecipeStore, RemoveRefusesWhatItCannotDo) {
  Store s;
  EXPECT_EQ(error_of([&] { remove_from_recipe_store(s.path, "x", engine()); }),
            "no recipe \"x\" in the user store (" + s.path + ": no such file)");
  s.write(kTwo);
  EXPECT_EQ(error_of([&] { remove_from_recipe_store(s.path, "third", engine()); }),
            "no recipe \"third\" in the user store (" + s.path + ")");
  EXPECT_EQ(error_of([&] { remove_from_recipe_store("", "x", engine()); }),
            "no user recipe store: neither XDG_CONFIG_HOME nor HOME is an absolute path");
  // A malformed store is left as it is.
  s.write(R"({"recipes": [{"id": "first", "args": ["-ub", "1"]}]})");
  EXPECT_EQ(error_of([&] { remove_from_recipe_store(s.path, "first", engine()); }),
            s.path + ": recipe \"first\" has no \"measured\": every recipe needs the measurement behind it");
  EXPECT_EQ(testing::read_file(s.path), R"({"recipes": [{"id": "first", "args": ["-ub", "1"]}]})");
}

TEST(RecipeStore, AtomicWriteReplacesOrFailsWhole) {
  testing::TempDir dir;
  write_file_atomically(dir.file("f"), "one\n");
  write_file_atomically(dir.file("f"), "two\n");
  EXPECT_EQ(testing::read_file(dir.file("f")), "two\n");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 1);
  EXPECT_EQ(error_of([&] { write_file_atomically(dir.file("no/such/f"), "x"); }),
            dir.file("no/such/f") + ": cannot write: No such file or directory");
}

}  // namespace onebit
