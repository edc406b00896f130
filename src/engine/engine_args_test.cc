#include "engine/engine_args.h"

#include <gtest/gtest.h>

namespace onebit {

// The table comes from the real `llama-server --help` of the pinned build.
TEST(EngineArgs, KnowsTheEnginesAliases) {
  const EngineArgs& e = EngineArgs::builtin();
  ASSERT_GT(e.size(), 150u);
  const EngineOption* ub = e.find("-ub");
  ASSERT_NE(ub, nullptr);
  EXPECT_EQ(e.find("--ubatch-size"), ub);
  EXPECT_EQ(e.find("--ubatch_size"), ub);  // the engine turns '_' into '-' in long flags
  EXPECT_EQ(ub->values, 1u);
  EXPECT_EQ(ub->env, "LLAMA_ARG_UBATCH");
  EXPECT_EQ(e.find("-ngl"), e.find("--n-gpu-layers"));
  EXPECT_EQ(e.find("-ngl"), e.find("--gpu-layers"));
  EXPECT_EQ(e.find("-md"), e.find("--spec-draft-model"));
  EXPECT_EQ(e.find("-ngld"), e.find("--gpu-layers-draft"));
  EXPECT_EQ(e.find("-fa"), e.find("--flash-attn"));
  EXPECT_EQ(e.find("-np"), e.find("--parallel"));
  EXPECT_EQ(e.find("--nonsense-flag"), nullptr);
}

TEST(EngineArgs, NegationsAreTheSameOption) {
  const EngineArgs& e = EngineArgs::builtin();
  const EngineOption* mmap = e.find("--mmap");
  ASSERT_NE(mmap, nullptr);
  EXPECT_EQ(e.find("--no-mmap"), mmap);
  EXPECT_EQ(mmap->values, 0u);
  EXPECT_EQ(mmap->negated_env(), "LLAMA_ARG_NO_MMAP");
  EXPECT_EQ(e.find("--jinja"), e.find("--no-jinja"));
}

TEST(EngineArgs, CountsValuesFromTheHint) {
  const EngineArgs& e = EngineArgs::builtin();
  EXPECT_EQ(e.find("--control-vector-layer-range")->values, 2u);  // START END
  EXPECT_EQ(e.find("-ot")->values, 1u);  // "<tensor name pattern>=<buffer type>,..." is one value
  EXPECT_EQ(e.find("-dev")->values, 1u);
  EXPECT_EQ(e.find("--spec-type")->values, 1u);
  EXPECT_EQ(e.find("--jinja")->values, 0u);
}

TEST(EngineArgs, PresenceSkipsValues) {
  const EngineArgs& e = EngineArgs::builtin();
  const EngineOption& ub = *e.find("-ub");
  EXPECT_TRUE(e.present_on({"-m", "x", "--ubatch-size", "256"}, ub));
  EXPECT_TRUE(e.present_on({"--ubatch_size", "256"}, ub));
  // "-ub" here is the value of --alias, not a flag.
  EXPECT_FALSE(e.present_on({"--alias", "-ub", "-c", "10"}, ub));
  EXPECT_FALSE(e.present_on({}, ub));
}

TEST(EngineArgs, ParsesHelpText) {
  EngineArgs e = EngineArgs::from_help(
      "----- common params -----\n\n"
      "-x,    --example, --ex N                 does things (default: 1)\n"
      "                                        (env: LLAMA_ARG_EXAMPLE)\n"
      "--very-long-option-name-that-wraps <a b>=<c>,...\n"
      "                                        help on the next line\n"
      "--flag, --no-flag                       a switch\n");
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e.find("--ex"), e.find("-x"));
  EXPECT_EQ(e.find("-x")->env, "LLAMA_ARG_EXAMPLE");
  EXPECT_EQ(e.find("--very-long-option-name-that-wraps")->values, 1u);
  EXPECT_EQ(e.find("--no-flag")->values, 0u);
}

TEST(EngineArgs, NumbersAreNotFlags) {
  EXPECT_TRUE(EngineArgs::looks_like_flag("-ub"));
  EXPECT_TRUE(EngineArgs::looks_like_flag("--jinja"));
  EXPECT_FALSE(EngineArgs::looks_like_flag("-1"));
  EXPECT_FALSE(EngineArgs::looks_like_flag("-.5"));
  EXPECT_FALSE(EngineArgs::looks_like_flag("1024"));
  EXPECT_FALSE(EngineArgs::looks_like_flag("-"));
}

}  // namespace onebit
