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

}  // namespace
}  // namespace onebit
