// Which device serve runs the engine on. `auto` means cuda when the engine build has CUDA and a
// GPU is visible, else cpu; the engine itself answers both questions (`--list-devices`).
#pragma once

#include <string>
#include <vector>

namespace onebit {

// The devices the engine at `program` can use ("CUDA0: NVIDIA H200 (...)", ...). Throws Error
// when the engine cannot be run.
std::vector<std::string> list_engine_devices(const std::string& program);

// Resolves auto/cpu/cuda for a real launch. Throws Error when cuda is asked for and the engine
// lists no CUDA device.
std::string resolve_device(const std::string& requested, const std::string& program);

// For --dry-run: no device is checked; auto follows how the pinned engine was built.
std::string planned_device(const std::string& requested);

// Whether the pinned engine build (engine.json, embedded at build time) has CUDA.
bool engine_built_with_cuda();

}  // namespace onebit
