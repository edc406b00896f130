// A private child process (the engine) that cannot outlive 1bit.
//
// The child runs in its own process group (so a terminal's Ctrl-C reaches only 1bit, which then
// stops the child in order) and gets PR_SET_PDEATHSIG=SIGKILL, so even `kill -9` of 1bit takes it
// down. The death signal fires when the *thread* that forked exits: start children from a thread
// that lives as long as they should (serve uses its main thread).
//
// Its stdout and stderr go through a pipe: the last lines are kept for error reports, and all of
// it is appended to a log file when one is given.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace onebit {

struct ChildSpec {
  std::string program;
  std::vector<std::string> args;                               // after the program name
  std::vector<std::pair<std::string, std::string>> env_added;  // on top of this process's environment
  std::vector<std::string> env_removed;                        // taken out of it
  std::string log_path;                                        // empty: keep only the last lines
  bool echo = false;                                           // also copy output to our stderr
};

class ChildProcess {
 public:
  // Starts the child. Throws Error when it cannot be started (the program missing, say).
  static std::unique_ptr<ChildProcess> start(const ChildSpec& spec);
  ~ChildProcess();  // stops the child if it still runs

  pid_t pid() const { return pid_; }
  // True while the child runs. An exited child is left a zombie until stop(): while it is, its
  // pid, which is also its process group's id, cannot be given to another process, so stop()'s
  // kill of the group cannot reach a stranger.
  bool running();
  // The exit code, or 128 + signal number, once it has exited.
  std::optional<int> exit_code();
  // SIGTERM to its process group, then SIGKILL after `grace`; kills whatever is left in the
  // group, then reaps the child.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
  // The last lines of its output (at most `max`). Once the child has exited, this first waits
  // briefly for the rest of its output, so its final words are not lost.
  std::vector<std::string> last_lines(size_t max = 20);

 private:
  ChildProcess() = default;
  void read_output(int fd, int log_fd, bool echo);

  pid_t pid_ = -1;
  std::optional<int> status_;
  bool reaped_ = false;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable drained_;
  bool output_done_ = false;  // the reader saw the end of the output
  std::deque<std::string> lines_;
};

}  // namespace onebit
