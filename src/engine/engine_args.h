// The engine's command-line vocabulary: which spellings name the same llama-server option, how
// many values each takes, and which LLAMA_ARG_* variable stands in for it. It is read from the
// `llama-server --help` text of the pinned build, embedded at build time, so the table always
// matches the engine that 1bit launches. This is what lets serve and recipes see that `-ub 512`
// and `--ubatch-size 512` (or `--ubatch_size`, or LLAMA_ARG_UBATCH) are the same setting.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace onebit {

struct EngineOption {
  std::vector<std::string> spellings;  // "-ub", "--ubatch-size"; negations ("--no-mmap") included
  size_t values = 0;                   // values after the flag; boolean options take none
  std::string env;                     // LLAMA_ARG_UBATCH, or empty

  // LLAMA_ARG_NO_X for a boolean option with negations, else empty.
  std::string negated_env() const;
};

class EngineArgs {
 public:
  // Parses `llama-server --help` output. Throws Error when it finds no options.
  static EngineArgs from_help(std::string_view help_text);
  // The table of the engine this binary was built with.
  static const EngineArgs& builtin();

  // The option a spelling names ("--ubatch_size" normalises to "--ubatch-size"), or nullptr.
  const EngineOption* find(std::string_view spelling) const;
  // How many values the option a spelling names takes, or -1 when the engine has no such option
  // (what parse_cli asks of an option a 1bit command does not have).
  int values_of(std::string_view spelling) const;
  // Whether `argv` (an engine command line without the program name) sets `option` under any
  // spelling. Values are skipped by count, so a value is never taken for a flag.
  bool present_on(const std::vector<std::string>& argv, const EngineOption& option) const;
  // Whether a word reads as a flag: starts with '-' and is not a number like -1 or -0.5.
  static bool looks_like_flag(std::string_view word);

  size_t size() const { return options_.size(); }

 private:
  std::vector<EngineOption> options_;
  std::map<std::string, size_t, std::less<>> by_spelling_;
};

}  // namespace onebit
