#include "subprocess.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace onebit::testing {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int decode(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

std::atomic<int> g_counter{0};

}  // namespace

Subprocess::Subprocess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                       const std::string& dir) {
  int n = g_counter++;
  out_path_ = dir + "/proc" + std::to_string(n) + ".out";
  err_path_ = dir + "/proc" + std::to_string(n) + ".err";
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq) merged[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
  }
  for (const auto& [k, v] : env) merged[k] = v;
  std::vector<std::string> envs;
  for (const auto& [k, v] : merged) envs.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : envs) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int rc = posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
}

Subprocess::~Subprocess() {
  if (!status_) {
    ::kill(pid_, SIGKILL);
    wait(std::chrono::seconds(10));
  }
}

std::optional<int> Subprocess::wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!status_) {
    int status;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      status_ = decode(status);
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status_;
}

void Subprocess::signal(int sig) const { ::kill(pid_, sig); }
std::string Subprocess::out() const { return slurp(out_path_); }
std::string Subprocess::err() const { return slurp(err_path_); }

bool Subprocess::wait_for_stderr(const std::string& text, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (err().find(text) != std::string::npos) return true;
    if (wait(std::chrono::milliseconds(0))) return err().find(text) != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

RunResult run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
              std::chrono::milliseconds timeout) {
  char tmpl[] = "/tmp/1bit-run-XXXXXX";
  std::string dir = mkdtemp(tmpl);
  RunResult r;
  {
    Subprocess p(argv, env, dir);
    auto code = p.wait(timeout);
    r.code = code ? *code : -1;
    r.out = p.out();
    r.err = p.err();
  }
  std::system(("rm -rf " + dir).c_str());
  return r;
}

bool process_alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string line;
  std::getline(stat, line);
  size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

bool wait_process_gone(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (process_alive(pid)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::vector<pid_t> child_pids(pid_t parent) {
  std::vector<pid_t> out;
  DIR* d = opendir("/proc");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state;
    pid_t ppid;
    rest >> state >> ppid;
    if (ppid == parent && state != 'Z') out.push_back(pid);
  }
  closedir(d);
  return out;
}

int serve_ready_port(Subprocess& serve, std::chrono::milliseconds timeout) {
  const std::string ready = "ready on http://127.0.0.1:";
  if (!serve.wait_for_stderr(ready, timeout)) return -1;
  const std::string err = serve.err();
  return std::atoi(err.c_str() + err.find(ready) + ready.size());
}

std::vector<pid_t> processes_mentioning(const std::string& needle) {
  std::vector<pid_t> out;
  for (pid_t pid = 1; pid < 4194304; ++pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
    if (!in) {
      if (pid > 100000) break;
      continue;
    }
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmd.find(needle) != std::string::npos && process_alive(pid) && pid != getpid()) out.push_back(pid);
  }
  return out;
}

}  // namespace onebit::testing
