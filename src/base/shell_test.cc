#include "base/shell.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace onebit {

TEST(ShellQuote, LeavesPlainWordsAlone) {
  EXPECT_EQ(shell_quote("-ub"), "-ub");
  EXPECT_EQ(shell_quote("/models/a.gguf"), "/models/a.gguf");
  EXPECT_EQ(shell_quote("GGML_X=1"), "GGML_X=1");
}

TEST(ShellQuote, QuotesEverythingElse) {
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("$HOME"), "'$HOME'");
}

TEST(ShellSplit, RoundTripsWhatQuoteMakes) {
  std::vector<std::string> words = {"-m", "my model.gguf", "it's", "", "a\"b", "$x", "tab\there"};
  EXPECT_EQ(shell_split(shell_join(words)), words);
}

TEST(ShellSplit, HonoursQuotesAndEscapes) {
  EXPECT_EQ(shell_split("  -ub 1024   -fa  "), (std::vector<std::string>{"-ub", "1024", "-fa"}));
  EXPECT_EQ(shell_split("a\\ b \"c \\\"d\\\"\" 'e f'"), (std::vector<std::string>{"a b", "c \"d\"", "e f"}));
  EXPECT_TRUE(shell_split("").empty());
}

TEST(ShellSplit, RejectsUnterminatedInput) {
  EXPECT_THROW(shell_split("'open"), Error);
  EXPECT_THROW(shell_split("\"open"), Error);
  EXPECT_THROW(shell_split("trailing\\"), Error);
}

}  // namespace onebit
