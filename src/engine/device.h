// Which device serve runs the engine on. `auto` means cuda when the engine lists a CUDA device,
// else vulkan when it lists a Vulkan GPU, else cpu; the engine itself answers (`--list-devices`).
// A Vulkan device that Mesa runs on the CPU (llvmpipe) is no GPU for auto, but --device vulkan
// takes it.
#pragma once

#include <string>
#include <vector>

namespace onebit {

// The devices the engine at `program` can use ("CUDA0: NVIDIA H200 (...)", ...), with `extra`
// before --list-devices (--rpc WORKERS adds theirs). Throws Error when the engine cannot be run.
std::vector<std::string> list_engine_devices(const std::string& program, const std::vector<std::string>& extra = {});

// A listed device's name ("CUDA0" of "CUDA0: NVIDIA H200 (143771 MiB, ...)") and its model
// ("NVIDIA H200"; a GPU the engine splits into virtual devices reads "NVIDIA H200 (dev p0/v1)
// (...)": the model is what precedes the first " (").
std::string device_name(const std::string& device);
std::string device_model(const std::string& device);

// The engine's names ("CUDA0", "Vulkan1") of the listed devices of `kind` (cuda or vulkan);
// without Mesa's CPU Vulkan (llvmpipe) when `gpus_only`.
std::vector<std::string> device_names(const std::vector<std::string>& devices, const std::string& kind,
                                      bool gpus_only = false);

// The GPU model of the first device of `kind` (cuda or vulkan) in such a list ("NVIDIA H200"),
// or "".
std::string first_gpu(const std::vector<std::string>& devices, const std::string& kind = "cuda");

// Where the engine runs: cpu, cuda or vulkan, and on a GPU the model recipes are matched against.
struct DeviceChoice {
  std::string device;
  std::string gpu;  // "" on cpu
  std::vector<std::string> devices;  // the engine's lines for the devices of that kind (none on cpu)
};

// Resolves auto/cpu/cuda/vulkan for a real launch. Throws Error when cuda or vulkan is asked for
// and the engine lists no such device.
DeviceChoice resolve_device(const std::string& requested, const std::string& program);

// For --dry-run: nothing fails. It asks the engine as resolve_device does, so auto plans what a
// real launch would run; cuda or vulkan is planned even where the engine lists no such device; an
// engine that cannot run leaves auto to how the pinned engine was built, with no GPU named.
DeviceChoice planned_device(const std::string& requested, const std::string& program);

// Why no device of `kind` (cuda or vulkan) can be used: none is visible, or the engine was built
// without that backend (and how to rebuild it).
std::string why_no_device(const std::string& kind);

// Whether the pinned engine build (engine.json, embedded at build time) has CUDA, or Vulkan.
bool engine_built_with_cuda();
bool engine_built_with_vulkan();

// Whether the pinned engine build runs Hadamard-rotated Q4_0 files (onebit.hadamard_q4_0 = 32):
// its patch queue (engine.json's "patches") holds the runtime that rotates the activations.
bool engine_rotates_q4_0();

// The pinned engine build's key (engine.json's "key": 16 hex digits naming the commit, patches,
// build options, compilers and CPU it was built for), or "" when the manifest has none.
std::string engine_build_key();

}  // namespace onebit
