#include "bench/bench.h"

#include <gtest/gtest.h>

namespace onebit {
namespace {

BenchRecord record_with(const std::vector<BenchAnswer>& answers) {
  BenchRecord r;
  r.configs = {{"plain", {}, {}}, {"draft", {}, {"--draft", "d.gguf"}}, {"inv", {}, {"--batch-invariant"}}, {"quiet", {}, {}}};
  r.answers = answers;
  return r;
}

TEST(BenchRecord, SameAnswersHoldEachConfigAgainstTheFirstPromptByPromptAndRoundByRound) {
  const BenchRecord r = record_with({{"plain", 1, "decode-code", "a"},
                                     {"plain", 1, "decode-prose", "b"},
                                     {"plain", 2, "decode-code", "a2"},
                                     {"draft", 1, "decode-code", "a"},
                                     {"draft", 1, "decode-prose", "b"},
                                     {"draft", 2, "decode-code", "a"},  // round 1's text in round 2
                                     {"inv", 1, "decode-code", "a"},
                                     {"inv", 1, "decode-short", "c"}});  // nothing to hold it against
  const auto s = r.same_answers();
  ASSERT_EQ(s.size(), 2u);  // "quiet" has no answers
  EXPECT_EQ(s[0].config, "draft");
  EXPECT_EQ(s[0].baseline, "plain");
  EXPECT_EQ(s[0].same, 2);
  EXPECT_EQ(s[0].of, 3);
  EXPECT_EQ(s[1].config, "inv");
  EXPECT_EQ(s[1].same, 1);
  EXPECT_EQ(s[1].of, 1);
  EXPECT_EQ(r.to_json()["summary"]["draft"]["same_answers"],
            nlohmann::json({{"same", 2}, {"of", 3}, {"baseline", "plain"}}));
}

TEST(BenchRecord, NoSameAnswersWithoutAFirstConfigsAnswers) {
  EXPECT_TRUE(record_with({{"draft", 1, "decode-code", "a"}}).same_answers().empty());
  EXPECT_TRUE(BenchRecord{}.same_answers().empty());
}

}  // namespace
}  // namespace onebit
