#include "engine/device.h"

#include <gtest/gtest.h>

namespace onebit {
namespace {

// The engine's --list-devices lines, as list_engine_devices returns them.
TEST(Device, FirstGpuIsTheFirstCudaDevicesModel) {
  EXPECT_EQ(first_gpu({"CUDA0: NVIDIA H200 (143771 MiB, 143190 MiB free)"}), "NVIDIA H200");
  EXPECT_EQ(first_gpu({"Vulkan0: Some iGPU (512 MiB)", "CUDA0: NVIDIA GeForce RTX 4090 (24564 MiB, 23000 MiB free)",
                       "CUDA1: NVIDIA H200 (143771 MiB, 143190 MiB free)"}),
            "NVIDIA GeForce RTX 4090");
  EXPECT_EQ(first_gpu({"CUDA0: NVIDIA H200 (dev p0/v1) (71000 MiB, 70000 MiB free)"}), "NVIDIA H200");
  EXPECT_EQ(first_gpu({"CUDA0: Fake GPU"}), "Fake GPU");
  EXPECT_EQ(first_gpu({}), "");
  EXPECT_EQ(first_gpu({"CPU: x86"}), "");
}

TEST(Device, FirstGpuOfAKind) {
  const std::vector<std::string> both = {"Vulkan0: AMD Radeon RX 7900 XTX (RADV NAVI31) (24560 MiB, 24000 MiB free)",
                                         "CUDA0: NVIDIA H200 (143771 MiB, 143190 MiB free)"};
  EXPECT_EQ(first_gpu(both, "vulkan"), "AMD Radeon RX 7900 XTX");
  EXPECT_EQ(first_gpu(both, "cuda"), "NVIDIA H200");
  EXPECT_EQ(first_gpu({"CUDA0: NVIDIA H200 (143771 MiB, 143190 MiB free)"}, "vulkan"), "");
  EXPECT_EQ(first_gpu({"Vulkan0: llvmpipe (LLVM 15.0.6, 256 bits) (7936 MiB, 7936 MiB free)"}, "vulkan"), "llvmpipe");
}

}  // namespace
}  // namespace onebit
