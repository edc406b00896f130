// Which device serve runs the engine on. `auto` means cuda when the engine build has CUDA and a
// GPU is visible, else cpu; the engine itself answers both questions (`--list-devices`).
#pragma once

#include <string>
#include <vector>

namespace onebit {

// The devices the engine at `program` can use ("CUDA0: NVIDIA H200 (...)", ...). Throws Error
// when the engine cannot be run.
std::vector<std::string> list_engine_devices(const std::string& program);

// The GPU model of the first CUDA device in such a list ("NVIDIA H200"), or "".
std::string first_gpu(const std::vector<std::string>& devices);

// Where the engine runs: cpu or cuda, and with cuda the GPU model recipes are matched against.
struct DeviceChoice {
  std::string device;
  std::string gpu;  // "" on cpu
};

// Resolves auto/cpu/cuda for a real launch. Throws Error when cuda is asked for and the engine
// lists no CUDA device.
DeviceChoice resolve_device(const std::string& requested, const std::string& program);

// For --dry-run: nothing fails. It asks the engine as resolve_device does, so auto plans what a
// real launch would run; cuda is planned even where the engine lists no CUDA device; an engine
// that cannot run leaves auto to how the pinned engine was built, with no GPU named.
DeviceChoice planned_device(const std::string& requested, const std::string& program);

// Why no CUDA device can be used: "no GPU is visible", or the engine was built without CUDA (and
// how to rebuild it).
std::string why_no_cuda();

// Whether the pinned engine build (engine.json, embedded at build time) has CUDA.
bool engine_built_with_cuda();

// Whether the pinned engine build runs Hadamard-rotated Q4_0 files (onebit.hadamard_q4_0 = 32):
// its patch queue (engine.json's "patches") holds the runtime that rotates the activations.
bool engine_rotates_q4_0();

// The pinned engine build's key (engine.json's "key": 16 hex digits naming the commit, patches,
// build options, compilers and CPU it was built for), or "" when the manifest has none.
std::string engine_build_key();

}  // namespace onebit
