#include "engine/device.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/embedded.h"
#include "base/error.h"
#include "engine/child_process.h"

namespace onebit {

std::vector<std::string> list_engine_devices(const std::string& program, const std::vector<std::string>& extra) {
  std::vector<std::string> args = extra;
  args.push_back("--list-devices");
  auto child = ChildProcess::start({program, args, {}, {}, "", false});
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

// The engine names its devices by backend: "CUDA0: ...", "Vulkan0: ...".
bool is_kind(const std::string& device, const std::string& kind) {
  return device.rfind(kind == "cuda" ? "CUDA" : "Vulkan", 0) == 0;
}

// Mesa's Vulkan on the CPU: slower than the engine's own CPU code, so never chosen by auto.
bool is_cpu_vulkan(const std::string& device) { return device_model(device).rfind("llvmpipe", 0) == 0; }

bool lists(const std::vector<std::string>& devices, const std::string& kind, bool gpus_only) {
  return std::any_of(devices.begin(), devices.end(), [&](const std::string& d) {
    return is_kind(d, kind) && !(gpus_only && is_cpu_vulkan(d));
  });
}

// auto's choice among what the engine lists: cuda, then a Vulkan GPU, then cpu.
std::string auto_device(const std::vector<std::string>& devices) {
  if (lists(devices, "cuda", false)) return "cuda";
  if (lists(devices, "vulkan", true)) return "vulkan";
  return "cpu";
}

}  // namespace

std::string device_name(const std::string& device) { return device.substr(0, device.find(':')); }

std::string device_model(const std::string& device) {
  const size_t start = device.find(": ");
  if (start == std::string::npos) return "";
  const size_t end = device.find(" (", start + 2);
  return device.substr(start + 2, end == std::string::npos ? std::string::npos : end - start - 2);
}

static std::vector<std::string> of_kind(const std::vector<std::string>& devices, const std::string& kind) {
  std::vector<std::string> out;
  for (const auto& d : devices)
    if (is_kind(d, kind)) out.push_back(d);
  return out;
}

std::vector<std::string> device_names(const std::vector<std::string>& devices, const std::string& kind, bool gpus_only) {
  std::vector<std::string> names;
  for (const auto& d : devices)
    if (is_kind(d, kind) && !(gpus_only && is_cpu_vulkan(d))) names.push_back(device_name(d));
  return names;
}

std::string first_gpu(const std::vector<std::string>& devices, const std::string& kind) {
  for (const auto& d : devices)
    if (is_kind(d, kind)) return device_model(d);
  return "";
}

DeviceChoice resolve_device(const std::string& requested, const std::string& program) {
  if (requested == "cpu") return {"cpu", ""};
  const std::vector<std::string> devices = list_engine_devices(program);
  const std::string device = requested == "auto" ? auto_device(devices) : requested;
  if (device == "cpu") return {"cpu", ""};
  if (!lists(devices, device, false))
    throw Error("--device " + device + ": " + program + " lists no " + (device == "cuda" ? "CUDA" : "Vulkan") +
                " device (" + why_no_device(device) + ")");
  return {device, first_gpu(devices, device), of_kind(devices, device)};
}

DeviceChoice planned_device(const std::string& requested, const std::string& program) {
  if (requested == "cpu") return {"cpu", ""};
  try {
    const std::vector<std::string> devices = list_engine_devices(program);
    const std::string device = requested == "auto" ? auto_device(devices) : requested;
    if (device == "cpu") return {"cpu", ""};
    return {device, first_gpu(devices, device), of_kind(devices, device)};
  } catch (const Error&) {  // no engine to ask: auto follows how it was built
    if (requested != "auto") return {requested, ""};
    return {engine_built_with_cuda() ? "cuda" : engine_built_with_vulkan() ? "vulkan" : "cpu", ""};
  }
}

std::string why_no_device(const std::string& kind) {
  if (kind == "cuda")
    return engine_built_with_cuda() ? "no GPU is visible" : "this engine was built without CUDA; rebuild with make build CUDA=1";
  return engine_built_with_vulkan() ? "no Vulkan driver or GPU is visible"
                                    : "this engine was built without Vulkan; rebuild with make build VULKAN=1";
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

bool engine_built_with_vulkan() { return engine_manifest().value("vulkan", false); }

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
