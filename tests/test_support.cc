#include "test_support.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "base/error.h"
#include "http/conn.h"
#include "ggml.h"
#include "gguf.h"

namespace onebit::testing {
namespace {

// Every test process gets a private, empty XDG_CONFIG_HOME before any test runs, and every
// process it starts (1bit serve, lemonade, bench's serves, the engines) inherits it: a test must
// never read the developer's own recipe store (~/.config/1bit/recipes.json), whose recipes would
// change what serve plans and prints. A test that wants a store writes one under its own TempDir
// and passes that XDG_CONFIG_HOME to the child it starts. (tests/CMakeLists.txt links this file
// as an object library, so this runs in every test program, whatever it uses from here.)
struct PrivateConfigHome {
  PrivateConfigHome() : owner(getpid()) {
    const char* base = std::getenv("TMPDIR");
    path = std::string(base && *base ? base : "/tmp") + "/1bit-test-config-XXXXXX";
    if (mkdtemp(path.data()) == nullptr) std::abort();
    setenv("XDG_CONFIG_HOME", path.c_str(), 1);
  }
  ~PrivateConfigHome() {
    if (getpid() != owner) return;  // a forked child leaves the directory to its parent
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  pid_t owner;
  std::string path;
};
const PrivateConfigHome private_config_home;

}  // namespace

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/1bit-test-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void write_gguf(const std::string& path, const std::vector<std::pair<std::string, KvValue>>& kv,
                const std::vector<std::string>& tensors) {
  gguf_context* g = gguf_init_empty();
  for (const auto& [key, value] : kv) {
    const char* k = key.c_str();
    if (auto s = std::get_if<std::string>(&value)) gguf_set_val_str(g, k, s->c_str());
    else if (auto u = std::get_if<uint32_t>(&value)) gguf_set_val_u32(g, k, *u);
    else if (auto i = std::get_if<int32_t>(&value)) gguf_set_val_i32(g, k, *i);
    else if (auto u64 = std::get_if<uint64_t>(&value)) gguf_set_val_u64(g, k, *u64);
    else if (auto f = std::get_if<float>(&value)) gguf_set_val_f32(g, k, *f);
    else if (auto b = std::get_if<bool>(&value)) gguf_set_val_bool(g, k, *b);
    else if (auto a = std::get_if<std::vector<int32_t>>(&value)) gguf_set_arr_data(g, k, GGUF_TYPE_INT32, a->data(), a->size());
  }
  ggml_init_params ip{ggml_tensor_overhead() * (tensors.size() + 1), nullptr, true};
  ggml_context* meta = ggml_init(ip);
  for (const auto& name : tensors) {
    ggml_tensor* t = ggml_new_tensor_1d(meta, GGML_TYPE_F32, 8);
    ggml_set_name(t, name.c_str());
    gguf_add_tensor(g, t);
  }
  bool ok = gguf_write_to_file(g, path.c_str(), /*only_meta=*/true);
  ggml_free(meta);
  gguf_free(g);
  if (!ok) throw std::runtime_error("cannot write " + path);
  std::ofstream(path, std::ios::app | std::ios::binary) << std::string(32 * tensors.size(), '\0');
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string onebit_binary() { return ONEBIT_TEST_BIN_DIR "/1bit"; }
std::string llama_server_binary() { return ONEBIT_TEST_BIN_DIR "/llama-server"; }
std::vector<std::string> proc_strings(int pid, const char* what) {
  const std::string bytes = read_file("/proc/" + std::to_string(pid) + "/" + what);
  std::vector<std::string> out;
  for (size_t at = 0; at < bytes.size();) {
    const size_t end = bytes.find('\0', at);
    out.push_back(bytes.substr(at, end - at));
    at = end == std::string::npos ? bytes.size() : end + 1;
  }
  return out;
}

std::string proc_env(int pid, const std::string& name) {
  for (const std::string& kv : proc_strings(pid, "environ"))
    if (kv.size() > name.size() && kv.compare(0, name.size(), name) == 0 && kv[name.size()] == '=')
      return kv.substr(name.size() + 1);
  return "";
}

bool wait_engine_healthy(int port, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (http_fetch("127.0.0.1", port, "GET", "/health").status != 200) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

KillPidInFile::~KillPidInFile() {
  std::ifstream in(path_);
  pid_t pid = 0;
  if (in >> pid && pid > 0) ::kill(pid, SIGKILL);
}

std::string fake_backend_binary() { return ONEBIT_TEST_BIN_DIR "/fake_llama_server"; }
std::string vocab_dir() { return ONEBIT_TEST_VOCAB_DIR; }
std::string source_dir() { return ONEBIT_TEST_SOURCE_DIR; }
std::string engine_prefix() { return ONEBIT_TEST_ENGINE_PREFIX; }

}  // namespace onebit::testing
