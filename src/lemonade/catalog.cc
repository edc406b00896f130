#include "lemonade/catalog.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/embedded.h"
#include "base/error.h"
#include "model/gguf_facts.h"

namespace fs = std::filesystem;

namespace onebit {
namespace {

// The labels a model's own metadata implies: embedding and reranking models say so by their
// pooling type.
std::vector<std::string> labels_from_facts(const ModelFacts& facts) {
  const std::string kind = model_kind(facts);
  if (kind == "embedding") return {"embeddings"};
  if (kind == "reranking") return {"reranking"};
  return {};
}

using nlohmann::json;

const json& registry() {
  static const json r = json::parse(embedded::kLemonadeModelsJson);
  return r;
}

bool inside(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
}

bool is_gguf_file(const fs::path& p) {
  std::error_code ec;
  return p.extension() == ".gguf" && fs::is_regular_file(p, ec);
}

// Physical memory in GB: models larger than 80% of it are left out of the default listing.
double memory_gb() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long long kb = 0;
  while (in >> key >> kb)
    if (key == "MemTotal:") return static_cast<double>(kb) * 1024.0 / 1e9;
  return 0;
}

double gigabytes(const std::string& path) {
  std::error_code ec;
  auto n = fs::file_size(path, ec);
  return ec ? 0.0 : static_cast<double>(n) / 1e9;
}

}  // namespace

std::string CatalogEntry::type() const {
  if (std::find(labels.begin(), labels.end(), "embeddings") != labels.end()) return "embedding";
  if (std::find(labels.begin(), labels.end(), "reranking") != labels.end()) return "reranking";
  return "llm";
}

Catalog::Catalog(std::vector<std::string> model_dirs, std::string state_dir) {
  for (const auto& d : model_dirs) {
    std::error_code ec;
    fs::path c = fs::canonical(d, ec);
    if (ec || !fs::is_directory(c)) throw Error(d + ": not a directory");
    if (std::find(dirs_.begin(), dirs_.end(), c.string()) == dirs_.end()) dirs_.push_back(c.string());
  }
  std::error_code ec;
  fs::create_directories(state_dir, ec);
  state_file_ = (fs::path(state_dir) / "lemonade-state.json").string();
  user_ = json::object();
  options_ = json::object();
  std::ifstream in(state_file_);
  if (in) {
    json s = json::parse(in, nullptr, false);
    if (s.is_object()) {
      if (s.contains("user_models") && s["user_models"].is_object()) user_ = s["user_models"];
      if (s.contains("options") && s["options"].is_object()) options_ = s["options"];
    }
  }
}

std::string Catalog::resolve(const std::string& checkpoint) const {
  if (checkpoint.empty()) return "";
  std::vector<fs::path> candidates;
  if (fs::path(checkpoint).is_absolute()) candidates.emplace_back(checkpoint);
  else
    for (const auto& d : dirs_) candidates.push_back(fs::path(d) / checkpoint);
  for (const auto& c : candidates) {
    std::error_code ec;
    fs::path real = fs::canonical(c, ec);
    if (ec || !is_gguf_file(real)) continue;
    for (const auto& d : dirs_)
      if (inside(real.string(), d)) return real.string();
  }
  return "";
}

std::vector<CatalogEntry> Catalog::list_all(bool all) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CatalogEntry> out;
  std::vector<std::string> claimed;  // files that a registry or user entry names
  for (auto it = registry().begin(); it != registry().end(); ++it) {
    CatalogEntry e;
    e.id = it.key();
    e.checkpoint = it->value("checkpoint", "");
    e.labels = it->value("labels", std::vector<std::string>{});
    e.suggested = it->value("suggested", false);
    if (it->contains("size")) e.size_gb = (*it)["size"].get<double>();
    e.path = resolve(e.checkpoint);
    if (!e.path.empty()) {
      e.size_gb = gigabytes(e.path);
      claimed.push_back(e.path);
    }
    if (all || !e.path.empty()) out.push_back(e);
  }
  for (auto it = user_.begin(); it != user_.end(); ++it) {
    CatalogEntry e;
    e.id = it.key();
    e.user = true;
    e.checkpoint = it->value("checkpoint", "");
    e.labels = it->value("labels", std::vector<std::string>{});
    e.path = resolve(e.checkpoint);
    if (!e.path.empty()) {
      e.size_gb = gigabytes(e.path);
      claimed.push_back(e.path);
    }
    if (all || !e.path.empty()) out.push_back(e);
  }
  // GGUFs on disk that nothing names: listed under their file name (a directory level deep, as
  // models often sit in a folder of their own).
  for (const auto& d : dirs_) {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(d, fs::directory_options::skip_permission_denied, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      if (it.depth() > 1) it.disable_recursion_pending();
      fs::path real = fs::canonical(it->path(), ec);
      if (ec || !is_gguf_file(real) || !inside(real.string(), d)) continue;
      if (std::find(claimed.begin(), claimed.end(), real.string()) != claimed.end()) continue;
      claimed.push_back(real.string());
      CatalogEntry e;
      e.id = real.stem().string();
      e.checkpoint = fs::relative(real, d).string();
      e.path = real.string();
      e.labels = implied_labels(e.path);
      e.size_gb = gigabytes(e.path);
      if (std::none_of(out.begin(), out.end(), [&](const CatalogEntry& x) { return x.id == e.id; })) out.push_back(e);
    }
  }
  return out;
}

std::vector<CatalogEntry> Catalog::list(bool all) const {
  std::vector<CatalogEntry> entries = list_all(all);
  if (all) return entries;
  // As Lemonade does: what would not fit in memory is listed only with show_all.
  static const double limit = 0.8 * memory_gb();
  std::erase_if(entries, [](const CatalogEntry& e) { return limit > 0 && e.size_gb && *e.size_gb > limit; });
  return entries;
}

std::optional<CatalogEntry> Catalog::find(const std::string& id) const {
  for (auto& e : list(true))
    if (e.id == id) return e;
  return std::nullopt;
}

CatalogEntry Catalog::pull(const std::string& name, const std::string& checkpoint, const std::vector<std::string>& labels) {
  if (name.empty()) throw Error("model_name is required");
  const std::string id = name.rfind("user.", 0) == 0 ? name : "user." + name;
  for (char c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_'))
      throw Error("model_name \"" + name + "\": use letters, digits, '.', '-' and '_' only");
  const std::string path = resolve(checkpoint);
  if (path.empty()) {
    const fs::path cp(checkpoint);
    std::error_code ec;
    if (cp.is_absolute() || checkpoint.find("..") != std::string::npos || cp.extension() == ".gguf" || fs::exists(cp, ec))
      throw Error("checkpoint \"" + checkpoint + "\" is not a GGUF file inside the models directories");
    throw Error("cannot pull \"" + checkpoint + "\": this server does not download models (it has no network "
                "access to model hubs); copy the GGUF into a models directory and pull it by file name");
  }
  // A file that is no model is refused now, not at load; without labels, its metadata's apply.
  const ModelFacts facts = read_model_facts(path);
  const std::vector<std::string> kept = labels.empty() ? labels_from_facts(facts) : labels;
  std::lock_guard<std::mutex> lock(mu_);
  user_[id] = {{"checkpoint", path}, {"labels", kept}};
  persist();
  CatalogEntry e;
  e.id = id;
  e.user = true;
  e.checkpoint = path;
  e.labels = kept;
  e.path = path;
  e.size_gb = gigabytes(path);
  return e;
}

std::vector<std::string> Catalog::implied_labels(const std::string& path) const {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  Implied& known = implied_[path];
  const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (known.mtime_ns != mtime_ns || known.size != st.st_size) {
    known.mtime_ns = mtime_ns;
    known.size = st.st_size;
    try {
      known.labels = labels_from_facts(read_model_facts(path));
    } catch (const Error&) {
      known.labels.clear();  // loading it will say what is wrong
    }
  }
  return known.labels;
}

bool Catalog::remove(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (user_.contains(id)) {
    user_.erase(id);
    options_.erase(id);
    persist();
    return true;
  }
  return false;
}

json Catalog::saved_options(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return options_.contains(id) ? options_[id] : json::object();
}

void Catalog::save_options(const std::string& id, const json& options) {
  std::lock_guard<std::mutex> lock(mu_);
  options_[id] = options;
  persist();
}

void Catalog::persist() const {
  const std::string tmp = state_file_ + ".tmp";
  {
    std::ofstream out(tmp);
    out << json{{"user_models", user_}, {"options", options_}}.dump(1) << "\n";
    if (!out) throw Error(state_file_ + ": cannot write");
  }
  fs::rename(tmp, state_file_);
}

json Catalog::to_json(const CatalogEntry& e, const json& options) {
  json j = {{"id", e.id},
            {"object", "model"},
            {"owned_by", e.user ? "user" : "1bit"},
            {"created", 0},
            {"checkpoint", e.checkpoint},
            {"recipe", "llamacpp"},
            {"downloaded", !e.path.empty()},
            {"suggested", e.suggested},
            {"labels", e.labels},
            {"recipe_options", options}};
  if (!e.path.empty()) {
    std::error_code ec;
    auto t = fs::last_write_time(e.path, ec);
    if (!ec)
      j["created"] = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::file_clock::to_sys(t).time_since_epoch()).count();
  }
  if (e.size_gb) j["size"] = std::round(*e.size_gb * 1000) / 1000;
  return j;
}

}  // namespace onebit
