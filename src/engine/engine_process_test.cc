#include "engine/engine_process.h"

#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "http/net.h"
#include "test_support.h"

namespace onebit {
namespace {

using namespace std::chrono_literals;
using State = EngineProcess::State;

ChildSpec shell(const std::string& script) { return ChildSpec{"/bin/sh", {"-c", script}, {}, {}, "", false}; }

// The fake engine (tests/fake_llama_server.cc) on `port`, with its environment.
ChildSpec fake_engine(int port, std::vector<std::pair<std::string, std::string>> env = {}) {
  return ChildSpec{testing::fake_backend_binary(), {"-m", "model.gguf", "--port", std::to_string(port)}, env, {}, "", false};
}

EngineLaunch launch_of(std::function<ChildSpec(int)> command) {
  EngineLaunch l;
  l.name = "the engine (model.gguf)";
  l.command = std::move(command);
  l.pick_port = [] { return pick_free_port("127.0.0.1"); };
  return l;
}

bool sleep_for(std::chrono::milliseconds d) {
  std::this_thread::sleep_for(d);
  return false;
}

using testing::error_of;

TEST(EngineProcess, ReadyOnceItsHealthAnswersThenExitedWhenItDies) {
  EngineProcess e(launch_of([](int port) { return fake_engine(port, {{"FAKE_LOAD_MS", "300"}}); }));
  EXPECT_EQ(e.state(), State::kLoading);
  ASSERT_TRUE(wait_until_ready({&e}, 30, sleep_for));
  EXPECT_EQ(e.state(), State::kReady);
  EXPECT_EQ(e.poll(), State::kReady);
  kill(e.pid(), SIGKILL);
  for (int i = 0; i < 100 && e.poll() != State::kExited; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(e.state(), State::kExited);
  EXPECT_EQ(e.exit_report("while serving").rfind("the engine (model.gguf) exited with code 137 while serving; its last lines:", 0), 0u)
      << e.exit_report("while serving");
}

TEST(EngineProcess, AnExitWhileLoadingFailsWithItsLastLines) {
  EngineProcess e(launch_of([](int) { return shell("echo one; echo two; exit 3"); }));
  EXPECT_EQ(error_of([&] { wait_until_ready({&e}, 30, sleep_for); }),
            "the engine (model.gguf) exited with code 3 while loading; its last lines:\n  | one\n  | two");
  EXPECT_EQ(e.state(), State::kFailed);
}

TEST(EngineProcess, ATakenPortStartsItAgainOnAnother) {
  Fd stranger = listen_tcp("127.0.0.1", 0);
  const int taken = bound_port(stranger.get());
  EngineLaunch l = launch_of([](int port) { return fake_engine(port); });
  int picks = 0;
  l.pick_port = [&] { return picks++ == 0 ? taken : pick_free_port("127.0.0.1"); };
  std::vector<std::pair<int, int>> moves;
  l.on_new_port = [&](int from, int to) { moves.push_back({from, to}); };
  EngineProcess e(std::move(l));
  ASSERT_TRUE(wait_until_ready({&e}, 30, sleep_for));
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].first, taken);
  EXPECT_EQ(moves[0].second, e.port());
  EXPECT_NE(e.port(), taken);
}

TEST(EngineProcess, GivesUpWhenEveryPortItGetsIsTaken) {
  Fd stranger = listen_tcp("127.0.0.1", 0);
  const int taken = bound_port(stranger.get());
  EngineLaunch l = launch_of([](int port) { return fake_engine(port); });
  l.pick_port = [&] { return taken; };
  int moves = 0;
  l.on_new_port = [&](int, int) { ++moves; };
  EngineProcess e(std::move(l));
  EXPECT_EQ(error_of([&] { wait_until_ready({&e}, 30, sleep_for); }),
            "the engine (model.gguf) could not listen: other programs took 5 of its ports in a row before it could");
  EXPECT_EQ(moves, kPortAttempts - 1);
}

TEST(EngineProcess, NotReadyInTimeShowsItsLastLines) {
  EngineProcess e(launch_of([](int) { return shell("echo waiting; exec sleep 30"); }));
  EXPECT_EQ(error_of([&] { wait_until_ready({&e}, 1, sleep_for); }),
            "the engine (model.gguf) did not load within 1 s (--load-timeout); its last lines:\n  | waiting");
}

TEST(EngineProcess, APauseThatGivesUpEndsTheWaitAndStopEndsTheChild) {
  EngineProcess e(launch_of([](int) { return shell("exec sleep 30"); }));
  EXPECT_FALSE(wait_until_ready({&e}, 30, [](auto) { return true; }));
  EXPECT_TRUE(e.running());
  e.stop(1s);
  EXPECT_EQ(e.state(), State::kStopped);
  EXPECT_FALSE(e.running());
}

TEST(EngineProcess, WaitsForEveryEngine) {
  EngineProcess fast(launch_of([](int port) { return fake_engine(port); }));
  EngineProcess slow(launch_of([](int port) { return fake_engine(port, {{"FAKE_LOAD_MS", "600"}}); }));
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_until_ready({&fast, &slow}, 30, sleep_for));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 600ms);
  EXPECT_EQ(fast.state(), State::kReady);
  EXPECT_EQ(slow.state(), State::kReady);
}

}  // namespace
}  // namespace onebit
