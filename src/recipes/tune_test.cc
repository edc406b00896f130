#include "recipes/tune.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "bench/report.h"
#include "recipes/recipes.h"
#include "test_support.h"

namespace onebit {
namespace {

BenchRecord record(const std::vector<double>& base, const std::vector<double>& cand, const char* metric = "decode-code") {
  BenchRecord r;
  r.model = "/models/x.gguf";
  r.facts = {{"architecture", "qwen3"}, {"moe", false}, {"hadamard_q4_0", false}};
  r.configs = {{"current", {}, {}}, {"try1", {}, {"--", "-ub", "1024"}}};
  r.rounds = 2;
  r.machine = {{"cpu", "Test CPU"}, {"gpus", nlohmann::json::array()}};
  r.finished = "2026-11-30T10:00:00Z";
  for (double v : base) r.samples.push_back({"current", 1, metric, v});
  for (double v : cand) r.samples.push_back({"try1", 1, metric, v});
  return r;
}

}  // namespace

TEST(Tune, AWinMustClearTheNoise) {
  TuneVerdict clear = judge(record({100, 101, 99}, {110, 111, 109}), "try1", "decode-code");
  EXPECT_NEAR(clear.gain, 0.10, 1e-9);
  EXPECT_NEAR(clear.noise, 0.01, 1e-9);  // half of (111 - 109) / 110 or (101 - 99) / 100
  EXPECT_TRUE(clear.wins);
  // The same gain inside a noisy run is no win.
  EXPECT_FALSE(judge(record({80, 100, 120}, {90, 110, 130}), "try1", "decode-code").wins);
  // Below 1% never wins, however quiet.
  EXPECT_FALSE(judge(record({100, 100}, {100.5, 100.5}), "try1", "decode-code").wins);
  // Lower is better for time to first token.
  TuneVerdict ttft = judge(record({10, 10}, {8, 8}, "ttft"), "try1", "ttft");
  EXPECT_NEAR(ttft.gain, 0.2, 1e-9);
  EXPECT_TRUE(ttft.wins);
  EXPECT_THROW(judge(record({1}, {1}), "try1", "prompt"), Error);
}

TEST(Tune, TheEntryQuotesItsMeasurement) {
  BenchRecord r = record({100, 100}, {120, 120});
  TuneVerdict v = judge(r, "try1", "decode-code");
  nlohmann::json e = recipe_entry(r, v, "decode-code", {"-ub", "1024"}, {}, {"cuda", "NVIDIA H200"});
  EXPECT_EQ(e["id"], "qwen3-cuda-ub-1024");
  EXPECT_EQ(e["measured"], "x.gguf, Test CPU, decode-code 100 -> 120 tok/s, 2026-11-30");
  EXPECT_EQ(e["match"]["device"], nlohmann::json({"cuda"}));
  EXPECT_EQ(e["match"]["gpu"], nlohmann::json({"NVIDIA H200"}));  // a win on one GPU is kept to it
  EXPECT_EQ(e["match"]["drafter"], nlohmann::json({"none"}));
  // It is a valid recipe as it stands.
  nlohmann::json file = {{"recipes", {e}}};
  EXPECT_NO_THROW(parse_recipes(file.dump(), "t", EngineArgs::builtin()));
}

TEST(Tune, AppendKeepsTheFileValidAndIdsUnique) {
  testing::TempDir dir;
  BenchRecord r = record({100, 100}, {120, 120});
  nlohmann::json e = recipe_entry(r, judge(r, "try1", "decode-code"), "decode-code", {"-ub", "1024"}, {}, {"cpu", ""});
  EXPECT_FALSE(e["match"].contains("gpu"));
  EXPECT_EQ(append_recipe(dir.file("r.json"), e), "qwen3-cpu-ub-1024");
  EXPECT_EQ(append_recipe(dir.file("r.json"), e), "qwen3-cpu-ub-1024-2");
  RecipeSet set = load_recipes_file(dir.file("r.json"), EngineArgs::builtin());
  EXPECT_EQ(set.recipes.size(), 2u);
  testing::write_file(dir.file("bad.json"), "{\"recipes\": 3}");
  EXPECT_THROW(append_recipe(dir.file("bad.json"), e), Error);
  EXPECT_EQ(testing::read_file(dir.file("bad.json")), "{\"recipes\": 3}");  // left as it was
}

TEST(BenchReport, PercentChange) {
  EXPECT_EQ(percent_change(100, 100), "+0.0%");
  EXPECT_EQ(percent_change(100, 104.2), "+4.2%");
  EXPECT_EQ(percent_change(100, 90), "-10.0%");
  EXPECT_EQ(percent_change(100, 99.99), "+0.0%");
  EXPECT_EQ(percent_change(0, 5), "n/a");
}

}  // namespace onebit
