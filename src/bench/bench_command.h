// `1bit bench` and `1bit tune` on the command line.
#pragma once

#include <string>
#include <vector>

namespace onebit {

int run_bench_command(const std::vector<std::string>& args);
int run_tune_command(const std::vector<std::string>& args);
std::string bench_usage();

}  // namespace onebit
