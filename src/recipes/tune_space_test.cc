#include "recipes/tune_space.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace onebit {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_tune_space(text, "space.json", EngineArgs::builtin());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string one_knob(const std::string& body) { return R"({"knobs": [{"id": "k", )" + body + "}]}"; }

std::vector<std::string> labels(const std::vector<TuneSetting>& settings) {
  std::vector<std::string> out;
  for (const auto& s : settings) out.push_back(s.label());
  return out;
}

}  // namespace

TEST(TuneSpace, TheBuiltInSpaceLoads) {
  const TuneSpace& space = builtin_tune_space();
  ASSERT_FALSE(space.knobs.empty());
  EXPECT_EQ(space.knobs.front().id, "threads");
  bool kv = false;
  for (const auto& k : space.knobs) kv = kv || (k.id == "kv-cache-type" && k.changes_output);
  EXPECT_TRUE(kv) << "a KV cache type changes the output and must say so";
}

TEST(TuneSpace, SchemaErrorsNameTheProblem) {
  EXPECT_EQ(error_of("[]"), "space.json: the top level must be an object with a \"knobs\" list");
  EXPECT_EQ(error_of("{"), "space.json: invalid JSON");
  EXPECT_EQ(error_of(R"({"knobs": [], "extra": 1})"), "space.json: unknown key \"extra\" at the top level");
  EXPECT_EQ(error_of(R"({"knobs": [{"values": ["-t 1"]}]})"), "space.json: knobs[0] needs an \"id\" (a non-empty string)");
  EXPECT_EQ(error_of(one_knob(R"("values": [])")), "space.json: knob \"k\": \"values\" must be a non-empty list of strings");
  EXPECT_EQ(error_of(one_knob(R"("values": ["-t 1"], "colour": "red")")), "space.json: knob \"k\": unknown key \"colour\"");
  EXPECT_EQ(error_of(one_knob(R"("values": ["-t 1"], "when": {"device": ["tpu"]})")),
            "space.json: knob \"k\": when.device: unknown value \"tpu\" (known: [cpu, cuda, vulkan])");
  EXPECT_EQ(error_of(one_knob(R"("values": ["-t 1"], "when": {"gpu": ["x"]})")),
            "space.json: knob \"k\": unknown when key \"gpu\"");
  EXPECT_EQ(error_of(one_knob(R"("values": ["-t 1"], "changes_output": "yes")")),
            "space.json: knob \"k\": \"changes_output\" must be true or false");
  EXPECT_EQ(error_of(one_knob(R"("values": ["--threadz 4"])")),
            "space.json: knob \"k\": value \"--threadz 4\": args: \"--threadz\" is not a llama-server option");
  EXPECT_EQ(error_of(one_knob(R"("values": ["-t $cpus"])")),
            "space.json: knob \"k\": value \"-t $cpus\": \"$cpus\" names no known number ($cores, $layers)");
  EXPECT_EQ(error_of(one_knob(R"("values": ["-t $cores%2"])")),
            "space.json: knob \"k\": value \"-t $cores%2\": \"$cores%2\" is not $cores or $layers with +, -, * or / and a number after it");
  EXPECT_EQ(error_of(R"({"knobs": [{"id": "k", "values": ["-t 1"]}, {"id": "k", "values": ["-t 2"]}]})"),
            "space.json: knob \"k\" is there twice");
}

TEST(TuneSpace, ValuesFollowTheMachineAndTheModel) {
  TuneSpace space = parse_tune_space(
      one_knob(R"("values": ["-t $cores", "-t $cores-1", "-t $cores*3/4", "-t $cores/4", "-t 1", "-ngl $layers/2"])"),
      "s", EngineArgs::builtin());
  ModelFacts facts;
  facts.block_count = 32;
  TuneContext c{"cpu", "none", &facts, 16, 0};
  EXPECT_EQ(labels(knob_settings(space.knobs[0], c)),
            (std::vector<std::string>{"-t 16", "-t 15", "-t 12", "-t 4", "-t 1", "-ngl 16"}));
  // Two cores: values repeat or fall below 1, and go.
  c.physical_cores = 2;
  facts.block_count.reset();  // no layer count: $layers values are left out
  EXPECT_EQ(labels(knob_settings(space.knobs[0], c)), (std::vector<std::string>{"-t 2", "-t 1"}));
}

TEST(TuneSpace, WhereAKnobApplies) {
  TuneSpace space = parse_tune_space(
      R"({"knobs": [{"id": "a", "values": ["-t 1"], "when": {"device": ["cpu"], "architecture": ["llama"]}},
                    {"id": "b", "values": ["-ngl 10"], "when": {"device": ["cuda"], "fits_gpu": false}},
                    {"id": "c", "values": ["ONEBIT_X=1"], "when": {"drafter": ["draft"]}}]})",
      "s", EngineArgs::builtin());
  ModelFacts facts;
  facts.architecture = "llama";
  facts.file_size = 10ull << 30;
  TuneContext cpu{"cpu", "none", &facts, 2, 0};
  EXPECT_EQ(knob_mismatch(space.knobs[0], cpu), "");
  EXPECT_EQ(knob_mismatch(space.knobs[1], cpu), "device cpu not in [cuda]");
  EXPECT_EQ(knob_mismatch(space.knobs[2], cpu), "drafter none not in [draft]");
  TuneContext big_gpu{"cuda", "draft", &facts, 2, 80ull << 30};
  EXPECT_EQ(knob_mismatch(space.knobs[1], big_gpu), "the model fits the GPU's memory");
  TuneContext small_gpu{"cuda", "draft", &facts, 2, 8ull << 30};
  EXPECT_EQ(knob_mismatch(space.knobs[1], small_gpu), "");
  EXPECT_EQ(knob_mismatch(space.knobs[2], small_gpu), "");
  facts.architecture = "qwen3";
  EXPECT_EQ(knob_mismatch(space.knobs[0], cpu), "architecture qwen3 not in [llama]");
  EXPECT_EQ(labels(knob_settings(space.knobs[2], cpu)), std::vector<std::string>{"ONEBIT_X=1"});
}

// The built-in split knobs apply only where there are several GPUs (tensor-split: exactly two).
TEST(TuneSpace, SplitKnobsNeedSeveralGpus) {
  const TuneSpace& space = builtin_tune_space();
  auto knob = [&](const std::string& id) {
    for (const auto& k : space.knobs)
      if (k.id == id) return k;
    ADD_FAILURE() << id;
    return Knob{};
  };
  ModelFacts facts;
  facts.architecture = "llama";
  TuneContext c{"cuda", "none", &facts, 16, 140ull << 30};
  c.gpus = 1;
  EXPECT_EQ(knob_mismatch(knob("split-mode"), c), "1 GPU, fewer than 2");
  c.gpus = 2;
  EXPECT_EQ(knob_mismatch(knob("split-mode"), c), "");
  EXPECT_EQ(knob_mismatch(knob("tensor-split"), c), "");
  EXPECT_EQ(labels(knob_settings(knob("split-mode"), c)), (std::vector<std::string>{"-sm row", "-sm none -mg 0"}));
  c.gpus = 4;
  EXPECT_EQ(knob_mismatch(knob("split-mode"), c), "");
  EXPECT_EQ(knob_mismatch(knob("tensor-split"), c), "4 GPUs, more than 2");
  EXPECT_THROW(parse_tune_space(R"({"knobs": [{"id": "a", "values": ["-sm row"], "when": {"min_gpus": 0}}]})", "s",
                                EngineArgs::builtin()),
               Error);
}

TEST(TuneSpace, AValueLaidOverReplacesTheSameOptionUnderAnySpelling) {
  const EngineArgs& e = EngineArgs::builtin();
  TuneSetting base = parse_setting("ONEBIT_A=1 --threads 1 -ub 512 --no-repack", "base", e);
  EXPECT_EQ(overlay(base, parse_setting("-t 2", "v", e), e).label(), "ONEBIT_A=1 -ub 512 --no-repack -t 2");
  EXPECT_EQ(overlay(base, parse_setting("--repack", "v", e), e).label(), "ONEBIT_A=1 --threads 1 -ub 512 --repack");
  EXPECT_EQ(overlay(base, parse_setting("ONEBIT_A=2", "v", e), e).label(), "ONEBIT_A=2 --threads 1 -ub 512 --no-repack");
  EXPECT_THROW(parse_setting("-ub", "v", e), Error);
  EXPECT_THROW(parse_setting("", "v", e), Error);
}

}  // namespace onebit
