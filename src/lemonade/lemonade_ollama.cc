#include "lemonade/lemonade_ollama.h"

#include <cctype>
#include <chrono>
#include <filesystem>

namespace onebit {
namespace {

// The catalog entry's model, when its file is on disk and readable.
std::optional<OllamaModel> on_disk(const CatalogEntry& e) {
  if (e.path.empty()) return std::nullopt;
  try {
    return ollama_model(e.id, read_model_facts(e.path));
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::string not_found(const std::string& name) { return "model \"" + name + "\" not found"; }

}  // namespace

std::vector<OllamaModel> LemonadeOllamaHost::models() {
  std::vector<OllamaModel> out;
  for (const CatalogEntry& e : catalog_.list(false))
    if (auto m = on_disk(e)) out.push_back(std::move(*m));
  return out;
}

std::optional<OllamaModel> LemonadeOllamaHost::find(const std::string& name) {
  const std::optional<CatalogEntry> e = catalog_.find(name);
  return e ? on_disk(*e) : std::nullopt;
}

std::vector<OllamaRunning> LemonadeOllamaHost::running() {
  std::vector<OllamaRunning> out;
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (const LoadedView& v : models_.loaded_views()) {
    if (v.expires_ms && *v.expires_ms <= now_ms) continue;  // on its way out
    OllamaRunning r;
    try {
      r.model = ollama_model(v.name, read_model_facts(v.path));
    } catch (const Error&) {
      continue;  // its file went away since it loaded
    }
    r.expires_ms = v.expires_ms;
    r.on_gpu = v.device != "cpu";
    r.meta = fetch_engine_meta(v.engine);
    out.push_back(std::move(r));
  }
  return out;
}

OllamaLease LemonadeOllamaHost::use(const std::string& name) {
  // The catalog alone decides (its metadata is read at load): no file read on every request.
  const std::optional<CatalogEntry> e = catalog_.find(name);
  if (!e || e->path.empty()) throw OllamaError(404, not_found(name));
  const auto start = std::chrono::steady_clock::now();
  try {
    auto lease = std::make_shared<ModelManager::Lease>(models_.acquire(name));
    const int64_t waited =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
    return {lease->engine(), waited, lease};
  } catch (const ModelError& e) {
    throw OllamaError(e.status, e.what());
  }
}

void LemonadeOllamaHost::keep_alive(const std::string& name, const KeepAlive& k) {
  models_.set_keep_alive(name, k.forever ? std::nullopt : std::optional<int64_t>(k.duration.count()));
}

void LemonadeOllamaHost::pull(const std::string& name) {
  if (const std::optional<CatalogEntry> e = catalog_.find(name)) {
    if (!e->path.empty()) return;  // on disk already: nothing to fetch
    throw OllamaError(400, "cannot pull " + name + " (" + e->checkpoint +
                               "): 1bit lemonade downloads nothing; copy its GGUF into a models directory");
  }
  // A GGUF in a models directory, by its file name: registered as user.<its name>.
  std::string id = std::filesystem::path(name).stem().string();
  for (char& c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) c = '-';
  try {
    catalog_.pull(id, name, {});
  } catch (const Error& e) {
    throw OllamaError(400, e.what());
  }
}

void LemonadeOllamaHost::remove(const std::string& name) {
  const std::optional<CatalogEntry> e = catalog_.find(name);
  if (!e) throw OllamaError(404, not_found(name));
  if (!e->user)
    throw OllamaError(400, name + " is a file in the models directory (" + e->checkpoint +
                               "), not a pulled model; remove the file to delete it");
  models_.unload(name);
  catalog_.remove(name);
}

}  // namespace onebit
