// `1bit tune` on the command line: the current launch (serve options and engine arguments, as
// `1bit serve` takes them) is the baseline; the search runs over the tune space's knobs that
// apply here and the --try candidates; the winners become recipes.
#pragma once

#include <string>
#include <vector>

namespace onebit {

int run_tune_command(const std::vector<std::string>& args);
std::string tune_usage();

// "90s", "10m", "1h", "1h30m" or plain seconds, in seconds. Throws Error naming --budget.
double parse_duration(const std::string& text);

}  // namespace onebit
