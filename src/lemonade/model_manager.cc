#include "lemonade/model_manager.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>

#include "base/shell.h"
#include "engine/device.h"
#include "engine/engine_args.h"
#include "engine/engine_key.h"
#include "engine/launch_plan.h"
#include "engine/port_owner.h"
#include "http/net.h"
#include "model/gguf_facts.h"
#include "recipes/recipes.h"
#include "rpc/rpc_endpoints.h"
#include "serve/serve_options.h"

namespace onebit {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

int64_t epoch_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Lemonade's backends take the first free port from 8001 up.
int free_port_from(int first) {
  for (int p = first; p < first + 2000; ++p) {
    try {
      Fd probe = listen_tcp("127.0.0.1", p, 1);
      return p;
    } catch (const Error&) {
    }
  }
  return pick_free_port("127.0.0.1");
}

// The load options of a request, checked: ctx_size, llamacpp_backend, llamacpp_args.
json checked_options(const json& request) {
  json o = json::object();
  if (request.contains("ctx_size") && !request["ctx_size"].is_null()) {
    if (!request["ctx_size"].is_number_integer() || request["ctx_size"].get<int64_t>() < 0)
      throw Error("ctx_size must be a non-negative integer");
    o["ctx_size"] = request["ctx_size"];
  }
  if (request.contains("llamacpp_backend") && !request["llamacpp_backend"].is_null()) {
    if (!request["llamacpp_backend"].is_string()) throw Error("llamacpp_backend must be a string");
    const std::string b = request["llamacpp_backend"];
    if (b != "cpu" && b != "cuda" && b != "vulkan" && b != "auto")
      throw Error("llamacpp_backend \"" + b + "\" is not one this server has (cpu, cuda, vulkan, auto)");
    o["llamacpp_backend"] = b;
  }
  if (request.contains("llamacpp_args") && !request["llamacpp_args"].is_null()) {
    if (!request["llamacpp_args"].is_string()) throw Error("llamacpp_args must be a string");
    shell_split(request["llamacpp_args"]);  // throws on unbalanced quotes
    o["llamacpp_args"] = request["llamacpp_args"];
  }
  if (request.contains("rpc") && !request["rpc"].is_null()) {
    if (!request["rpc"].is_string()) throw Error("rpc must be a string: HOST:PORT[,HOST:PORT...]");
    if (!request["rpc"].get<std::string>().empty()) parse_rpc_endpoints(request["rpc"], "rpc");
    o["rpc"] = request["rpc"];
  }
  return o;
}

}  // namespace

json ModelError::to_json() const {
  return {{"error", {{"message", what()}, {"type", status >= 500 ? "server_error" : "invalid_request_error"},
                     {"param", "model"}, {"code", code}, {"requested_model", model}}}};
}

ModelManager::ModelManager(Catalog& catalog, ManagerConfig config) : catalog_(catalog), config_(std::move(config)) {
  spawner_ = std::thread(&ModelManager::spawner, this);
  try {
    auto_device_ = resolve_device("auto", config_.llama_server);
  } catch (const Error&) {
    auto_device_ = {"cpu", ""};
  }
  if (const std::string note = unnamed_gpu_note("1bit lemonade", config_.recipes, auto_device_); !note.empty())
    std::cerr << note << "\n";
  monitor_ = std::thread(&ModelManager::monitor, this);
}

ModelManager::~ModelManager() {
  {
    std::lock_guard<std::mutex> lock(spawn_mu_);
    stopping_ = true;
  }
  spawn_cv_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  std::map<std::string, std::shared_ptr<LoadedModel>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.swap(loaded_);
  }
  for (auto& [name, m] : all) m->engine->stop();
  all.clear();
  if (spawner_.joinable()) spawner_.join();
}

void ModelManager::spawner() {
  std::unique_lock<std::mutex> lock(spawn_mu_);
  while (true) {
    spawn_cv_.wait(lock, [this] { return stopping_ || !spawn_queue_.empty(); });
    if (spawn_queue_.empty()) return;
    auto task = std::move(spawn_queue_.front());
    spawn_queue_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

std::unique_ptr<ChildProcess> ModelManager::spawn(const ChildSpec& spec) {
  auto task = std::make_shared<std::packaged_task<std::unique_ptr<ChildProcess>()>>(
      [&spec] { return ChildProcess::start(spec); });
  auto result = task->get_future();
  {
    std::lock_guard<std::mutex> lock(spawn_mu_);
    if (stopping_) throw Error("the server is stopping");
    spawn_queue_.push_back([task] { (*task)(); });
  }
  spawn_cv_.notify_all();
  return result.get();
}

void ModelManager::launch_backend(const CatalogEntry& e, const ServeOptions& o, const ModelFacts& facts,
                                  const std::string& device, LoadedModel& m) {
  auto fail = [&](const std::string& why) { return ModelError(500, "model_load_error", e.id + ": " + why, e.id); };
  LaunchInputs in;
  in.options = &o;
  in.model_path = e.path;
  in.model = &facts;
  in.program = config_.llama_server;
  in.where = {device, auto_device_.gpu};  // the GPU counts only where device is cuda
  if (device == auto_device_.device) in.where.devices = auto_device_.devices;
  // The engine aborts on a worker it cannot reach: check each one first, and name the devices.
  if (!o.rpc.empty()) {
    try {
      check_rpc_workers(o.rpc);
      for (const auto& line : rpc_devices(config_.llama_server, o.rpc)) in.rpc_devices.push_back(device_name(line));
    } catch (const Error& err) {
      throw fail(err.what());
    }
  }
  in.recipes = config_.recipes;
  in.environment = current_environment();
  try {
    for (const auto& line : plan_launch(in, EngineArgs::builtin()).recipe_lines("1bit lemonade: " + e.id))
      std::cerr << line << "\n";
    const std::string log = config_.log_dir.empty() ? "" : config_.log_dir + "/" + e.id + ".log";
    EngineLaunch launch;
    launch.name = "the engine";
    launch.command = [&](int port) {
      in.port = port;
      const LaunchPlan plan = plan_launch(in, EngineArgs::builtin());
      return ChildSpec{plan.program, plan.args, with_engine_key(plan.env_added, m.key), plan.env_removed, log, false};
    };
    launch.pick_port = [] { return free_port_from(8001); };
    launch.on_new_port = [&](int taken, int) {
      std::cerr << "1bit lemonade: " << e.id << ": port " << taken << " was taken by another program; trying another\n";
    };
    launch.spawn = [this](const ChildSpec& spec) { return spawn(spec); };
    m.engine = std::make_unique<EngineProcess>(std::move(launch));
    const bool ready = wait_until_ready({m.engine.get()}, config_.load_timeout_s, [this](auto d) {
      std::unique_lock<std::mutex> lock(spawn_mu_);
      return spawn_cv_.wait_for(lock, d, [this] { return stopping_; });
    });
    if (!ready) throw Error("the server is stopping");
  } catch (const Error& err) {
    m.engine.reset();
    throw fail(err.what());
  }
}

std::shared_ptr<LoadedModel> ModelManager::start_backend(const CatalogEntry& e, const json& options) {
  auto fail = [&](const std::string& why) { return ModelError(500, "model_load_error", e.id + ": " + why, e.id); };
  ModelFacts facts;
  try {
    facts = read_model_facts(e.path);
  } catch (const Error& err) {
    throw fail(err.what());
  }
  ServeOptions o;
  if (options.contains("ctx_size")) o.ctx_size = options["ctx_size"].get<int64_t>();
  if (e.type() == "embedding") o.engine_args.push_back("--embeddings");
  if (e.type() == "reranking") o.engine_args.push_back("--reranking");
  for (auto& a : shell_split(options.value("llamacpp_args", ""))) o.engine_args.push_back(a);
  if (const std::string rpc = options.value("rpc", ""); !rpc.empty()) o.rpc = parse_rpc_endpoints(rpc, "rpc");
  std::string device = options.value("llamacpp_backend", "auto");
  if (device == "auto") device = auto_device_.device;
  // A GPU backend is the one auto found at start, or none.
  if (device != "cpu" && device != auto_device_.device)
    throw fail("the " + device + " backend is not available here (" + why_no_device(device) + ")");

  auto m = std::make_shared<LoadedModel>();
  m->name = e.id;
  m->checkpoint = e.checkpoint;
  m->path = e.path;
  m->type = e.type();
  m->device = device;
  m->options = options;
  m->key = new_engine_key();
  launch_backend(e, o, facts, device, *m);
  m->last_use_ms = epoch_ms();
  std::cerr << "1bit lemonade: loaded " << e.id << " on " << device << " at http://127.0.0.1:" << m->engine->port() << "\n";
  return m;
}

void ModelManager::stop_when_idle(std::unique_lock<std::mutex>& lock, std::shared_ptr<LoadedModel> m) {
  m->stopping = true;
  idle_cv_.wait(lock, [&] { return m->busy == 0; });
  loaded_.erase(m->name);
  lock.unlock();
  m->engine->stop();
  std::cerr << "1bit lemonade: unloaded " << m->name << "\n";
  lock.lock();
}

json ModelManager::load(const std::string& name, const json& request) {
  json req_options = checked_options(request);
  std::lock_guard<std::mutex> load_lock(load_mu_);
  return load_locked(name, request, req_options, false);
}

json ModelManager::load_locked(const std::string& name, const json& request, const json& req_options,
                               bool only_if_missing) {
  std::optional<CatalogEntry> e = catalog_.find(name);
  if (!e) throw ModelError(404, "model_not_found", "model \"" + name + "\" is not in the catalog", name);
  if (e->path.empty())
    throw ModelError(500, "model_load_error",
                     name + " is not downloaded, and this server cannot download it (" + e->checkpoint +
                         "); copy its GGUF into a models directory", name);
  if (request.value("save_options", false)) catalog_.save_options(name, req_options);
  json options = json::object();
  if (config_.ctx_size) options["ctx_size"] = *config_.ctx_size;
  if (!config_.llamacpp_args.empty()) options["llamacpp_args"] = config_.llamacpp_args;
  if (!config_.rpc.empty()) options["rpc"] = config_.rpc;
  const json saved = catalog_.saved_options(name);  // a named copy: items() of a temporary would dangle
  for (auto& [k, v] : saved.items()) options[k] = v;
  for (auto& [k, v] : req_options.items()) options[k] = v;

  std::unique_lock<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<LoadedModel>> evicted;  // unloaded for this load, in order
  if (auto it = loaded_.find(name); it != loaded_.end()) {
    if (only_if_missing && it->second->engine->running())
      return {{"status", "success"}, {"model_name", name}, {"checkpoint", e->checkpoint}, {"recipe", "llamacpp"}};
    if (it->second->engine->running()) evicted.push_back(it->second);  // a dead one is not given back
    stop_when_idle(lock, it->second);
  }
  while (config_.max_loaded >= 0) {
    std::shared_ptr<LoadedModel> lru;
    int count = 0;
    for (auto& [n, m] : loaded_)
      if (m->type == e->type()) {
        ++count;
        if (!lru || m->last_use_ms < lru->last_use_ms) lru = m;
      }
    if (count < config_.max_loaded || !lru) break;
    stop_when_idle(lock, lru);
    evicted.push_back(lru);
  }
  // A worker serves one engine at a time: a second engine would wait on it for ever.
  if (const std::string rpc = options.value("rpc", ""); !rpc.empty()) {
    const std::vector<RpcEndpoint> wanted = parse_rpc_endpoints(rpc, "rpc");
    for (const auto& [other, loaded] : loaded_) {
      const std::string theirs = loaded->options.value("rpc", "");
      if (theirs.empty()) continue;
      for (const auto& w : parse_rpc_endpoints(theirs, "rpc")) {
        if (std::find(wanted.begin(), wanted.end(), w) == wanted.end()) continue;
        lock.unlock();
        restore(evicted);
        throw ModelError(409, "model_load_error",
                         name + ": rpc worker " + w.text() + " serves " + other +
                             " (a worker serves one engine at a time); unload " + other + " first",
                         name);
      }
    }
  }
  lock.unlock();
  std::shared_ptr<LoadedModel> m;
  try {
    m = start_backend(*e, options);
  } catch (const ModelError&) {
    restore(evicted);
    throw;
  }
  lock.lock();
  loaded_[name] = m;
  return {{"status", "success"}, {"model_name", name}, {"checkpoint", e->checkpoint}, {"recipe", "llamacpp"}};
}

void ModelManager::restore(const std::vector<std::shared_ptr<LoadedModel>>& evicted) {
  for (const auto& gone : evicted) {
    std::optional<CatalogEntry> entry = catalog_.find(gone->name);
    if (!entry) continue;  // deleted from the catalog since
    try {
      auto again = start_backend(*entry, gone->options);
      std::lock_guard<std::mutex> lock(mu_);
      loaded_[gone->name] = again;
      std::cerr << "1bit lemonade: loaded " << gone->name << " again after the failed load\n";
    } catch (const ModelError& err) {
      std::cerr << "1bit lemonade: " << err.what() << "\n";
    }
  }
}

ModelManager::Lease ModelManager::acquire(const std::string& name) {
  // A model that is loaded, running and not on its way out.
  auto lease_if_servable = [&]() -> std::optional<Lease> {
    auto it = loaded_.find(name);
    if (it == loaded_.end() || it->second->stopping || !it->second->engine->running()) return std::nullopt;
    it->second->busy++;
    it->second->last_use_ms = epoch_ms();
    last_used_ = name;
    return Lease(this, it->second);
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto lease = lease_if_servable()) return std::move(*lease);
  }
  // Load it (unless a request ahead of this one did) and take the lease before the load lock is
  // let go, so that no other load can evict it in between.
  std::lock_guard<std::mutex> load_lock(load_mu_);
  load_locked(name, json::object(), json::object(), true);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto lease = lease_if_servable()) return std::move(*lease);
  throw ModelError(500, "model_load_error", name + ": the engine exited right after it loaded", name);
}

ModelManager::Lease::~Lease() {
  if (m_ != nullptr && model_) m_->release(*model_);
}

void ModelManager::release(LoadedModel& m) {
  std::lock_guard<std::mutex> lock(mu_);
  m.busy--;
  m.last_use_ms = epoch_ms();
  idle_cv_.notify_all();
}

bool ModelManager::unload(const std::string& name) {
  std::lock_guard<std::mutex> load_lock(load_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  auto it = loaded_.find(name);
  if (it == loaded_.end()) return false;
  stop_when_idle(lock, it->second);
  return true;
}

void ModelManager::unload_all() {
  std::lock_guard<std::mutex> load_lock(load_mu_);
  std::unique_lock<std::mutex> lock(mu_);
  while (!loaded_.empty()) stop_when_idle(lock, loaded_.begin()->second);
}

bool ModelManager::set_keep_alive(const std::string& name, std::optional<int64_t> ms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = loaded_.find(name);
  if (it == loaded_.end()) return false;
  it->second->keep_alive_ms = ms;
  return true;
}

void ModelManager::unload_expired() {
  // A load in progress holds load_mu_ for as long as it takes: try again on the next round
  // rather than hold up the watch over dead backends.
  std::unique_lock<std::mutex> load_lock(load_mu_, std::try_to_lock);
  if (!load_lock.owns_lock()) return;
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t now = epoch_ms();
  for (bool again = true; again;) {
    again = false;
    for (auto& [name, m] : loaded_)
      if (m->keep_alive_ms && m->busy == 0 && !m->stopping && now - m->last_use_ms >= *m->keep_alive_ms) {
        stop_when_idle(lock, m);  // erases it from loaded_: look again from the start
        again = true;
        break;
      }
  }
}

void ModelManager::monitor() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(spawn_mu_);
      if (spawn_cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stopping_; })) return;
    }
    unload_expired();
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = loaded_.begin(); it != loaded_.end();) {
      if (it->second->engine->running()) {
        ++it;
        continue;
      }
      json lines = it->second->engine->last_lines();
      crashed_.push_back({{"model_name", it->first}, {"exit_code", it->second->engine->exit_code().value_or(-1)},
                          {"time", epoch_ms()}, {"last_lines", lines}});
      if (crashed_.size() > 10) crashed_.erase(crashed_.begin());
      std::cerr << "1bit lemonade: the backend of " << it->first << " died; it loads again on the next request\n";
      it = loaded_.erase(it);
    }
  }
}

json ModelManager::health() const {
  std::lock_guard<std::mutex> lock(mu_);
  json all = json::array();
  for (const auto& [name, m] : loaded_)
    all.push_back({{"model_name", name}, {"checkpoint", m->checkpoint}, {"last_use", m->last_use_ms}, {"type", m->type},
                   {"device", m->device}, {"recipe", "llamacpp"}, {"recipe_options", m->options},
                   {"backend_url", "http://127.0.0.1:" + std::to_string(m->engine->port()) + "/v1"}, {"pid", m->engine->pid()},
                   {"busy", m->busy > 0}});
  json max = {{"llm", config_.max_loaded}, {"embedding", config_.max_loaded}, {"reranking", config_.max_loaded}};
  return {{"model_loaded", last_used_.empty() || !loaded_.count(last_used_) ? json(nullptr) : json(last_used_)},
          {"all_models_loaded", all},
          {"max_models", max},
          {"crashed_models", crashed_}};
}

std::vector<LoadedView> ModelManager::loaded_views() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<LoadedView> out;
  for (const auto& [name, m] : loaded_) {
    std::optional<int64_t> expires;
    if (m->keep_alive_ms) expires = m->last_use_ms + *m->keep_alive_ms;
    out.push_back({name, m->path, m->device, {m->engine->port(), m->key}, expires});
  }
  return out;
}

std::vector<std::string> ModelManager::loaded_names() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, m] : loaded_) out.push_back(name);
  return out;
}

}  // namespace onebit
