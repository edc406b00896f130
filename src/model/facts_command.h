// `1bit facts MODEL [--json] [--recipes FILE]`: what 1bit reads from a GGUF and which recipes
// would apply to it, and why (or why not).
#pragma once

#include <string>
#include <vector>

namespace onebit {

int run_facts(const std::vector<std::string>& args);
std::string facts_usage();

}  // namespace onebit
