#include "serve/serve.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <ctime>
#include <iostream>
#include <memory>
#include <optional>

#include "base/error.h"
#include "base/paths.h"
#include "base/process_setup.h"
#include "engine/child_process.h"
#include "engine/device.h"
#include "engine/engine_args.h"
#include "engine/engine_key.h"
#include "engine/launch_plan.h"
#include "engine/port_owner.h"
#include "http/net.h"
#include "model/gguf_facts.h"
#include "recipes/recipes.h"
#include "serve/long_route.h"
#include "serve/proxy.h"
#include "serve/serve_options.h"

namespace onebit {
namespace {

constexpr auto kHealthPoll = std::chrono::milliseconds(250);

// One engine child and what serve knows about it.
struct Engine {
  std::string label;  // "main" or "long"
  std::string model;
  LaunchInputs inputs;
  LaunchPlan plan;
  int port = 0;
  int port_attempts = 1;
  std::string key;  // the engine's own key (engine/engine_key.h)
  std::unique_ptr<ChildProcess> child;
  bool ready = false;
};

std::string indent_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += "\n  | " + l;
  return out;
}

std::string died_message(Engine& e, const char* when) {
  return "the engine (" + e.model + ") exited with code " + std::to_string(e.child->exit_code().value_or(-1)) + " " +
         when + "; its last lines:" + indent_lines(e.child->last_lines(15));
}

// Reads the drafter and checks that it is the kind its option promises.
std::optional<ModelFacts> drafter_facts(const ServeOptions& o, const ModelFacts& model) {
  if (o.mtp && model.nextn_layers == 0)
    throw Error(model.path + ": --mtp needs next-token (MTP) layers, and " + model.architecture +
                ".nextn_predict_layers is absent or 0");
  std::string kind = o.drafter_kind();
  if (kind != "draft" && kind != "dflash") return std::nullopt;
  const std::string& path = kind == "draft" ? o.draft : o.dflash;
  ModelFacts d = read_model_facts(path);
  if (kind == "dflash" && !d.dflash)
    throw Error(path + ": not a dflash drafter (architecture " + d.architecture + "); use --draft for a plain model");
  if (kind == "draft" && d.dflash) throw Error(path + ": is a dflash drafter; use --dflash");
  return d;
}

// Waits for every engine's /health to answer 200, polling every 250 ms, while watching for
// signals and engine exits. An engine whose port another program took first is handed to
// `restart` (false: no more attempts). Throws Error on timeout or an exit; returns false on a
// signal.
bool wait_until_ready(std::vector<Engine>& engines, double timeout_s, const sigset_t& signals,
                      const std::function<bool(Engine&)>& restart) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    bool all = true;
    for (Engine& e : engines) {
      if (!e.child->running()) {
        if (!port_has_listener(e.port)) throw Error(died_message(e, "while loading"));
        if (!restart(e))
          throw Error("the engine (" + e.model + ") could not listen: other programs took " +
                      std::to_string(kPortAttempts) + " of its ports in a row before it could");
        all = false;
        continue;
      }
      if (!e.ready) e.ready = child_ready_on(e.child->pid(), e.port);
      all = all && e.ready;
    }
    if (all) return true;
    if (std::chrono::steady_clock::now() > deadline) {
      for (Engine& e : engines)
        if (!e.ready)
          throw Error("the engine (" + e.model + ") did not load within " + std::to_string(static_cast<int>(timeout_s)) +
                      " s (--load-timeout); its last lines:" + indent_lines(e.child->last_lines(15)));
    }
    timespec ts{0, std::chrono::duration_cast<std::chrono::nanoseconds>(kHealthPoll).count()};
    if (sigtimedwait(&signals, nullptr, &ts) > 0) return false;
  }
}

// A loopback port that was free a moment ago and is none of the engines'.
int free_engine_port(const std::vector<Engine>& engines) {
  int port;
  do port = pick_free_port("127.0.0.1");
  while (std::any_of(engines.begin(), engines.end(), [&](const Engine& x) { return x.port == port; }));
  return port;
}

int serve(const ServeOptions& o) {
  const EngineArgs& engine = EngineArgs::builtin();
  const std::string model_path = o.model.empty() ? default_model_path() : o.model;
  if (model_path.empty())
    throw Error("no model given (-m FILE) and no default model models/1bit-tiny-*.gguf was found");
  const ModelFacts model = read_model_facts(model_path);
  const std::optional<ModelFacts> drafter = drafter_facts(o, model);
  std::optional<ModelFacts> long_model;
  if (!o.long_model.empty()) long_model = read_model_facts(o.long_model);

  const RecipeChoice recipe_choice(o.recipes_file, o.no_recipes, engine);
  const RecipeSet* recipes = recipe_choice.set();

  const std::string program = o.llama_server.empty() ? default_llama_server() : o.llama_server;
  if (!o.dry_run && access(program.c_str(), X_OK) != 0)
    throw Error(program + ": no runnable llama-server here (run make build, or pass --llama-server)");
  const DeviceChoice where = o.dry_run ? planned_device(o.device, program) : resolve_device(o.device, program);
  const std::string& device = where.device;
  if (const std::string note = unnamed_gpu_note("1bit serve", recipes, where); !note.empty())
    std::cerr << note << "\n";
  // Our own port is taken before the engines' are picked, so no engine is handed it.
  Fd listener;
  if (!o.dry_run) listener = listen_tcp(o.host, o.port);

  std::vector<Engine> engines;
  auto add_engine = [&](const std::string& label, const std::string& path, const ModelFacts& facts,
                        const ModelFacts* draft_facts) {
    Engine e;
    e.label = label;
    e.model = path;
    e.port = free_engine_port(engines);
    LaunchInputs& in = e.inputs;
    in.options = &o;
    in.model_path = path;
    in.model = &facts;
    in.drafter = draft_facts;
    in.program = program;
    in.where = where;
    in.port = e.port;
    in.recipes = recipes;
    in.environment = current_environment();
    e.plan = plan_launch(in, engine);
    e.key = new_engine_key();
    engines.push_back(std::move(e));
  };
  add_engine("main", model_path, model, drafter ? &*drafter : nullptr);
  if (long_model) add_engine("long", o.long_model, *long_model, drafter ? &*drafter : nullptr);

  for (const Engine& e : engines)
    for (const auto& line : e.plan.recipe_lines()) std::cerr << line << "\n";
  if (o.dry_run) {
    for (const Engine& e : engines) std::cout << e.plan.command_line() << "\n";
    return 0;
  }

  // Signals are taken synchronously by this thread; every thread started from here on inherits
  // the block, so SIGINT/SIGTERM never interrupt the proxy's threads.
  const sigset_t signals = block_stop_signals();
  raise_fd_limit();

  ProxyConfig pc;
  pc.api_key = o.api_key;
  pc.max_body_bytes = static_cast<uint64_t>(o.max_body_mb) << 20;
  std::vector<Backend> backends;
  for (const Engine& e : engines) backends.push_back({e.label, {e.port, e.key}});
  std::shared_ptr<LongRouter> router;
  if (long_model) router = std::make_shared<LongRouter>(Upstream{engines[0].port, engines[0].key}, o.long_from);
  Proxy proxy(pc, backends,
              router ? Router([router](const RequestHead& r, const std::string& b) { return router->route(r, b); })
                     : Router());
  proxy.adopt(std::move(listener));
  proxy.start();

  auto start_child = [&](Engine& e) {
    e.child = ChildProcess::start({e.plan.program, e.plan.args, with_engine_key(e.plan.env_added, e.key),
                                   e.plan.env_removed, o.engine_log, o.verbose});
  };
  for (Engine& e : engines) start_child(e);
  // Another program took an engine's port before the engine bound it: start it again elsewhere.
  auto restart = [&](Engine& e) {
    if (e.port_attempts >= kPortAttempts) return false;
    ++e.port_attempts;
    e.ready = false;
    const int taken = e.port;
    e.port = free_engine_port(engines);
    e.inputs.port = e.port;
    e.plan = plan_launch(e.inputs, engine);
    const size_t index = static_cast<size_t>(&e - engines.data());
    proxy.set_engine(index, {e.port, e.key});
    if (router && index == 0) router->set_main({e.port, e.key});
    std::cerr << "1bit serve: port " << taken << " was taken by another program; the engine (" << e.model
              << ") starts again on port " << e.port << "\n";
    start_child(e);
    return true;
  };
  std::cerr << "1bit serve: loading " << model_path << " on " << device << (where.gpu.empty() ? "" : " (" + where.gpu + ")")
            << ", listening on http://" << o.host << ":"
            << proxy.port() << "\n";

  // Engines first: a request waiting on an engine then ends at once, so the proxy's threads
  // can all finish.
  auto shutdown = [&](int code) {
    for (Engine& e : engines) e.child->stop();
    proxy.stop();
    return code;
  };
  try {
    if (!wait_until_ready(engines, o.load_timeout_s, signals, restart)) {
      std::cerr << "1bit serve: stopping\n";
      return shutdown(0);
    }
  } catch (const Error&) {
    shutdown(1);
    throw;
  }
  proxy.set_ready(true);
  std::cerr << "1bit serve: ready on http://" << o.host << ":" << proxy.port() << "\n";

  while (true) {
    timespec ts{0, std::chrono::duration_cast<std::chrono::nanoseconds>(kHealthPoll).count()};
    if (sigtimedwait(&signals, nullptr, &ts) > 0) {
      std::cerr << "1bit serve: stopping\n";
      return shutdown(0);
    }
    for (Engine& e : engines) {
      if (!e.child->running()) {
        std::string msg = died_message(e, "while serving");
        shutdown(1);
        throw Error(msg);
      }
    }
  }
}

}  // namespace

int run_serve(const std::vector<std::string>& args) {
  try {
    ServeOptions o = parse_serve_options(args);
    if (o.help) {
      std::cout << serve_usage();
      return 0;
    }
    return serve(o);
  } catch (const Error& e) {
    std::cerr << "1bit serve: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace onebit
