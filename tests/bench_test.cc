// `1bit bench` end to end: against the fake engine with fixed timings (every row, "+0.0%", the
// record's sample counts, the HTML, the lock, Ctrl-C, no serve left behind, the long prompt cut to
// the context), and against the real engine on a random-weight model.
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/synth.h"
#include "subprocess.h"
#include "test_support.h"

namespace onebit::testing {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

class BenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_.file("model.gguf");
    write_gguf(model_, {{"general.architecture", std::string("llama")}});
  }
  std::map<std::string, std::string> fake(std::map<std::string, std::string> extra = {}) {
    extra["ONEBIT_LLAMA_SERVER"] = fake_backend_binary();
    extra["FAKE_CHUNK_MS"] = extra.count("FAKE_CHUNK_MS") ? extra["FAKE_CHUNK_MS"] : "1";
    return extra;
  }
  std::vector<std::string> bench(std::vector<std::string> extra) {
    std::vector<std::string> a = {onebit_binary(), "bench", "-m", model_, "--log-dir", dir_.file("logs"),
                                  "--prompt-reps", "3", "--decode-reps", "2", "--decode-tokens", "8"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  TempDir dir_;
  std::string model_;
};

TEST_F(BenchTest, SelfTestAgainstFixedTimings) {
  RunResult r = run(bench({"--config", "base=", "--config", "other=-c 512", "--rounds", "2", "--json",
                           dir_.file("r.json"), "--html", dir_.file("r.html")}),
                    fake());
  ASSERT_EQ(r.code, 0) << r.err;
  // Both configurations see the same fixed timings: every non-baseline median is +0.0%.
  std::istringstream lines(r.out);
  std::string header, base, other, extra;
  std::getline(lines, header), std::getline(lines, base), std::getline(lines, other);
  EXPECT_FALSE(std::getline(lines, extra)) << r.out;
  for (const char* m : {"prompt tok/s", "decode-code tok/s", "decode-prose tok/s", "decode-short tok/s", "ttft ms"})
    EXPECT_NE(header.find(m), std::string::npos) << m;
  EXPECT_EQ(base.rfind("base ", 0), 0u);
  EXPECT_NE(base.find("3000.0 / 3000.0"), std::string::npos) << base;
  EXPECT_EQ(base.find("%"), std::string::npos);
  EXPECT_EQ(other.rfind("other ", 0), 0u);
  EXPECT_NE(other.find("3000.0 / 3000.0 (+0.0%)"), std::string::npos) << other;
  EXPECT_NE(other.find("100.0 / 100.0 (+0.0%)"), std::string::npos) << other;

  json rec = json::parse(read_file(dir_.file("r.json")));
  EXPECT_EQ(rec["baseline"], "base");
  EXPECT_EQ(rec["rounds"], 2);
  EXPECT_EQ(rec["configs"][1]["args"], json({"-c", "512"}));
  EXPECT_EQ(rec["facts"]["architecture"], "llama");
  EXPECT_TRUE(rec["machine"].contains("cpu"));
  EXPECT_EQ(rec["machine"]["engine"]["commit"], "80fb11ac73e66d89eae2c6a91d8a77428fa733ed");
  std::map<std::pair<std::string, std::string>, int> counts;
  for (const auto& s : rec["samples"]) counts[{s["config"], s["metric"]}]++;
  for (const char* c : {"base", "other"}) {
    EXPECT_EQ((counts[{c, "prompt"}]), 2 * 3) << c;
    for (const char* m : {"decode-code", "decode-prose", "decode-short"}) EXPECT_EQ((counts[{c, m}]), 2 * 2) << c << m;
    EXPECT_EQ((counts[{c, "ttft"}]), 2 * 3 * 2) << c;
    EXPECT_EQ((counts[{c, "acceptance"}]), 0) << c;  // no drafter, no acceptance
  }
  // Rounds interleave: base, other, base, other, each with its own serve and log.
  std::vector<std::string> order;
  for (const auto& s : rec["samples"])
    if (s["metric"] == "prompt" && (order.empty() || order.back() != s["config"].get<std::string>() + std::to_string(s["round"].get<int>())))
      order.push_back(s["config"].get<std::string>() + std::to_string(s["round"].get<int>()));
  EXPECT_EQ(order, (std::vector<std::string>{"base1", "other1", "base2", "other2"}));
  for (const char* log : {"base-round1.log", "other-round1.log", "base-round2.log", "other-round2.log"})
    EXPECT_NE(read_file(dir_.file("logs/") + log).find("1bit serve: ready on"), std::string::npos) << log;

  std::string html = read_file(dir_.file("r.html"));
  EXPECT_EQ(html.rfind("<!doctype html>", 0), 0u);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);  // nothing to fetch: it opens offline
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_TRUE(processes_mentioning(model_).empty());
}

TEST_F(BenchTest, BadInput) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--config", "nameonly"}, "--config \"nameonly\": expected NAME=ARGS"},
           {{"--config", "a=", "--config", "a=-c 1"}, "--config: the name \"a\" is used twice"},
           {{"--config", "a=-m x.gguf"}, "--config a: -m is set by bench for every configuration"},
           {{"--config", "a=--api-key k"}, "--config a: --api-key would lock bench's requests out"},
           {{"--config", "a=ONEBIT_API_KEY=k"}, "--config a: ONEBIT_API_KEY would lock bench's requests out"},
           {{"--config", "a='open"}, "unterminated single quote in: 'open"},
           {{}, "at least one --config NAME=ARGS is needed (the first is the baseline)"},
           {{"--config", "a=", "--rounds", "0"}, "--rounds: 0 is out of range"},
       }) {
    RunResult r = run(bench(c.args), fake());
    EXPECT_EQ(r.code, 1) << c.message;
    EXPECT_NE(r.err.find("1bit bench: " + c.message), std::string::npos) << r.err;
  }
  RunResult none = run(bench({"--config", "a="}), fake({{"FAKE_NO_TIMINGS", "1"}}));
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.err.find("the engine's response has no \"timings\" object"), std::string::npos) << none.err;
  RunResult failed = run(bench({"--config", "a="}), fake({{"FAKE_STREAM_ERROR", "the KV cache is full"}}));
  EXPECT_EQ(failed.code, 1);
  EXPECT_NE(failed.err.find("the engine answered with an error: the KV cache is full"), std::string::npos)
      << failed.err;
  RunResult dead = run(bench({"--config", "a="}), fake({{"FAKE_EXIT_DURING_LOAD", "4"}}));
  EXPECT_EQ(dead.code, 1);
  EXPECT_NE(dead.err.find("config a: serve exited with code 1 before it was ready"), std::string::npos) << dead.err;
  EXPECT_TRUE(processes_mentioning(model_).empty());
}

TEST_F(BenchTest, TheLockSerializesRuns) {
  const std::string lock = dir_.file("box.lock");
  int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);  // not inherited by the bench
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  Subprocess b(bench({"--config", "a=", "--rounds", "1", "--lock", lock}), fake(), dir_.path());
  ASSERT_TRUE(b.wait_for_stderr("1bit bench: waiting for lock " + lock, 10s)) << b.err();
  std::this_thread::sleep_for(500ms);
  EXPECT_FALSE(b.wait(0ms).has_value());
  EXPECT_TRUE(child_pids(b.pid()).empty());  // nothing started while waiting
  ::close(fd);
  EXPECT_EQ(b.wait(60s), 0) << b.err();
}

TEST_F(BenchTest, CtrlCStopsEveryServe) {
  Subprocess b(bench({"--config", "a=", "--rounds", "3"}), fake({{"FAKE_CHUNKS", "400"}, {"FAKE_CHUNK_MS", "20"}}),
               dir_.path());
  ASSERT_TRUE(b.wait_for_stderr("round 1/3, a: starting serve", 10s)) << b.err();
  for (int i = 0; i < 100 && processes_mentioning(model_).size() < 2; ++i) std::this_thread::sleep_for(50ms);
  auto running = processes_mentioning(model_);
  ASSERT_GE(running.size(), 2u);  // serve and its engine
  std::this_thread::sleep_for(1s);
  b.signal(SIGINT);
  auto code = b.wait(30s);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 130) << b.err();
  EXPECT_NE(b.err().find("interrupted; every serve it started is stopped"), std::string::npos) << b.err();
  for (pid_t p : running) EXPECT_TRUE(wait_process_gone(p, 5s)) << p;
}

// A configuration led by VAR=VALUE words runs with that environment, down to the engine: an
// engine switch against its absence in one run.
TEST_F(BenchTest, AConfigurationCarriesItsEnvironment) {
  RunResult r = run(bench({"--config", "base=", "--config", "switched=ONEBIT_TEST_SWITCH=2 -c 512", "--rounds", "1",
                           "--json", dir_.file("r.json")}),
                    fake({{"FAKE_FAST_ENV", "ONEBIT_TEST_SWITCH"}}));
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string header, base, switched;
  std::getline(lines, header), std::getline(lines, base), std::getline(lines, switched);
  EXPECT_NE(base.find("3000.0 / 3000.0"), std::string::npos) << base;
  EXPECT_NE(switched.find("6000.0 / 6000.0 (+100.0%)"), std::string::npos) << switched;
  json rec = json::parse(read_file(dir_.file("r.json")));
  EXPECT_EQ(rec["configs"][1]["env"], json({{"ONEBIT_TEST_SWITCH", "2"}}));
  EXPECT_EQ(rec["configs"][1]["args"], json({"-c", "512"}));
  EXPECT_EQ(rec["configs"][1]["command"], "ONEBIT_TEST_SWITCH=2 -c 512");
  EXPECT_TRUE(rec["configs"][0]["env"].empty());
}

// The long prompt must fit the context the engine has: cut to it, and said so.
TEST_F(BenchTest, TheLongPromptIsCutToTheContext) {
  RunResult r = run(bench({"--config", "a=", "--rounds", "1", "--json", dir_.file("r.json")}), fake({{"FAKE_CTX", "300"}}));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("note: the long prompt was shortened from "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" tokens to fit the engine's context of 300"), std::string::npos) << r.out;
  json rec = json::parse(read_file(dir_.file("r.json")));
  EXPECT_LE(rec["long_prompt"]["tokens"].get<int>(), 300 - 16);
  EXPECT_GT(rec["long_prompt"]["tokens"].get<int>(), 200);
  // A context that holds it leaves it whole.
  RunResult whole = run(bench({"--config", "a=", "--rounds", "1"}), fake({{"FAKE_CTX", "100000"}}));
  ASSERT_EQ(whole.code, 0) << whole.err;
  EXPECT_EQ(whole.out.find("shortened"), std::string::npos) << whole.out;
}

TEST(BenchEngine, RealEngineOnARandomModel) {
  TempDir dir;
  SynthOptions o;
  o.vocab_dir = vocab_dir();
  write_synth_model(*find_synth_shape("tiny-llama"), o, dir.file("tiny.gguf"));
  RunResult r = run({onebit_binary(), "bench", "-m", dir.file("tiny.gguf"), "--config", "base=", "--config",
                     "small-ub=-- -ub 32", "--rounds", "2", "--prompt-reps", "2", "--decode-reps", "1",
                     "--decode-tokens", "32", "--prompt-chars", "2000", "--log-dir", dir.file("logs"), "--json",
                     dir.file("r.json")},
                    {{"ONEBIT_API_KEY", "the-users-key"}}, 300s);  // serve must not inherit it
  ASSERT_EQ(r.code, 0) << r.err;
  json rec = json::parse(read_file(dir.file("r.json")));
  for (const auto& s : rec["samples"]) EXPECT_GT(s["value"].get<double>(), 0) << s.dump();
  EXPECT_EQ(rec["summary"]["base"]["prompt"]["n"], 4);
  EXPECT_GT(rec["summary"]["base"]["decode-code"]["median"].get<double>(), 0);
  EXPECT_NE(r.out.find("small-ub"), std::string::npos);
}

// Speculative decoding on the shipped pair: greedy answers token for token the same as without the
// drafter on every bench prompt, and the drafter's acceptance, tokens per verification step and
// step cost (against the plain configuration's decode step) in the table and the record.
TEST(BenchEngine, ADrafterKeepsTheGreedyAnswersAndShowsItsSteps) {
  TempDir dir;
  const std::string models = source_dir() + "/models/";
  RunResult r = run({onebit_binary(), "bench", "-m", models + "1bit-tiny-32m-q8_0.gguf", "--config", "plain=", "--config",
                     "draft=--draft " + models + "1bit-tiny-draft-6m-q8_0.gguf", "--rounds", "1", "--prompt-reps", "1",
                     "--decode-reps", "1", "--decode-tokens", "64", "--log-dir", dir.file("logs"), "--json", dir.file("r.json")},
                    {}, 300s);
  ASSERT_EQ(r.code, 0) << r.err;
  json rec = json::parse(read_file(dir.file("r.json")));
  ASSERT_EQ(rec["answers"].size(), 6u);
  for (const auto& a : rec["answers"]) EXPECT_FALSE(a["text"].get<std::string>().empty()) << a.dump();
  const json& draft = rec["summary"]["draft"];
  EXPECT_GT(draft["acceptance"]["median"].get<double>(), 0);
  EXPECT_GE(draft["tokens-per-step"]["median"].get<double>(), 1);
  EXPECT_GT(draft["step-time"]["median"].get<double>(), 0);
  EXPECT_EQ(draft["step_cost"]["plain"], "plain");
  EXPECT_GT(draft["step_cost"]["cost"].get<double>(), 0);
  EXPECT_FALSE(rec["summary"]["plain"].contains("tokens-per-step"));
  EXPECT_NE(r.out.find("step cost of draft: "), std::string::npos) << r.out;
  EXPECT_EQ(draft["same_answers"], json({{"same", 3}, {"of", 3}, {"baseline", "plain"}}));
  EXPECT_NE(r.out.find("greedy answers of draft: 3 of 3 the same as plain's"), std::string::npos) << r.out;
}

// Every drafter kind at test size, through serve's own option, on one target per bench run: the
// greedy answer to each bench prompt is the plain target's, and the engine really drafted (n-gram
// speculation drafts only where the text repeats). The target drafting for itself is the case
// where every draft is accepted.
struct DrafterRun {
  const char* target;
  std::vector<std::pair<const char*, const char*>> drafters;  // config name, synth shape ("": none)
  std::vector<std::pair<const char*, std::string>> configs;   // config name, serve options (D: the drafter)
};

void PrintTo(const DrafterRun& r, std::ostream* os) { *os << r.target; }

class BenchDrafters : public ::testing::TestWithParam<DrafterRun> {};

TEST_P(BenchDrafters, KeepTheGreedyAnswersAndDraft) {
  const DrafterRun& run_case = GetParam();
  TempDir dir;
  SynthOptions o;
  o.vocab_dir = vocab_dir();
  o.type = "q8_0";
  const std::string target = dir.file(std::string(run_case.target) + ".gguf");
  write_synth_model(*find_synth_shape(run_case.target), o, target);
  std::vector<std::string> args = {onebit_binary(), "bench", "-m", target, "--config", "plain=", "--rounds", "1",
                                   "--prompt-reps", "1", "--decode-reps", "1", "--decode-tokens", "48",
                                   "--log-dir", dir.file("logs"), "--json", dir.file("r.json")};
  for (const auto& [name, options] : run_case.configs) {
    std::string opts = options;
    for (const auto& [config, shape] : run_case.drafters)
      if (std::string(config) == name) {
        const std::string file = *shape ? dir.file(std::string(shape) + ".gguf") : target;
        if (*shape) write_synth_model(*find_synth_shape(shape), o, file);
        opts.replace(opts.find('D'), 1, file);
      }
    args.insert(args.end(), {"--config", std::string(name) + "=" + opts});
  }
  RunResult r = run(args, {}, 300s);
  ASSERT_EQ(r.code, 0) << r.err;
  json rec = json::parse(read_file(dir.file("r.json")));
  for (const auto& a : rec["answers"])
    if (a["config"] == "plain") EXPECT_FALSE(a["text"].get<std::string>().empty()) << a.dump();
  for (const auto& [name, options] : run_case.configs) {
    const json& summary = rec["summary"][name];
    EXPECT_EQ(summary["same_answers"], json({{"same", 3}, {"of", 3}, {"baseline", "plain"}})) << name;
    if (std::string(name) == "ngram") continue;  // drafts only where the text repeats itself
    ASSERT_TRUE(summary.contains("acceptance")) << name << " drafted nothing: " << summary.dump();
    if (std::string(name) == "itself") EXPECT_GT(summary["acceptance"]["median"].get<double>(), 0.9);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, BenchDrafters,
    ::testing::Values(DrafterRun{"tiny-llama",
                                 {{"dflash", "tiny-llama-dflash"}, {"eagle3", "tiny-llama-eagle3"}, {"itself", ""}},
                                 {{"dflash", "--dflash D"},
                                  {"eagle3", "--eagle3 D"},
                                  {"itself", "--draft D"},
                                  {"ngram", "-- --spec-type ngram-simple"}}},
                      DrafterRun{"tiny-qwen35-mtp",
                                 {{"head", "tiny-qwen35-mtp-head"}, {"dflash", "tiny-qwen35-dflash"}},
                                 {{"mtp", "--mtp"}, {"head", "--mtp D"}, {"dflash", "--dflash D"}}}),
    [](const auto& info) { return info.index == 0 ? std::string("llama") : std::string("qwen35"); });

}  // namespace
}  // namespace onebit::testing
