// One engine child from start to stop, with explicit states. serve, lemonade and bench start
// every child through it (bench's children are `1bit serve` processes, whose /health and port
// behave as an engine's):
//
//   loading -> ready    its /health answered 200 from a socket the child itself holds
//   loading -> loading  it exited because another program took its port before it could
//                       listen: started again on a fresh port, at most kPortAttempts in all
//   loading -> failed   it exited otherwise, or every port it was given was taken
//   ready   -> exited   it exited while serving
//   any     -> stopped  stop(): SIGTERM to its process group, SIGKILL after the grace
//
// The child is a ChildProcess (its own process group, a parent-death signal): child_process.h
// says which thread must start it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/child_process.h"

namespace onebit {

// How many ports a child is given in all when other programs take them before it listens.
constexpr int kPortAttempts = 5;

// How many last lines of a child's output an error report shows.
constexpr size_t kReportLines = 12;

// The functions are called only while the child loads (by the constructor and poll()) and are
// dropped when it leaves that state, so they may refer to what the caller holds until then.
struct EngineLaunch {
  std::string name;  // how reports name the child: "the engine (m.gguf)", "config a: serve"
  // The child to run on `port`; called again with a new port after the last one was taken.
  std::function<ChildSpec(int port)> command;
  std::function<int()> pick_port;  // a port that is free now
  // Told (taken port, new port) before the child starts again elsewhere.
  std::function<void(int, int)> on_new_port;
  // Starts the child; empty: ChildProcess::start on the calling thread.
  std::function<std::unique_ptr<ChildProcess>(const ChildSpec&)> spawn;
  std::string while_loading = "while loading";  // how a report says when it exited while loading
};

class EngineProcess {
 public:
  enum class State { kLoading, kReady, kFailed, kExited, kStopped };

  // Starts the child on a picked port. Throws Error when it cannot be started.
  explicit EngineProcess(EngineLaunch launch);
  ~EngineProcess();  // stops the child if it runs
  EngineProcess(const EngineProcess&) = delete;
  EngineProcess& operator=(const EngineProcess&) = delete;

  // Looks at the child once and moves the state on (see above); a taken port starts it again
  // (throws Error when that start fails).
  State poll();
  State state() const { return state_; }
  // Why it failed (kFailed): the exit and its last lines, or the ports that were taken.
  const std::string& failure() const { return failure_; }
  // True while the child process runs (in any state).
  bool running() { return child_->running(); }

  const std::string& name() const { return launch_.name; }
  int port() const { return port_; }
  pid_t pid() const { return child_->pid(); }
  std::optional<int> exit_code() { return child_->exit_code(); }
  std::vector<std::string> last_lines(size_t max = kReportLines) { return child_->last_lines(max); }
  // "<name> exited with code C <when>; its last lines:" and the lines, each on "\n  | ".
  std::string exit_report(const std::string& when);

  void stop(std::chrono::milliseconds grace = std::chrono::seconds(10));

 private:
  void start_on(int port);
  void leave_loading(State next);

  EngineLaunch launch_;
  State state_ = State::kLoading;
  std::string failure_;
  int port_ = 0;
  int attempts_ = 0;
  std::unique_ptr<ChildProcess> child_;
};

// "\n  | line" for each line.
std::string indented_lines(const std::vector<std::string>& lines);

// Polls `engines` every 250 ms until each is ready; between polls `pause(d)` waits up to d and
// returns true to give up (a stop signal, an interrupt), and then this returns false. Throws Error
// when one fails (its failure()) or is not ready within `timeout_s` ("<name> did not load within
// N s (--load-timeout); its last lines: ...").
bool wait_until_ready(const std::vector<EngineProcess*>& engines, double timeout_s,
                      const std::function<bool(std::chrono::milliseconds)>& pause);

}  // namespace onebit
