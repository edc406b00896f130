#include "machine.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "bench.h"

namespace onebit {
namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/onebit-machine-XXXXXX";
  return mkdtemp(tmpl);
}

TEST(Machine, FirstLineWithFindsTheFirstLineThatStartsWithTheKey) {
  const std::string dir = temp_dir(), file = dir + "/info";
  std::ofstream(file) << "flags: a model name\nmodel name\t: First\nmodel name\t: Second\n";
  EXPECT_EQ(first_line_with(file, "model name"), "model name\t: First");
  EXPECT_EQ(first_line_with(file, "cache size"), "");
  EXPECT_EQ(first_line_with(dir + "/missing", "model name"), "");
}

TEST(Machine, CpuModelIsTheValueOfProcCpuinfosModelName) {
  const std::string line = first_line_with("/proc/cpuinfo", "model name");
  if (line.empty()) GTEST_SKIP() << "this kernel's /proc/cpuinfo has no model name";
  const std::string model = cpu_model();
  ASSERT_FALSE(model.empty());
  EXPECT_NE(model.front(), ' ');
  EXPECT_EQ(line.substr(line.size() - model.size()), model);
}

// A stand-in nvidia-smi on PATH: rows are split at commas and trimmed, and empty rows dropped.
TEST(Machine, NvidiaSmiRowsAreTrimmedCells) {
  const std::string dir = temp_dir(), tool = dir + "/nvidia-smi";
  std::ofstream(tool) << "#!/bin/sh\n"
                         "case \"$1\" in --query-gpu=name,memory.total) ;; *) exit 3;; esac\n"
                         "printf 'NVIDIA H200, 143771\\r\\n\\n  Second GPU ,  81920 \\n'\n";
  chmod(tool.c_str(), 0755);
  const std::string saved = getenv("PATH") ? getenv("PATH") : "";
  setenv("PATH", (dir + ":" + saved).c_str(), 1);
  const auto rows = nvidia_smi("name,memory.total");
  const auto refused = nvidia_smi("name");
  setenv("PATH", saved.c_str(), 1);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"NVIDIA H200", "143771"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"Second GPU", "81920"}));
  EXPECT_TRUE(refused.empty());
}

// Bench records name GPUs as "NAME, MEMORY MiB", the form recipes quote in "measured".
TEST(Machine, BenchRecordsNameGpusWithTheirMemory) {
  const std::string dir = temp_dir(), tool = dir + "/nvidia-smi";
  std::ofstream(tool) << "#!/bin/sh\nprintf 'NVIDIA H200, 143771\\n'\n";
  chmod(tool.c_str(), 0755);
  const std::string saved = getenv("PATH") ? getenv("PATH") : "";
  setenv("PATH", (dir + ":" + saved).c_str(), 1);
  const nlohmann::json m = describe_machine();
  setenv("PATH", saved.c_str(), 1);
  EXPECT_EQ(m["gpus"], nlohmann::json::array({"NVIDIA H200, 143771 MiB"}));
  EXPECT_EQ(m.value("cpu", ""), cpu_model());
}

}  // namespace
}  // namespace onebit
