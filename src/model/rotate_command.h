// `1bit rotate IN.gguf OUT.gguf`: writes the Hadamard-rotated Q4_0 file (model/rotate.h).
#pragma once

#include <string>
#include <vector>

namespace onebit {

int run_rotate(const std::vector<std::string>& args);
std::string rotate_usage();

}  // namespace onebit
