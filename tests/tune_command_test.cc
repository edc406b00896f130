// `1bit tune` end to end against the fake engine, whose speeds follow its arguments: the search
// finds the value that is faster, writes it to the user's recipe store (a private
// XDG_CONFIG_HOME) where serve then applies it, keeps to its budget, stops every serve on Ctrl-C,
// never keeps a value that changes the output, and lets the goal decide a trade-off.
#include <signal.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "subprocess.h"
#include "test_support.h"

namespace onebit::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class TuneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_.file("model.gguf");
    write_gguf(model_, {{"general.architecture", std::string("llama")}});
  }
  std::map<std::string, std::string> env(std::map<std::string, std::string> extra = {}) {
    extra["ONEBIT_LLAMA_SERVER"] = fake_backend_binary();
    extra["FAKE_CHUNK_MS"] = "1";
    // A first token as slow as a small model's on a CPU, so that time to first token can count.
    extra["FAKE_FIRST_TOKEN_MS"] = "40";
    extra["XDG_CONFIG_HOME"] = dir_.file("config");
    return extra;
  }
  std::vector<std::string> tune(std::vector<std::string> extra) {
    std::vector<std::string> a = {onebit_binary(), "tune", "-m", model_, "--log-dir", dir_.file("logs"),
                                  "--prompt-reps", "2", "--decode-reps", "1", "--decode-tokens", "8"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  std::string store() { return dir_.file("config/1bit/recipes.json"); }
  TempDir dir_;
  std::string model_;
};

TEST_F(TuneTest, TriesAreSearchedAndTheWinnerIsRemembered) {
  RunResult r = run(tune({"--knobs", "none", "--try", "-ub 1024", "--try", "-b 256"}), env({{"FAKE_FAST_FLAG", "-ub"}}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("  try: kept -ub 1024: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    -ub 1024: wins (2 rounds; "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    -b 256: no win (2 rounds; "), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("1bit tune: 1 recipe written to " + store()), std::string::npos) << r.err;
  json file = json::parse(read_file(store()));
  ASSERT_EQ(file["recipes"].size(), 1u);
  json entry = file["recipes"][0];
  EXPECT_EQ(entry["id"], "llama-cpu-ub-1024");
  EXPECT_EQ(entry["args"], json({"-ub", "1024"}));
  EXPECT_EQ(entry["match"]["device"], json({"cpu"}));
  EXPECT_EQ(entry["match"]["architecture"], json({"llama"}));
  EXPECT_TRUE(entry["match"].contains("engine"));
  EXPECT_NE(entry["measured"].get<std::string>().find("model.gguf, "), std::string::npos);
  EXPECT_NE(entry["measured"].get<std::string>().find("decode-code 100 -> 200 tok/s"), std::string::npos) << entry["measured"];
  // Every launch applies it now, before the built-in recipes; --no-recipes applies none.
  RunResult dry = run({onebit_binary(), "serve", "-m", model_, "--dry-run", "--device", "cpu"}, env());
  EXPECT_EQ(dry.code, 0) << dry.err;
  EXPECT_EQ(dry.err, "1bit serve: recipe llama-cpu-ub-1024: -ub 1024\n");
  RunResult none = run({onebit_binary(), "serve", "-m", model_, "--dry-run", "--device", "cpu", "--no-recipes"}, env());
  EXPECT_EQ(none.err, "");
  EXPECT_EQ(none.out.find("-ub 1024"), std::string::npos) << none.out;
  // Tuning again starts from the remembered launch: the value is in it already, so nothing wins.
  RunResult again = run(tune({"--knobs", "none", "--try", "-ub 1024"}), env({{"FAKE_FAST_FLAG", "-ub"}}));
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("  try: kept the base: no value won"), std::string::npos) << again.out;
  EXPECT_EQ(json::parse(read_file(store()))["recipes"].size(), 1u);
  // From a launch without recipes it wins again: --write puts it in a file of its own, --no-save
  // prints it only.
  RunResult written = run(tune({"--no-recipes", "--knobs", "none", "--try", "-ub 1024", "--write", dir_.file("mine.json")}),
                          env({{"FAKE_FAST_FLAG", "-ub"}}));
  ASSERT_EQ(written.code, 0) << written.err;
  EXPECT_EQ(json::parse(read_file(dir_.file("mine.json")))["recipes"].size(), 1u);
  RunResult unsaved = run(tune({"--no-recipes", "--knobs", "none", "--try", "-ub 1024", "--no-save"}),
                          env({{"FAKE_FAST_FLAG", "-ub"}}));
  ASSERT_EQ(unsaved.code, 0) << unsaved.err;
  EXPECT_NE(unsaved.out.find("\"id\": \"llama-cpu-ub-1024\""), std::string::npos) << unsaved.out;
  EXPECT_EQ(json::parse(read_file(store()))["recipes"].size(), 1u);
}

// From a poor launch (-t 1, given as on llama-server's command line) the threads knob finds -t 2;
// the launch's own -t keeps precedence, so tune says that a launch without it gets the recipe.
TEST_F(TuneTest, TheSpaceFindsMoreThreads) {
  RunResult r = run(tune({"--knobs", "threads", "--json", dir_.file("t.json"), "--html", dir_.file("t.html"), "-t", "1"}),
                    env({{"FAKE_FAST_DECODE_ARGS", "-t 2"}}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("  threads: kept -t 2: "), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("sets -t, which this launch sets itself; a launch without it gets the recipe"), std::string::npos)
      << r.err;
  RunResult dry = run({onebit_binary(), "serve", "-m", model_, "--dry-run", "--device", "cpu"}, env());
  EXPECT_NE(dry.err.find(": -t 2\n"), std::string::npos) << dry.err;
  // The record keeps every sample and the search path; the page shows the path and the charts.
  json rec = json::parse(read_file(dir_.file("t.json")));
  EXPECT_EQ(rec["tune"]["goal"], "chat");
  EXPECT_EQ(rec["tune"]["knobs"][0]["knob"], "threads");
  EXPECT_EQ(rec["tune"]["knobs"][0]["winner"], "-t 2");
  EXPECT_GE(rec["samples"].size(), 20u);
  const std::string html = read_file(dir_.file("t.html"));
  EXPECT_NE(html.find("<h2>Search path</h2>"), std::string::npos);
  EXPECT_NE(html.find("<svg"), std::string::npos);
}

TEST_F(TuneTest, AValueThatChangesTheOutputNeverBecomesARecipe) {
  RunResult r = run(tune({"--knobs", "kv-cache-type"}),
                    env({{"FAKE_FAST_DECODE_ARGS", "-ctk q8_0"}, {"FAKE_ALTER_ARGS", "-ctk q8_0"}}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("-ctk q8_0 -ctv q8_0: changes the greedy output"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("nothing to write"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(store()));
  // The same speed with the same answers is kept.
  RunResult same = run(tune({"--knobs", "kv-cache-type"}), env({{"FAKE_FAST_DECODE_ARGS", "-ctk q8_0"}}));
  ASSERT_EQ(same.code, 0) << same.err;
  EXPECT_NE(same.out.find("kv-cache-type: kept -ctk q8_0 -ctv q8_0"), std::string::npos) << same.out;
}

// Decode twice as fast, prompt half as fast: chat keeps it and says what it costs; balanced does not.
TEST_F(TuneTest, TheGoalDecidesATradeOff) {
  auto trade = env({{"FAKE_FAST_DECODE_ARGS", "-bs"}, {"FAKE_SLOW_PROMPT_ARGS", "-bs"}});
  RunResult chat = run(tune({"--knobs", "backend-sampling", "--no-save"}), trade);
  ASSERT_EQ(chat.code, 0) << chat.err;
  EXPECT_NE(chat.out.find("backend-sampling: kept -bs"), std::string::npos) << chat.out;
  EXPECT_NE(chat.out.find("it costs prompt -50.0%"), std::string::npos) << chat.out;
  RunResult balanced = run(tune({"--knobs", "backend-sampling", "--no-save", "--goal", "balanced"}), trade);
  ASSERT_EQ(balanced.code, 0) << balanced.err;
  EXPECT_NE(balanced.out.find("backend-sampling: kept the base: no value won"), std::string::npos) << balanced.out;
}

TEST_F(TuneTest, TheBudgetHolds) {
  // Each measurement takes about a second (the fake engine loads for 800 ms); every knob that
  // applies would take far longer than the budget.
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r = run(tune({"--budget", "8s", "--no-save"}), env({{"FAKE_LOAD_MS", "800"}}), 120s);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(spent: the search ended early)"), std::string::npos) << r.out;
  // The budget plus one measurement, and the start and end of the process.
  EXPECT_LT(took, 8 + 4) << r.out;
}

TEST_F(TuneTest, CtrlCLeavesNoServeAndNoEngine) {
  Subprocess t(tune({"--no-save"}), env({{"FAKE_CHUNKS", "400"}, {"FAKE_CHUNK_MS", "20"}}), dir_.path());
  ASSERT_TRUE(t.wait_for_stderr("threads, round 1/4: the base", 20s)) << t.err();
  for (int i = 0; i < 100 && processes_mentioning(model_).size() < 2; ++i) std::this_thread::sleep_for(50ms);
  auto running = processes_mentioning(model_);
  ASSERT_GE(running.size(), 2u);  // serve and its engine
  std::this_thread::sleep_for(500ms);
  t.signal(SIGINT);
  auto code = t.wait(30s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 130) << t.err();
  EXPECT_NE(t.err().find("interrupted; every serve it started is stopped"), std::string::npos) << t.err();
  for (pid_t p : running) EXPECT_TRUE(wait_process_gone(p, 5s)) << p;
  EXPECT_TRUE(processes_mentioning(model_).empty());
}

TEST_F(TuneTest, BadInput) {
  auto error = [&](std::vector<std::string> args) {
    RunResult r = run(tune(args), env());
    EXPECT_EQ(r.code, 1) << r.err;
    return r.err;
  };
  EXPECT_EQ(error({"--budget", "soon"}), "1bit tune: --budget: \"soon\" is not a duration (90s, 10m, 1h, 1h30m, or seconds)\n");
  EXPECT_EQ(error({"--goal", "fast"}), "1bit tune: --goal: \"fast\" is not one of chat, prompt, balanced\n");
  EXPECT_NE(error({"--knobs", "colour"}).find("1bit tune: --knobs: unknown knob \"colour\" (known: threads, "), std::string::npos);
  EXPECT_EQ(error({"--knobs", "none"}), "1bit tune: nothing to search: no --try, and no knob of the tune space applies here\n");
  EXPECT_NE(error({"--try", "--ubatchsize 1"}).find("\"--ubatchsize\" is not a llama-server option"), std::string::npos);
  EXPECT_EQ(error({"--rounds", "1"}), "1bit tune: --rounds: 1 is out of range [2, 100]\n");
  EXPECT_EQ(error({"--port", "9"}), "1bit tune: unknown option --port\n");
  EXPECT_EQ(error({"--write", "x.json", "--no-save"}), "1bit tune: --write and --no-save exclude each other\n");
}

}  // namespace
}  // namespace onebit::testing
