// Helpers shared by the tests: scratch directories, small GGUF files with chosen metadata, and
// paths of the things the build made.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace onebit::testing {

// A fresh directory under $TMPDIR, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

using KvValue = std::variant<std::string, uint32_t, int32_t, uint64_t, float, bool, std::vector<int32_t>>;

// Writes a GGUF holding only the given metadata and tiny tensors of the given names, for facts
// tests.
void write_gguf(const std::string& path, const std::vector<std::pair<std::string, KvValue>>& kv,
                const std::vector<std::string>& tensors = {"token_embd.weight"});
void write_file(const std::string& path, const std::string& bytes);
// The message of the onebit::Error that `f` throws, or "" when it throws none.
std::string error_of(const std::function<void()>& f);
std::string read_file(const std::string& path);

// /proc/<pid>/<what> split at NULs: a process's argv ("cmdline") or environment ("environ").
std::vector<std::string> proc_strings(int pid, const char* what);
// The value of `name` in a running process's environment; empty when unset.
std::string proc_env(int pid, const std::string& name);

// Polls GET /health of an engine on 127.0.0.1:port until it answers 200; false after `timeout`.
bool wait_engine_healthy(int port, std::chrono::milliseconds timeout);

// Kills, on destruction, the process whose pid `path` holds, if the file was written: for
// processes a test's fake engine leaves running on purpose.
class KillPidInFile {
 public:
  explicit KillPidInFile(std::string path) : path_(std::move(path)) {}
  ~KillPidInFile();
  KillPidInFile(const KillPidInFile&) = delete;
  KillPidInFile& operator=(const KillPidInFile&) = delete;

 private:
  std::string path_;
};

// Paths baked in by tests/CMakeLists.txt.
std::string onebit_binary();       // build/bin/1bit
std::string llama_server_binary(); // build/bin/llama-server
std::string fake_backend_binary(); // the fake llama-server for argv/env checks
std::string vocab_dir();           // the engine's models/ with ggml-vocab-*.gguf
std::string source_dir();          // the checkout
std::string engine_prefix();       // the engine build this 1bit links (engine.json says how it was built)

}  // namespace onebit::testing
