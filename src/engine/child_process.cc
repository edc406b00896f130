#include "engine/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "base/error.h"

extern char** environ;

namespace onebit {
namespace {

constexpr size_t kKeptLines = 200;

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

std::unique_ptr<ChildProcess> ChildProcess::start(const ChildSpec& spec) {
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<std::string> argv_s;
  argv_s.push_back(spec.program);
  argv_s.insert(argv_s.end(), spec.args.begin(), spec.args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);

  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  for (const auto& k : spec.env_removed) env.erase(k);
  for (const auto& [k, v] : spec.env_added) env[k] = v;
  std::vector<std::string> envp_s;
  for (const auto& [k, v] : env) envp_s.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : envp_s) envp.push_back(s.data());
  envp.push_back(nullptr);

  int log_fd = -1;
  if (!spec.log_path.empty()) {
    log_fd = ::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) throw Error(spec.log_path + ": cannot open the engine log: " + std::strerror(errno));
  }
  int out[2], exec_err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(exec_err, O_CLOEXEC) != 0) {
    if (log_fd >= 0) ::close(log_fd);
    throw Error(std::string("cannot create a pipe: ") + std::strerror(errno));
  }

  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(out[0]), ::close(out[1]), ::close(exec_err[0]), ::close(exec_err[1]);
    if (log_fd >= 0) ::close(log_fd);
    throw Error(std::string("cannot fork: ") + std::strerror(e));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD, SIGHUP}) ::signal(sig, SIG_DFL);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::execve(argv[0], argv.data(), envp.data());
    int e = errno;
    ssize_t ignored = ::write(exec_err[1], &e, sizeof(e));
    (void)ignored;
    ::_exit(127);
  }
  // Also set the group from this side, so it is in place before we might signal it.
  ::setpgid(pid, pid);
  ::close(out[1]);
  ::close(exec_err[1]);
  int e = 0;
  ssize_t n;
  do n = ::read(exec_err[0], &e, sizeof(e));
  while (n < 0 && errno == EINTR);
  ::close(exec_err[0]);
  if (n == sizeof(e)) {
    ::waitpid(pid, nullptr, 0);
    ::close(out[0]);
    if (log_fd >= 0) ::close(log_fd);
    throw Error("cannot run " + spec.program + ": " + std::strerror(e));
  }

  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->pid_ = pid;
  child->reader_ = std::thread(&ChildProcess::read_output, child.get(), out[0], log_fd, spec.echo);
  return child;
}

void ChildProcess::read_output(int fd, int log_fd, bool echo) {
  char buf[8192];
  std::string partial;
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (log_fd >= 0) {
      ssize_t ignored = ::write(log_fd, buf, static_cast<size_t>(n));
      (void)ignored;
    }
    if (echo) {
      ssize_t ignored = ::write(2, buf, static_cast<size_t>(n));
      (void)ignored;
    }
    partial.append(buf, static_cast<size_t>(n));
    size_t start = 0, nl;
    std::lock_guard<std::mutex> lock(mu_);
    while ((nl = partial.find('\n', start)) != std::string::npos) {
      lines_.emplace_back(partial, start, nl - start);
      if (lines_.size() > kKeptLines) lines_.pop_front();
      start = nl + 1;
    }
    partial.erase(0, start);
  }
  ::close(fd);
  if (log_fd >= 0) ::close(log_fd);
  std::lock_guard<std::mutex> lock(mu_);
  if (!partial.empty()) lines_.push_back(partial);
  output_done_ = true;
  drained_.notify_all();
}

bool ChildProcess::running() {
  if (status_) return false;
  siginfo_t info{};
  // WNOWAIT: seen, not reaped (see the header).
  if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) return false;
  if (info.si_pid != pid_) return true;
  status_ = info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
  return false;
}

std::optional<int> ChildProcess::exit_code() {
  running();
  return status_;
}

void ChildProcess::stop(std::chrono::milliseconds grace) {
  if (reaped_) return;
  if (running()) {
    ::kill(-pid_, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + grace;
    while (running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Anything left in the group (helpers the engine started, or the child itself after the grace)
  // goes; the child is still unreaped here, so the group id is still ours.
  ::kill(-pid_, SIGKILL);
  int status;
  pid_t r;
  do r = ::waitpid(pid_, &status, 0);
  while (r < 0 && errno == EINTR);
  if (r == pid_ && !status_) status_ = decode_status(status);
  reaped_ = true;
  if (reader_.joinable()) reader_.join();
}

ChildProcess::~ChildProcess() { stop(); }

std::vector<std::string> ChildProcess::last_lines(size_t max) {
  const bool exited = !running();
  std::unique_lock<std::mutex> lock(mu_);
  if (exited) drained_.wait_for(lock, std::chrono::milliseconds(500), [this] { return output_done_; });
  size_t n = std::min(max, lines_.size());
  return std::vector<std::string>(lines_.end() - static_cast<std::ptrdiff_t>(n), lines_.end());
}

}  // namespace onebit
