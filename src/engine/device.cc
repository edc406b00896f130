#include "engine/device.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/embedded.h"
#include "base/error.h"
#include "engine/child_process.h"

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

namespace {

bool is_cuda(const std::string& device) { return device.rfind("CUDA", 0) == 0; }

bool lists_cuda(const std::vector<std::string>& devices) { return std::any_of(devices.begin(), devices.end(), is_cuda); }

}  // namespace

std::string first_gpu(const std::vector<std::string>& devices) {
  for (const auto& d : devices) {
    if (!is_cuda(d)) continue;
    // "CUDA0: NVIDIA H200 (143771 MiB, 143190 MiB free)"; a GPU the engine splits into virtual
    // devices reads "NVIDIA H200 (dev p0/v1) (...)": the model is what precedes the first " (".
    const size_t start = d.find(": ");
    if (start == std::string::npos) return "";
    const size_t end = d.find(" (", start + 2);
    return d.substr(start + 2, end == std::string::npos ? std::string::npos : end - start - 2);
  }
  return "";
}

DeviceChoice resolve_device(const std::string& requested, const std::string& program) {
  if (requested == "cpu") return {"cpu", ""};
  const std::vector<std::string> devices = list_engine_devices(program);
  if (lists_cuda(devices)) return {"cuda", first_gpu(devices)};
  if (requested == "cuda")
    throw Error("--device cuda: " + program + " lists no CUDA device (" + why_no_cuda() + ")");
  return {"cpu", ""};
}

DeviceChoice planned_device(const std::string& requested, const std::string& program) {
  if (requested == "cpu") return {"cpu", ""};
  try {
    const std::vector<std::string> devices = list_engine_devices(program);
    if (requested == "auto" && !lists_cuda(devices)) return {"cpu", ""};
    return {"cuda", first_gpu(devices)};
  } catch (const Error&) {  // no engine to ask: auto follows how it was built
    return {requested == "auto" && !engine_built_with_cuda() ? "cpu" : "cuda", ""};
  }
}

std::string why_no_cuda() {
  return engine_built_with_cuda() ? "no GPU is visible" : "this engine was built without CUDA; rebuild with make build CUDA=1";
}

namespace {

// engine.json of the pinned build, parsed once (an empty object when it is not JSON).
const nlohmann::json& engine_manifest() {
  static const nlohmann::json manifest = [] {
    auto j = nlohmann::json::parse(embedded::kEngineManifest, nullptr, false);
    return j.is_object() ? j : nlohmann::json::object();
  }();
  return manifest;
}

}  // namespace

bool engine_built_with_cuda() { return engine_manifest().value("cuda", false); }

bool engine_rotates_q4_0() {
  const auto patches = engine_manifest().find("patches");
  if (patches == engine_manifest().end() || !patches->is_array()) return false;
  for (const auto& p : *patches)
    if (p.is_string() && p.get<std::string>().find("-hadamard-q4_0-runtime.patch") != std::string::npos) return true;
  return false;
}

std::string engine_build_key() {
  const auto key = engine_manifest().find("key");
  return key != engine_manifest().end() && key->is_string() ? key->get<std::string>() : "";
}

}  // namespace onebit
