// `1bit lemonade`: many models behind Lemonade's API, each launched the 1bit way.
#pragma once

#include <string>
#include <vector>

namespace onebit {

int run_lemonade(const std::vector<std::string>& args);
std::string lemonade_usage();

}  // namespace onebit
