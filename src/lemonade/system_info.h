// What `1bit lemonade` reports about the machine: /system-info (OS, processor, memory, devices,
// which llama.cpp backends this build has) and /system-stats (CPU, memory and GPU use now).
#pragma once

#include <nlohmann/json.hpp>

#include "engine/device.h"

namespace onebit {

// `gpu` is what `auto` found at start (the engine's own device list): it names the Vulkan devices.
nlohmann::json system_info(const DeviceChoice& gpu);
// cpu_percent is measured over the time since the previous call (the first call: 100 ms).
nlohmann::json system_stats();

}  // namespace onebit
