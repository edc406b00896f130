#include "bench/machine.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>

#include "bench/bench.h"
#include "test_support.h"

namespace onebit {
namespace {

using onebit::testing::TempDir;

// Runs `body` with a stand-in nvidia-smi (the shell `script`) first on PATH.
void with_nvidia_smi(const std::string& script, const std::function<void()>& body) {
  TempDir dir;
  const std::string tool = dir.file("nvidia-smi");
  std::ofstream(tool) << "#!/bin/sh\n" << script;
  chmod(tool.c_str(), 0755);
  const std::string saved = getenv("PATH") ? getenv("PATH") : "";
  setenv("PATH", (dir.path() + ":" + saved).c_str(), 1);
  body();
  setenv("PATH", saved.c_str(), 1);
}

TEST(Machine, FirstLineWithFindsTheFirstLineThatStartsWithTheKey) {
  TempDir dir;
  const std::string file = dir.file("info");
  std::ofstream(file) << "flags: a model name\nmodel name\t: First\nmodel name\t: Second\n";
  EXPECT_EQ(first_line_with(file, "model name"), "model name\t: First");
  EXPECT_EQ(first_line_with(file, "cache size"), "");
  EXPECT_EQ(first_line_with(dir.file("missing"), "model name"), "");
}

TEST(Machine, CpuModelIsTheValueOfProcCpuinfosModelName) {
  const std::string line = first_line_with("/proc/cpuinfo", "model name");
  if (line.empty()) GTEST_SKIP() << "this kernel's /proc/cpuinfo has no model name";
  const std::string model = cpu_model();
  ASSERT_FALSE(model.empty());
  EXPECT_NE(model.front(), ' ');
  EXPECT_EQ(line.substr(line.size() - model.size()), model);
}

TEST(Machine, PhysicalCoresCountEachPackagesCoreOnce) {
  TempDir dir;
  const std::string file = dir.file("cpuinfo");
  // Two packages of two cores, each core with two hyper-threads; core ids repeat across packages.
  std::ofstream out(file);
  for (int package = 0; package < 2; ++package)
    for (int thread = 0; thread < 2; ++thread)
      for (int core = 0; core < 2; ++core)
        out << "processor\t: x\nphysical id\t: " << package << "\ncore id\t\t: " << core << "\n\n";
  out.close();
  EXPECT_EQ(physical_cores(file), 4u);
  std::ofstream(dir.file("bare")) << "processor\t: 0\nmodel name\t: Some CPU\n";
  EXPECT_EQ(physical_cores(dir.file("bare")), 0u);
  EXPECT_EQ(physical_cores(dir.file("missing")), 0u);
}

// Rows are split at commas and trimmed, and empty rows dropped.
TEST(Machine, NvidiaSmiRowsAreTrimmedCells) {
  std::vector<std::vector<std::string>> rows, refused;
  with_nvidia_smi("case \"$1\" in --query-gpu=name,memory.total) ;; *) exit 3;; esac\n"
                  "printf 'NVIDIA H200, 143771\\r\\n\\n  Second GPU ,  81920 \\n'\n",
                  [&] {
                    rows = nvidia_smi("name,memory.total");
                    refused = nvidia_smi("name");
                  });
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"NVIDIA H200", "143771"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"Second GPU", "81920"}));
  EXPECT_TRUE(refused.empty());
}

// Bench records name GPUs as "NAME, MEMORY MiB", the form recipes quote in "measured".
TEST(Machine, BenchRecordsNameGpusWithTheirMemory) {
  nlohmann::json m;
  with_nvidia_smi("printf 'NVIDIA H200, 143771\\n'\n", [&] { m = describe_machine(); });
  EXPECT_EQ(m["gpus"], nlohmann::json::array({"NVIDIA H200, 143771 MiB"}));
  EXPECT_EQ(m.value("cpu", ""), cpu_model());
}

}  // namespace
}  // namespace onebit
