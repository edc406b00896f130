#include "base/paths.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <vector>

namespace fs = std::filesystem;

namespace onebit {

std::string executable_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

std::string default_llama_server() { return (fs::path(executable_dir()) / "llama-server").string(); }

std::string engine_vocab_dir() {
  return (fs::path(executable_dir()) / ".." / "share" / "vocab").lexically_normal().string();
}

namespace {

std::vector<fs::path> model_dirs() {
  std::vector<fs::path> dirs;
  if (const char* d = std::getenv("ONEBIT_MODELS_DIR"); d && *d) dirs.emplace_back(d);
  const fs::path exe = executable_dir();
  dirs.push_back((exe / ".." / ".." / "models").lexically_normal());
  dirs.push_back((exe / ".." / "share" / "1bit" / "models").lexically_normal());
  return dirs;
}

}  // namespace

std::string default_models_dir() {
  for (const fs::path& dir : model_dirs()) {
    std::error_code ec;
    if (fs::is_directory(dir, ec)) return dir.string();
  }
  return "";
}

std::string default_model_path() {
  // 1bit-small where it is shipped; 1bit-tiny (kept for fast tests) otherwise. A family's drafters
  // are named 1bit-FAMILY-draft-* and 1bit-FAMILY-dflash-*.
  for (const fs::path& dir : model_dirs()) {
    for (const char* family : {"1bit-small-", "1bit-tiny-"}) {
      std::error_code ec;
      std::vector<std::string> found;
      for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(family, 0) == 0 && entry.path().extension() == ".gguf" &&
            name.find("-draft-") == std::string::npos && name.find("-dflash-") == std::string::npos)
          found.push_back(entry.path().lexically_normal().string());
      }
      if (!found.empty()) return *std::min_element(found.begin(), found.end());
    }
  }
  return "";
}

}  // namespace onebit
