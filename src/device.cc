#include "device.h"

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "child_process.h"
#include "embedded.h"
#include "error.h"

namespace onebit {

std::vector<std::string> list_engine_devices(const std::string& program) {
  auto child = ChildProcess::start({program, {"--list-devices"}, {}, {}, "", false});
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (child->running() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  child->stop(std::chrono::milliseconds(100));
  if (child->exit_code().value_or(1) != 0) throw Error(program + " --list-devices failed");
  std::vector<std::string> devices;
  bool listing = false;
  for (const std::string& line : child->last_lines(1000)) {
    if (line.rfind("Available devices:", 0) == 0) {
      listing = true;
      continue;
    }
    if (!listing) continue;
    size_t start = line.find_first_not_of(' ');
    if (start == std::string::npos || start == 0) continue;  // devices are indented
    std::string d = line.substr(start);
    if (d != "(none)") devices.push_back(d);
  }
  return devices;
}

std::string resolve_device(const std::string& requested, const std::string& program) {
  if (requested == "cpu") return "cpu";
  bool cuda = false;
  for (const auto& d : list_engine_devices(program))
    if (d.rfind("CUDA", 0) == 0) cuda = true;
  if (cuda) return "cuda";
  if (requested == "cuda")
    throw Error("--device cuda: " + program + " lists no CUDA device (" +
                (engine_built_with_cuda() ? "no GPU is visible" : "this engine was built without CUDA; rebuild with make build CUDA=1") + ")");
  return "cpu";
}

std::string planned_device(const std::string& requested) {
  if (requested != "auto") return requested;
  return engine_built_with_cuda() ? "cuda" : "cpu";
}

bool engine_built_with_cuda() {
  static const bool cuda = [] {
    auto j = nlohmann::json::parse(embedded::kEngineManifest, nullptr, false);
    return j.is_object() && j.value("cuda", false);
  }();
  return cuda;
}

}  // namespace onebit
