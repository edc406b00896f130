#include "lemonade/system_info.h"

#include <sys/utsname.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/paths.h"
#include "bench/machine.h"
#include "engine/device.h"

namespace onebit {
namespace {

using nlohmann::json;

double meminfo_gb(const char* key) {
  std::string line = first_line_with("/proc/meminfo", key);
  long long kb = 0;
  std::sscanf(line.c_str() + std::string(key).size(), "%*[: ]%lld", &kb);
  return static_cast<double>(kb) / (1024.0 * 1024.0);
}

double round2(double v) { return std::round(v * 100) / 100; }

struct CpuTimes {
  unsigned long long busy = 0, total = 0;
};

CpuTimes cpu_times() {
  std::string line = first_line_with("/proc/stat", "cpu ");
  unsigned long long v[8] = {};
  std::sscanf(line.c_str(), "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
              &v[6], &v[7]);
  CpuTimes t;
  for (auto x : v) t.total += x;
  t.busy = t.total - v[3] - v[4];  // minus idle and iowait
  return t;
}

}  // namespace

json system_info(const DeviceChoice& gpu) {
  utsname u{};
  uname(&u);
  std::string os = first_line_with("/etc/os-release", "PRETTY_NAME=");
  if (!os.empty()) os = os.substr(12);
  if (os.size() >= 2 && os.front() == '"') os = os.substr(1, os.size() - 2);
  std::string cpu = cpu_model();
  if (cpu.empty()) cpu = "unknown";
  const unsigned threads = std::thread::hardware_concurrency();
  const unsigned listed = physical_cores();
  const unsigned cores = listed > 0 ? listed : threads;  // some kernels list no core ids
  json gpus = json::array();
  json gpu_names = json::array();
  for (const auto& row : nvidia_smi("name,memory.total,driver_version")) {
    double vram = row.size() > 1 ? std::atof(row[1].c_str()) / 1024.0 : 0;
    gpus.push_back({{"name", row[0]}, {"vram_gb", round2(vram)}, {"available", true},
                    {"driver_version", row.size() > 2 ? row[2] : ""}});
    gpu_names.push_back(row[0]);
  }
  // cuda is "installed" when this engine build has it, "installable" when a GPU is there but the
  // build lacks CUDA (make build CUDA=1), else "unsupported".
  const bool cuda_build = engine_built_with_cuda();
  const std::string cuda_state = cuda_build ? (gpus.empty() ? "unsupported" : "installed")
                                            : (gpus.empty() ? "unsupported" : "installable");
  // vulkan likewise, by the engine's own list: "installed" with a Vulkan GPU on a Vulkan build,
  // "installable" where the build lacks Vulkan but a GPU is there (make build VULKAN=1).
  json vulkan_names = json::array();
  if (gpu.device == "vulkan")
    for (const auto& d : gpu.devices) vulkan_names.push_back(device_model(d));
  const std::string vulkan_state = engine_built_with_vulkan() ? (vulkan_names.empty() ? "unsupported" : "installed")
                                                              : (gpus.empty() ? "unsupported" : "installable");
  const std::string default_backend = cuda_state == "installed" ? "cuda" : vulkan_state == "installed" ? "vulkan" : "cpu";
  return {{"OS Version", os + " (" + u.sysname + " " + u.release + ")"},
          {"Processor", cpu},
          {"Physical Memory", std::to_string(static_cast<int>(std::round(meminfo_gb("MemTotal")))) + " GB"},
          {"devices",
           {{"cpu", {{"name", cpu}, {"cores", cores}, {"threads", threads}, {"available", true}}},
            {"nvidia_gpu", gpus},
            {"amd_gpu", json::array()}}},
          {"recipes",
           {{"llamacpp",
             {{"default_backend", default_backend},
              {"backends",
               {{"cpu", {{"devices", {"cpu"}}, {"state", "installed"}}},
                {"cuda", {{"devices", gpu_names}, {"state", cuda_state}}},
                {"vulkan", {{"devices", vulkan_names}, {"state", vulkan_state}}}}}}}}}};
}

json system_stats() {
  static std::mutex mu;
  static CpuTimes last;
  CpuTimes now;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (last.total == 0) {
      last = cpu_times();
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    now = cpu_times();
    std::swap(now, last);  // `now` holds the previous reading, `last` this one
  }
  const double total = static_cast<double>(last.total - now.total);
  const double cpu = total > 0 ? 100.0 * static_cast<double>(last.busy - now.busy) / total : 0;
  json gpu_percent = nullptr, vram = nullptr;
  auto rows = nvidia_smi("utilization.gpu,memory.used");
  if (!rows.empty() && rows[0].size() >= 2) {
    gpu_percent = std::atof(rows[0][0].c_str());
    vram = round2(std::atof(rows[0][1].c_str()) / 1024.0);
  }
  return {{"cpu_percent", round2(cpu)},
          {"memory_gb", round2(meminfo_gb("MemTotal") - meminfo_gb("MemAvailable"))},
          {"gpu_percent", gpu_percent},
          {"vram_gb", vram}};
}

}  // namespace onebit
