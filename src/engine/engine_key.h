// The key an engine child demands on its loopback port. Without one, any local user could reach
// the engine directly and skip serve's --api-key; with one, only serve (which adds it to every
// request it forwards) gets past the engine's check. It travels to the child in the environment
// (LLAMA_API_KEY), which other users cannot read, never on the command line, which they can.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace onebit {

constexpr const char* kEngineKeyVariable = "LLAMA_API_KEY";

// 32 hex digits from the kernel's random source. Throws Error when there is none.
std::string new_engine_key();

// What to add to an engine child's environment: `env` (its plan's) and its key.
std::vector<std::pair<std::string, std::string>> with_engine_key(std::vector<std::pair<std::string, std::string>> env,
                                                                 const std::string& key);

}  // namespace onebit
