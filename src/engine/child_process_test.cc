#include "engine/child_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "subprocess.h"
#include "test_support.h"

namespace onebit {
namespace {

using namespace std::chrono_literals;

ChildSpec shell(const std::string& script) { return ChildSpec{"/bin/sh", {"-c", script}, {}, {}, "", false}; }

// The pid the script wrote into `file`, once it has.
pid_t pid_written(const std::string& file) {
  for (int i = 0; i < 250; ++i) {
    std::ifstream in(file);
    pid_t pid = 0;
    if (in >> pid && pid > 0) return pid;
    std::this_thread::sleep_for(20ms);
  }
  return 0;
}

TEST(ChildProcess, ReportsTheExitCode) {
  auto child = ChildProcess::start(shell("echo bye; exit 3"));
  for (int i = 0; i < 250 && child->running(); ++i) std::this_thread::sleep_for(20ms);
  ASSERT_EQ(child->exit_code(), 3);
  EXPECT_EQ(child->last_lines(), std::vector<std::string>{"bye"});
  child->stop();
  EXPECT_EQ(child->exit_code(), 3);
}

// A child that ignores SIGTERM is killed once the grace has passed, and so is what it started.
TEST(ChildProcess, StopEscalatesToKillAndTakesTheGroup) {
  testing::TempDir dir;
  const std::string file = dir.file("helper.pid");
  auto child = ChildProcess::start(shell("trap '' TERM; sleep 300 & echo $! > " + file + "; wait; wait"));
  const pid_t helper = pid_written(file);
  ASSERT_GT(helper, 0);
  const pid_t leader = child->pid();
  const auto t0 = std::chrono::steady_clock::now();
  child->stop(300ms);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 5s);
  EXPECT_EQ(child->exit_code(), 128 + SIGKILL);
  EXPECT_TRUE(testing::wait_process_gone(helper, 2s));
  // Reaped: no zombie is left under this pid.
  EXPECT_NE(::waitpid(leader, nullptr, WNOHANG), leader);
  EXPECT_FALSE(std::ifstream("/proc/" + std::to_string(leader) + "/stat").good());
}

// An exited child stays unreaped until stop(), so its pid, its process group's id, cannot be
// handed to another process before stop() kills the group: the helper it left is still reached.
TEST(ChildProcess, AnExitedChildsGroupIsStillStopped) {
  testing::TempDir dir;
  const std::string file = dir.file("helper.pid");
  auto child = ChildProcess::start(shell("sleep 300 & echo $! > " + file + "; exit 0"));
  const pid_t helper = pid_written(file);
  ASSERT_GT(helper, 0);
  for (int i = 0; i < 250 && child->running(); ++i) std::this_thread::sleep_for(20ms);
  ASSERT_EQ(child->exit_code(), 0);
  EXPECT_TRUE(std::ifstream("/proc/" + std::to_string(child->pid()) + "/stat").good()) << "reaped before stop()";
  EXPECT_TRUE(testing::process_alive(helper));
  child->stop();
  EXPECT_TRUE(testing::wait_process_gone(helper, 2s));
  EXPECT_FALSE(std::ifstream("/proc/" + std::to_string(child->pid()) + "/stat").good());
}

}  // namespace
}  // namespace onebit
