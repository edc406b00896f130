#include "recipes/recipe_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace onebit {
namespace {

const char* const kNoStore = "no user recipe store: neither XDG_CONFIG_HOME nor HOME is an absolute path";

bool absolute(const char* path) { return path != nullptr && path[0] == '/'; }

// The store's text, or nullopt when there is no such file.
std::optional<std::string> read_store(const std::string& path) {
  if (path.empty()) return std::nullopt;
  struct stat st{};
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    throw Error(path + ": cannot read the recipes file: " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) throw Error(path + ": cannot read the recipes file: it is a directory");
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in || in.bad()) throw Error(path + ": cannot read the recipes file");
  return text.str();
}

[[noreturn]] void write_failed(const std::string& path, const std::string& tmp, int fd, int err) {
  if (fd >= 0) close(fd);
  unlink(tmp.c_str());
  throw Error(path + ": cannot write: " + std::strerror(err));
}

}  // namespace

std::string recipe_store_path(const char* xdg_config_home, const char* home) {
  if (absolute(xdg_config_home)) return std::string(xdg_config_home) + "/1bit/recipes.json";
  if (absolute(home)) return std::string(home) + "/.config/1bit/recipes.json";
  return "";
}

std::string recipe_store_path() { return recipe_store_path(std::getenv("XDG_CONFIG_HOME"), std::getenv("HOME")); }

std::string required_recipe_store_path() {
  std::string path = recipe_store_path();
  if (path.empty()) throw Error(kNoStore);
  return path;
}

std::optional<RecipeSet> load_recipe_store(const std::string& path, const EngineArgs& engine) {
  std::optional<std::string> text = read_store(path);
  if (!text) return std::nullopt;
  return parse_recipes(*text, path, engine);
}

void remove_from_recipe_store(const std::string& path, const std::string& id, const EngineArgs& engine) {
  if (path.empty()) throw Error(kNoStore);
  std::optional<std::string> text = read_store(path);
  if (!text) throw Error("no recipe \"" + id + "\" in the user store (" + path + ": no such file)");
  const RecipeSet set = parse_recipes(*text, path, engine);  // a malformed store is not rewritten
  if (std::none_of(set.recipes.begin(), set.recipes.end(), [&](const Recipe& r) { return r.id == id; }))
    throw Error("no recipe \"" + id + "\" in the user store (" + path + ")");
  // The file's own key order stays: ordered_json keeps the keys as they were read.
  auto file = nlohmann::ordered_json::parse(*text);
  auto& list = file["recipes"];
  list.erase(std::remove_if(list.begin(), list.end(), [&](const auto& r) { return r["id"] == id; }), list.end());
  const std::string out = file.dump(2) + "\n";
  parse_recipes(out, path, engine);  // what replaces the store is a valid store
  write_file_atomically(path, out);
}

void write_file_atomically(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp-XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) throw Error(path + ": cannot write: " + std::strerror(errno));
  struct stat st{};
  if (stat(path.c_str(), &st) == 0 && fchmod(fd, st.st_mode & 07777) != 0) write_failed(path, tmp, fd, errno);
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) write_failed(path, tmp, fd, errno);
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) write_failed(path, tmp, fd, errno);
  if (close(fd) != 0) write_failed(path, tmp, -1, errno);
  if (rename(tmp.c_str(), path.c_str()) != 0) write_failed(path, tmp, -1, errno);
}

std::string RecipeLayer::title() const {
  if (name == "user") return "user store " + set.origin;
  if (name == "file") return "recipes file " + set.origin;
  return set.origin;
}

RecipeChoice::RecipeChoice(const std::string& file, bool none, const EngineArgs& engine, const std::string& store)
    : none_(none), store_(store) {
  if (none) return;
  if (std::optional<RecipeSet> user = load_recipe_store(store, engine)) layers_.push_back({"user", std::move(*user)});
  if (file.empty()) layers_.push_back({"built-in", builtin_recipes()});
  else layers_.push_back({"file", load_recipes_file(file, engine)});
  for (const RecipeLayer& layer : layers_) {
    applied_.origin += (applied_.origin.empty() ? "" : ", then ") + layer.title();
    for (const Recipe& r : layer.set.recipes)
      if (layer_of(r.id) == &layer) applied_.recipes.push_back(r);
  }
}

const RecipeLayer* RecipeChoice::layer_of(const std::string& id) const {
  for (const RecipeLayer& layer : layers_)
    for (const Recipe& r : layer.set.recipes)
      if (r.id == id) return &layer;
  return nullptr;
}

std::string RecipeVerdict::text() const {
  return mismatch.empty() ? "applies on " + recipe_devices(*recipe) : "does not apply: " + mismatch;
}

std::vector<RecipeVerdict> judge_recipes(const RecipeChoice& choice, const ModelFacts& facts,
                                         const RecipeMachine& machine) {
  RecipeTarget target{"", "", "none", &facts, machine};
  std::vector<RecipeVerdict> out;
  for (const RecipeLayer& layer : choice.layers())
    for (const Recipe& r : layer.set.recipes) {
      const RecipeLayer* owner = choice.layer_of(r.id);
      out.push_back({&layer, &r,
                     owner != &layer ? "replaced by the recipe of the same id in the " + owner->title()
                                     : recipe_mismatch(r, target, /*ignore_device=*/true)});
    }
  return out;
}

}  // namespace onebit
