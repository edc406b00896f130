// The user's recipe store as a user meets it, through the real binary: serve, facts and
// lemonade apply it before the built-in set, a malformed one stops them with one line, and
// `1bit recipes list/show/remove/path` read and edit it. Each test has its own XDG_CONFIG_HOME.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench/machine.h"
#include "engine/device.h"
#include "subprocess.h"
#include "test_support.h"

namespace onebit::testing {
namespace {

using nlohmann::json;

const char* const kGdn = "qwen35-cuda-onebit-gdn-prefill-3";  // a built-in recipe

// "built-in recipes: N recipes", N as many as config/recipes.json holds.
std::string builtin_heading() {
  std::ifstream in(source_dir() + "/config/recipes.json");
  const size_t n = nlohmann::json::parse(in)["recipes"].size();
  return "built-in recipes: " + std::to_string(n) + " recipes\n";
}
const char* const kH200 = "CUDA0: NVIDIA H200 (143771 MiB, 143000 MiB free)";

class RecipesUserStore : public ::testing::Test {
 protected:
  std::string store() const { return dir_.file("config/1bit/recipes.json"); }
  void write_store(const std::string& text) const {
    std::filesystem::create_directories(dir_.file("config/1bit"));
    write_file(store(), text);
  }
  std::map<std::string, std::string> env(std::map<std::string, std::string> extra = {}) const {
    extra.emplace("XDG_CONFIG_HOME", dir_.file("config"));  // unless the test gives its own
    extra.emplace("FAKE_RECORD", dir_.file("record.json"));
    return extra;
  }
  bool engine_started() const { return access(dir_.file("record.json").c_str(), F_OK) == 0; }
  RunResult onebit(std::vector<std::string> args, std::map<std::string, std::string> extra = {}) const {
    args.insert(args.begin(), onebit_binary());
    return run(args, env(std::move(extra)));
  }
  RunResult serve(std::vector<std::string> args, std::map<std::string, std::string> extra = {}) const {
    args.insert(args.begin(), {"serve", "--llama-server", fake_backend_binary(), "--port", "0"});
    return onebit(args, std::move(extra));
  }
  static std::string tiny() { return source_dir() + "/models/1bit-tiny-32m-q8_0.gguf"; }

  // A recipe entry bound to this machine and engine build, and to one model file's type and size.
  static json bound_to_here(const std::string& id, const std::string& model, json match, json adds) {
    if (!cpu_model().empty()) match["cpu"] = {cpu_model()};
    match["engine"] = {engine_build_key()};
    match["file_type"] = {"Q8_0"};
    const auto size = std::filesystem::file_size(model);
    match["size_bytes"] = {size, size};
    json entry = {{"id", id}, {"match", match}, {"measured", "test"}};
    entry.update(adds);
    return entry;
  }

  TempDir dir_;
};

// A store recipe for this machine and model comes before the built-in one, and adds its flag.
TEST_F(RecipesUserStore, ServeAppliesTheStoreBeforeTheBuiltInSet) {
  const std::string model = dir_.file("qwen35.gguf"), other = dir_.file("qwen35-other.gguf");
  write_gguf(model, {{"general.architecture", std::string("qwen35")}, {"general.file_type", uint32_t{7}}});
  write_gguf(other, {{"general.architecture", std::string("qwen35")}, {"general.file_type", uint32_t{7}},
                     {"general.name", std::string("a longer file")}});
  write_store(json({{"recipes", {bound_to_here("here-ub", model, {{"architecture", {"qwen35"}}}, {{"args", {"-ub", "512"}}})}}})
                  .dump());
  const std::vector<std::string> dry = {"--dry-run", "--device", "cuda", "-m", model};
  RunResult r = serve(dry, {{"FAKE_DEVICES", kH200}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "1bit serve: recipe here-ub: -ub 512\n1bit serve: recipe " + std::string(kGdn) + ": ONEBIT_GDN_PREFILL=3\n");
  EXPECT_EQ(r.out.rfind("ONEBIT_GDN_PREFILL=3 " + fake_backend_binary(), 0), 0u) << r.out;
  EXPECT_NE(r.out.find(" --jinja -ub 512\n"), std::string::npos) << r.out;

  // Another file (another size) does not get the store's recipe; the built-in one still applies.
  r = serve({"--dry-run", "--device", "cuda", "-m", other}, {{"FAKE_DEVICES", kH200}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "1bit serve: recipe " + std::string(kGdn) + ": ONEBIT_GDN_PREFILL=3\n");

  // --no-recipes turns every layer off, the store included.
  std::vector<std::string> none = dry;
  none.push_back("--no-recipes");
  r = serve(none, {{"FAKE_DEVICES", kH200}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out.find("-ub"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("ONEBIT_GDN_PREFILL"), std::string::npos) << r.out;
}

// On the shipped model and the CPU: the store, then --recipes FILE in the built-in set's place,
// and a store entry with a built-in recipe's id replaces it.
TEST_F(RecipesUserStore, TheStoreComesBeforeRecipesFileAndReplacesAnIdItShares) {
  write_store(json({{"recipes",
                     {bound_to_here("tiny-cpu", tiny(), {{"device", {"cpu"}}}, {{"args", {"-ub", "256"}}}),
                      {{"id", "file-too"}, {"env", {{"ONEBIT_FROM", "store"}}}, {"measured", "test"}}}}})
                  .dump());
  write_file(dir_.file("file.json"), R"({"recipes": [
    {"id": "file-too", "env": {"ONEBIT_FROM": "file"}, "measured": "test"},
    {"id": "file-only", "args": ["-b", "128"], "measured": "test"}]})");
  RunResult r = serve({"--dry-run", "--device", "cpu", "-m", tiny(), "--recipes", dir_.file("file.json")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err,
            "1bit serve: recipe tiny-cpu: -ub 256\n"
            "1bit serve: recipe file-too: ONEBIT_FROM=store\n"
            "1bit serve: recipe file-only: -b 128\n");
  EXPECT_NE(r.out.find(" --jinja -ub 256 -b 128\n"), std::string::npos) << r.out;

  // A real launch runs what the dry run printed.
  std::filesystem::remove(dir_.file("record.json"));
  Subprocess p({onebit_binary(), "serve", "--llama-server", fake_backend_binary(), "--port", "0", "--device", "cpu", "-m",
                tiny(), "--recipes", dir_.file("file.json")},
               env(), dir_.path());
  ASSERT_TRUE(p.wait_for_stderr("ready on", std::chrono::seconds(10))) << p.err();
  const json rec = json::parse(read_file(dir_.file("record.json")));
  const std::vector<std::string> argv = rec["argv"];
  EXPECT_EQ(std::vector<std::string>(argv.end() - 4, argv.end()), (std::vector<std::string>{"-ub", "256", "-b", "128"}));
  EXPECT_EQ(rec["env"]["ONEBIT_FROM"], "store");
}

// A store that is not valid stops every command that reads it with one line naming the file,
// before anything starts; --no-recipes does not read it.
TEST_F(RecipesUserStore, AMalformedStoreIsOneLineAndStartsNothing) {
  write_store(R"({"recipes": [{"id": "x", "match": {"engine": ["nope"]}, "args": ["-ub", "1"], "measured": "m"}]})");
  const std::string problem =
      store() + ": recipe \"x\": match.engine: \"nope\" is not an engine build key (16 hex digits, engine.json's \"key\")\n";
  for (bool dry : {false, true}) {
    std::vector<std::string> args = {"-m", tiny(), "--device", "cpu"};
    if (dry) args.push_back("--dry-run");
    RunResult r = serve(args);
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.err, "1bit serve: " + problem);
    EXPECT_EQ(r.out, "");
  }
  EXPECT_FALSE(engine_started());
  RunResult facts = onebit({"facts", tiny()});
  EXPECT_EQ(facts.code, 1);
  EXPECT_EQ(facts.err, "1bit facts: " + problem);
  RunResult list = onebit({"recipes", "list"});
  EXPECT_EQ(list.code, 1);
  EXPECT_EQ(list.err, "1bit recipes: " + problem);
  RunResult lemonade = onebit({"lemonade", "--port", "0", "--llama-server", fake_backend_binary(), "--state-dir",
                               dir_.file("state")});
  EXPECT_EQ(lemonade.code, 1);
  EXPECT_EQ(lemonade.err, "1bit lemonade: " + problem);

  write_store("{\"recipes\": [");
  RunResult json_error = serve({"-m", tiny(), "--device", "cpu", "--dry-run"});
  EXPECT_EQ(json_error.code, 1);
  EXPECT_EQ(json_error.err.rfind("1bit serve: " + store() + ": invalid JSON: parse error at line 1", 0), 0u) << json_error.err;
  EXPECT_EQ(std::count(json_error.err.begin(), json_error.err.end(), '\n'), 1);

  RunResult off = serve({"-m", tiny(), "--device", "cpu", "--dry-run", "--no-recipes"});
  EXPECT_EQ(off.code, 0) << off.err;
  EXPECT_EQ(off.err, "");
}

TEST_F(RecipesUserStore, FactsShowsTheStoresRecipes) {
  write_store(json({{"recipes",
                     {bound_to_here("tiny-cpu", tiny(), {{"device", {"cpu"}}}, {{"args", {"-ub", "256"}}}),
                      {{"id", "elsewhere"}, {"match", {{"cpu", {"Some Other CPU"}}}}, {"args", {"-b", "64"}}, {"measured", "t"}}}}})
                  .dump());
  RunResult text = onebit({"facts", tiny()});
  ASSERT_EQ(text.code, 0) << text.err;
  const std::string expect_cpu = cpu_model().empty() ? "unknown" : cpu_model();
  EXPECT_NE(text.out.find("\nrecipes, judged for serving on this machine without a drafter:\n"
                          "  user store " + store() + "\n"
                          "    tiny-cpu: applies on device cpu\n"
                          "    elsewhere: does not apply: cpu " + expect_cpu + " not in [Some Other CPU]\n"
                          "  built-in recipes\n"),
            std::string::npos)
      << text.out;
  RunResult j = onebit({"facts", tiny(), "--json"});
  ASSERT_EQ(j.code, 0) << j.err;
  const json f = json::parse(j.out);
  EXPECT_EQ(f["recipe_layers"][0], json({{"layer", "user"}, {"origin", store()}}));
  EXPECT_EQ(f["recipe_layers"][1], json({{"layer", "built-in"}, {"origin", "built-in recipes"}}));
  EXPECT_EQ(f["recipes"][0]["id"], "tiny-cpu");
  EXPECT_EQ(f["recipes"][0]["layer"], "user");
  EXPECT_EQ(f["recipes"][0]["applies"], true);
  EXPECT_EQ(f["recipes"][1]["applies"], false);
  EXPECT_EQ(f["recipes"][2]["layer"], "built-in");
}

TEST_F(RecipesUserStore, PathFollowsTheEnvironment) {
  RunResult r = onebit({"recipes", "path"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, store() + "\n");
  for (const char* ignored : {"", "relative/config"}) {
    r = onebit({"recipes", "path"}, {{"XDG_CONFIG_HOME", ignored}, {"HOME", dir_.file("home")}});
    EXPECT_EQ(r.out, dir_.file("home") + "/.config/1bit/recipes.json\n") << ignored;
  }
  r = onebit({"recipes", "path"}, {{"XDG_CONFIG_HOME", ""}, {"HOME", ""}});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "1bit recipes: no user recipe store: neither XDG_CONFIG_HOME nor HOME is an absolute path\n");
}

TEST_F(RecipesUserStore, ListShowsEveryLayer) {
  RunResult r = onebit({"recipes", "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("user store " + store() + ": none (no such file)\n" + builtin_heading() + "  " + kGdn +
                            "\n    adds   ONEBIT_GDN_PREFILL=3\n    where  device cuda (gpu NVIDIA H200); architecture qwen35;",
                        0),
            0u)
      << r.out;

  write_store(json({{"recipes",
                     {{{"id", "mine"}, {"match", {{"architecture", {"qwen3"}}, {"device", {"cpu"}}}}, {"args", {"-ub", "256"}},
                       {"measured", "t"}},
                      {{"id", kGdn}, {"env", {{"ONEBIT_GDN_PREFILL", "2"}}}, {"measured", "t"}}}}})
                  .dump());
  r = onebit({"recipes", "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("user store " + store() + ": 2 recipes\n"
                        "  mine\n    adds   -ub 256\n    where  device cpu; architecture qwen3\n"
                        "  " + kGdn + "\n    adds   ONEBIT_GDN_PREFILL=2\n    where  anywhere\n" +
                        builtin_heading() + "  " + kGdn + "\n",
                        0),
            0u)
      << r.out;
  EXPECT_NE(r.out.find("    note   replaced by the recipe of the same id in the user store " + store() + "\n"),
            std::string::npos)
      << r.out;

  // With a model: whether each applies on this machine, and why not.
  r = onebit({"recipes", "list", "-m", tiny()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("model " + tiny() + ": judged on this machine without a drafter\n", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("  mine\n    adds   -ub 256\n    where  device cpu; architecture qwen3\n    model  applies on device cpu\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("    model  does not apply: replaced by the recipe of the same id in the user store"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("    model  does not apply: architecture qwen3 not in [llama]\n"), std::string::npos) << r.out;

  // --recipes FILE in the built-in set's place, as serve takes it.
  write_file(dir_.file("file.json"), R"({"recipes": [{"id": "f1", "args": ["-b", "64"], "measured": "t"}]})");
  r = onebit({"recipes", "list", "--recipes", dir_.file("file.json")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("recipes file " + dir_.file("file.json") + ": 1 recipe\n  f1\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("built-in"), std::string::npos) << r.out;
}

TEST_F(RecipesUserStore, ShowPrintsTheWholeEntryWithItsLayer) {
  const json mine = {{"id", "mine"}, {"match", {{"size_bytes", {1, 2}}}}, {"args", {"-ub", "256"}}, {"why", "w"}, {"measured", "t"}};
  write_store(json({{"recipes", {mine, {{"id", kGdn}, {"env", {{"ONEBIT_GDN_PREFILL", "2"}}}, {"measured", "t"}}}}}).dump());
  RunResult r = onebit({"recipes", "show", "mine"});
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j, json({{"id", "mine"}, {"layer", "user"}, {"file", store()}, {"recipe", mine}}));
  EXPECT_EQ(r.out.rfind("{\n  \"id\": \"mine\",\n  \"layer\": \"user\",\n", 0), 0u) << r.out;

  // The store's entry is the one that applies; it says which it replaces.
  j = json::parse(onebit({"recipes", "show", kGdn}).out);
  EXPECT_EQ(j["layer"], "user");
  EXPECT_EQ(j["recipe"]["env"]["ONEBIT_GDN_PREFILL"], "2");
  EXPECT_EQ(j["replaces"], json::parse(R"([{"layer": "built-in", "file": "built-in recipes"}])"));

  r = onebit({"recipes", "show", "llama-cuda-draft-onebit-gemv-q4_0-auto"});
  ASSERT_EQ(r.code, 0) << r.err;
  j = json::parse(r.out);
  EXPECT_EQ(j["layer"], "built-in");
  EXPECT_EQ(j["file"], "built-in recipes");
  EXPECT_EQ(j["recipe"]["env"]["ONEBIT_GEMV_Q4_0"], "auto");
  EXPECT_FALSE(j.contains("replaces"));

  r = onebit({"recipes", "show", "nope"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "1bit recipes: no recipe \"nope\" (1bit recipes list shows them all)\n");
  EXPECT_EQ(r.out, "");
}

TEST_F(RecipesUserStore, RemoveTakesOnlyFromTheStore) {
  write_store(json({{"about", "remembered"},
                    {"recipes",
                     {{{"id", "mine"}, {"args", {"-ub", "256"}}, {"measured", "t"}},
                      {{"id", kGdn}, {"env", {{"ONEBIT_GDN_PREFILL", "2"}}}, {"measured", "t"}}}}})
                  .dump());
  chmod(store().c_str(), 0600);
  RunResult r = onebit({"recipes", "remove", "llama-cuda-draft-onebit-gemv-q4_0-auto"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "1bit recipes: \"llama-cuda-draft-onebit-gemv-q4_0-auto\" is a built-in recipe: only the user store's "
                   "recipes can be removed (" + store() + "); --no-recipes turns every recipe off\n");
  r = onebit({"recipes", "remove", "nope"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "1bit recipes: no recipe \"nope\" in the user store (" + store() + ")\n");

  // A store entry with a built-in id goes, and the built-in recipe applies again.
  r = onebit({"recipes", "remove", kGdn});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "removed recipe " + std::string(kGdn) + " from " + store() +
                       "; the built-in recipe of the same id applies again\n");
  EXPECT_EQ(json::parse(onebit({"recipes", "show", kGdn}).out)["layer"], "built-in");
  r = onebit({"recipes", "remove", "mine"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "removed recipe mine from " + store() + "\n");
  // The last one gone leaves a valid store, with its mode; the list says it is empty.
  EXPECT_EQ(json::parse(read_file(store())), json({{"about", "remembered"}, {"recipes", json::array()}}));
  struct stat st{};
  ASSERT_EQ(stat(store().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_.file("config/1bit")), {}), 1);
  r = onebit({"recipes", "list"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("user store " + store() + ": none\n" + builtin_heading(), 0), 0u) << r.out;
  r = onebit({"recipes", "remove", "mine"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "1bit recipes: no recipe \"mine\" in the user store (" + store() + ")\n");

  // No store at all.
  std::filesystem::remove(store());
  r = onebit({"recipes", "remove", "mine"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "1bit recipes: no recipe \"mine\" in the user store (" + store() + ": no such file)\n");
}

TEST(RecipesCommand, HelpAndBadInput) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{onebit_binary(), "recipes", "--help"},
                                               {onebit_binary(), "help", "recipes"},
                                               {onebit_binary(), "recipes", "list", "--help"}}) {
    RunResult help = run(args);
    EXPECT_EQ(help.code, 0);
    EXPECT_EQ(help.out.rfind("usage: 1bit recipes <list|show|remove|path>", 0), 0u) << help.out;
    for (const char* s : {"$XDG_CONFIG_HOME/1bit/recipes.json", "  list [-m MODEL] [--recipes FILE]", "  show ID",
                          "  remove ID", "  path", "-m, --model MODEL"})
      EXPECT_NE(help.out.find(s), std::string::npos) << s;
  }
  struct Case {
    std::vector<std::string> args;
    std::string err;
  };
  for (const Case& c : std::vector<Case>{
           {{}, "expected a subcommand: list, show, remove or path (see 1bit recipes --help)"},
           {{"lsit"}, "unknown subcommand \"lsit\" (list, show, remove or path; see 1bit recipes --help)"},
           {{"show"}, "show needs a recipe ID (1bit recipes list shows them)"},
           {{"remove"}, "remove needs a recipe ID (1bit recipes list shows them)"},
           {{"show", "a", "b"}, "unexpected argument \"b\""},
           {{"path", "x"}, "unexpected argument \"x\""},
           {{"path", "-m", "x"}, "unknown option -m"},
           {{"list", "-m"}, "-m needs a value (MODEL)"},
           {{"list", "-m", "/nonexistent.gguf"}, "/nonexistent.gguf: No such file or directory"},
       }) {
    std::vector<std::string> args = {onebit_binary(), "recipes"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    RunResult r = run(args);
    EXPECT_EQ(r.code, 1) << c.err;
    EXPECT_EQ(r.err, "1bit recipes: " + c.err + "\n");
    EXPECT_EQ(r.out, "");
  }
}

}  // namespace
}  // namespace onebit::testing
