// `1bit synth --like NAME -o OUT.gguf [--type T] [--seed N]`: a random-weight model of a known
// shape with a real tokenizer, for measuring a machine or testing without a download.
#pragma once

#include <string>
#include <vector>

namespace onebit {

int run_synth(const std::vector<std::string>& args);
std::string synth_usage();

}  // namespace onebit
