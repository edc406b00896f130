// Runs programs from tests: the 1bit binary under test, with extra environment, its output in
// files, and waits with deadlines so a hung child fails the test instead of hanging ctest.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace onebit::testing {

class Subprocess {
 public:
  // Starts argv[0] (a path) with `env` added to this process's environment; stdout and stderr go
  // to files in `dir`.
  Subprocess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
             const std::string& dir);
  ~Subprocess();  // SIGKILLs the process if it still runs

  pid_t pid() const { return pid_; }
  // The exit code (or 128 + signal), or nullopt if it still runs after `timeout`.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  void signal(int sig) const;
  std::string out() const;
  std::string err() const;
  // Waits until stderr contains `text`; false on timeout or exit.
  bool wait_for_stderr(const std::string& text, std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string out_path_, err_path_;
};

// The port a `1bit serve` child announced ("ready on http://127.0.0.1:PORT"), once it has; -1
// when it exited or did not within `timeout`.
int serve_ready_port(Subprocess& serve, std::chrono::milliseconds timeout = std::chrono::seconds(120));

struct RunResult {
  int code = -1;
  std::string out, err;
};
// Runs to completion (at most `timeout`, then SIGKILL and code -1).
RunResult run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {},
              std::chrono::milliseconds timeout = std::chrono::seconds(60));

// Whether a process exists and is not a zombie.
bool process_alive(pid_t pid);
// Polls until the process is gone; false if it still lives after `timeout`.
bool wait_process_gone(pid_t pid, std::chrono::milliseconds timeout);
// Direct children of `pid`, from /proc.
std::vector<pid_t> child_pids(pid_t pid);
// Live processes other than this one whose command line mentions `needle` (a test's private path).
std::vector<pid_t> processes_mentioning(const std::string& needle);

}  // namespace onebit::testing
