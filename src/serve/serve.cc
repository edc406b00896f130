#include "serve/serve.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "base/cli.h"
#include "base/error.h"
#include "base/paths.h"
#include "base/process_setup.h"
#include "engine/device.h"
#include "engine/engine_args.h"
#include "engine/engine_key.h"
#include "engine/engine_process.h"
#include "engine/launch_plan.h"
#include "http/loopback_guard.h"
#include "http/net.h"
#include "model/drafter_fit.h"
#include "model/gguf_facts.h"
#include "recipes/recipe_store.h"
#include "rpc/rpc_endpoints.h"
#include "serve/long_route.h"
#include "serve/proxy.h"
#include "serve/serve_ollama.h"
#include "serve/serve_options.h"

namespace onebit {
namespace {

// Reads the drafter's file, if it has one, and checks that it is the kind its option promises
// and fits the model.
std::optional<ModelFacts> drafter_facts(const ServeOptions& o, const ModelFacts& model) {
  std::optional<ModelFacts> d;
  if (!o.drafter_file().empty()) d = read_model_facts(o.drafter_file());
  check_drafter_fits(o.drafter_kind(), d ? &*d : nullptr, model);
  return d;
}

// The engine's names of the devices --rpc's workers offer, each shown on stderr. A launch first
// checks that every worker answers (the engine aborts on one that does not); a dry run only says
// which one it could not reach.
std::vector<std::string> worker_devices(const ServeOptions& o, const std::string& program) {
  std::vector<std::string> lines;
  try {
    check_rpc_workers(o.rpc);
    lines = rpc_devices(program, o.rpc);
  } catch (const Error& e) {
    if (!o.dry_run) throw;
    std::cerr << "1bit serve: " << e.what() << "\n";
    return {};
  }
  std::vector<std::string> names;
  for (const auto& line : lines) {
    std::cerr << "1bit serve: rpc device " << line << "\n";
    names.push_back(device_name(line));
  }
  return names;
}

std::string model_or_default(const ServeOptions& o) {
  const std::string path = o.model.empty() ? default_model_path() : o.model;
  if (path.empty()) throw Error("no model given (-m FILE) and no default model models/1bit-small-*.gguf or 1bit-tiny-*.gguf was found");
  return path;
}

// Everything serve decides before anything starts: the models' facts, the recipes, the device and
// each engine's launch inputs (all but its port, which is picked when it starts). It holds what the
// inputs point to, so it stays where it was made.
class ServeSetup {
 public:
  // One engine to run: "main", and "long" with --long-model.
  struct Engine {
    std::string label;
    LaunchInputs inputs;
    std::string key;  // the key the engine demands (engine/engine_key.h)
  };

  explicit ServeSetup(const ServeOptions& o)
      : engine_args(EngineArgs::builtin()),
        model_path(model_or_default(o)),
        model(read_model_facts(model_path)),
        drafter(drafter_facts(o, model)),
        long_model(o.long_model.empty() ? std::nullopt : std::optional(read_model_facts(o.long_model))),
        recipe_choice(o.recipes_file, o.no_recipes, engine_args),
        program(o.llama_server.empty() ? default_llama_server() : o.llama_server) {
    // The long engine gets the same drafter: it must fit that model too.
    if (long_model) check_drafter_fits(o.drafter_kind(), drafter ? &*drafter : nullptr, *long_model);
    if (!o.dry_run && access(program.c_str(), X_OK) != 0)
      throw Error(program + ": no runnable llama-server here (run make build, or pass --llama-server)");
    if (!o.rpc.empty() && long_model)
      throw Error("--rpc and --long-model exclude each other: a worker serves one engine at a time");
    where = o.dry_run ? planned_device(o.device, program) : resolve_device(o.device, program);
    if (where.devices.size() > 1) {
      std::cerr << "1bit serve: " << where.devices.size() << " " << where.device
                << " devices; the engine splits the layers over them by free memory (-sm layer; -sm row splits each "
                   "matrix, -sm none -mg N keeps one GPU, -ts A,B sets the shares):\n";
      for (const auto& d : where.devices) std::cerr << "1bit serve:   " << d << "\n";
    }
    if (!o.rpc.empty()) rpc_devices = worker_devices(o, program);
    if (const std::string note = unnamed_gpu_note("1bit serve", recipe_choice.set(), where); !note.empty())
      std::cerr << note << "\n";
    add_engine(o, "main", model_path, model);
    if (long_model) add_engine(o, "long", o.long_model, *long_model);
  }
  ServeSetup(const ServeSetup&) = delete;
  ServeSetup& operator=(const ServeSetup&) = delete;

  // The engine's command on `port` (plan_launch is pure: a dry run prints what a launch runs).
  LaunchPlan plan(const Engine& e, int port) const {
    LaunchInputs in = e.inputs;
    in.port = port;
    return plan_launch(in, engine_args);
  }

  const EngineArgs& engine_args;
  const std::string model_path;
  const ModelFacts model;
  const std::optional<ModelFacts> drafter;
  const std::optional<ModelFacts> long_model;
  const RecipeChoice recipe_choice;
  const std::string program;
  DeviceChoice where;
  std::vector<std::string> rpc_devices;  // "RPC0", ... (--rpc)
  std::vector<Engine> engines;

 private:
  void add_engine(const ServeOptions& o, const std::string& label, const std::string& path, const ModelFacts& facts) {
    Engine e;
    e.label = label;
    LaunchInputs& in = e.inputs;
    in.options = &o;
    in.model_path = path;
    in.model = &facts;
    in.drafter = drafter ? &*drafter : nullptr;
    in.program = program;
    in.where = where;
    in.rpc_devices = rpc_devices;
    in.recipes = recipe_choice.set();
    in.environment = current_environment();
    e.key = new_engine_key();
    plan(e, 0);  // throws now, before anything starts, on arguments that collide with serve's
    engines.push_back(std::move(e));
  }
};

// Waits up to `d` for SIGINT, SIGTERM or SIGHUP; true when one came.
bool signalled_within(const sigset_t& signals, std::chrono::milliseconds d) {
  timespec ts{0, std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()};
  return sigtimedwait(&signals, nullptr, &ts) > 0;
}

// The proxy in front and the engines behind it, until a signal (exit 0) or an engine's death
// (Error). The proxy answers 503 until every engine is ready.
int run_engines(const ServeOptions& o, const ServeSetup& setup) {
  // Our own port is taken before the engines' are picked, so no engine is handed it.
  Fd listener = listen_tcp(o.host, o.port);
  // Signals are taken synchronously by this thread; every thread started from here on inherits
  // the block, so SIGINT/SIGTERM never interrupt the proxy's threads.
  const sigset_t signals = block_stop_signals();
  raise_fd_limit();

  ProxyConfig pc;
  pc.api_key = o.api_key;
  pc.max_body_bytes = static_cast<uint64_t>(o.max_body_mb) << 20;
  pc.loopback_guard = is_loopback_address(o.host);
  pc.allowed_origins = o.allowed_origins;
  std::vector<Backend> backends;
  for (const auto& e : setup.engines) backends.push_back({e.label, {0, e.key}});
  std::shared_ptr<LongRouter> router;
  if (setup.long_model) router = std::make_shared<LongRouter>(Upstream{0, setup.engines[0].key}, o.long_from);
  ServeOllamaHost ollama(o.alias.empty() ? std::filesystem::path(setup.model_path).stem().string() : o.alias, setup.model,
                         setup.where.device);
  Proxy proxy(pc, backends,
              router ? Router([router](const RequestHead& r, const std::string& b) { return router->route(r, b); })
                     : Router(),
              &ollama);
  proxy.adopt(std::move(listener));

  std::vector<std::unique_ptr<EngineProcess>> engines(setup.engines.size());
  auto point_at = [&](size_t index, int port) {
    proxy.set_engine(index, {port, setup.engines[index].key});
    if (index == 0) ollama.set_engine({port, setup.engines[index].key});
    if (router && index == 0) router->set_main({port, setup.engines[index].key});
  };
  auto shutdown = [&](int code) {
    // Engines first: a request waiting on an engine then ends at once, so the proxy's threads
    // can all finish.
    for (auto& e : engines)
      if (e) e->stop();
    proxy.stop();
    return code;
  };
  auto start_engine = [&](size_t i) {
    const ServeSetup::Engine& slot = setup.engines[i];
    const std::string name = "the engine (" + slot.inputs.model_path + ")";
    EngineLaunch launch;
    launch.name = name;
    launch.command = [&, i](int port) {
      const LaunchPlan p = setup.plan(setup.engines[i], port);
      return ChildSpec{p.program, p.args, with_engine_key(p.env_added, setup.engines[i].key), p.env_removed,
                       o.engine_log, o.verbose};
    };
    // A loopback port that was free a moment ago and is none of the other engines'.
    launch.pick_port = [&engines] {
      int port;
      do port = pick_free_port("127.0.0.1");
      while (std::any_of(engines.begin(), engines.end(), [&](const auto& x) { return x && x->port() == port; }));
      return port;
    };
    launch.on_new_port = [&, i, name](int taken, int port) {
      std::cerr << "1bit serve: port " << taken << " was taken by another program; " << name
                << " starts again on port " << port << "\n";
      point_at(i, port);
    };
    engines[i] = std::make_unique<EngineProcess>(std::move(launch));
    point_at(i, engines[i]->port());
  };
  auto wait_ready = [&] {
    std::vector<EngineProcess*> all;
    for (auto& e : engines) all.push_back(e.get());
    return wait_until_ready(all, o.load_timeout_s, [&](auto d) { return signalled_within(signals, d); });
  };
  try {
    for (size_t i = 0; i < setup.engines.size(); ++i) start_engine(i);
    proxy.start();
    print_line("1bit serve: loading " + setup.model_path + " on " + setup.where.device +
               (setup.where.gpu.empty() ? "" : " (" + setup.where.gpu + ")") +
               (o.rpc.empty() ? "" : " and rpc workers " + rpc_list(o.rpc)) + ", listening on http://" + o.host + ":" +
               std::to_string(proxy.port()));
    if (!wait_ready()) {
      std::cerr << "1bit serve: stopping\n";
      return shutdown(0);
    }
    proxy.set_ready(true);
    print_line("1bit serve: ready on http://" + o.host + ":" + std::to_string(proxy.port()));
    while (!signalled_within(signals, std::chrono::milliseconds(250))) {
      for (size_t i = 0; i < engines.size(); ++i) {
        if (engines[i]->poll() != EngineProcess::State::kExited) continue;
        const std::string report = engines[i]->exit_report("while serving");
        if (o.rpc.empty()) throw Error(report);
        // The engine aborts when a worker goes away. serve stays, says so on every request
        // (/health included), and starts the engine again once every worker answers.
        std::string lost;
        for (const auto& w : o.rpc)
          if (!rpc_unreachable(w, 1000).empty()) lost += (lost.empty() ? "" : ", ") + w.text();
        const std::string why = lost.empty() ? "the engine stopped (" + report + ")"
                                             : "rpc worker " + lost + " is gone and the engine stopped with it";
        proxy.set_unavailable(why + "; serve starts the engine again when every worker answers");
        std::cerr << "1bit serve: " << why << "; waiting for the workers to answer again\n";
        while (true) {
          if (signalled_within(signals, std::chrono::seconds(1))) {
            std::cerr << "1bit serve: stopping\n";
            return shutdown(0);
          }
          if (std::all_of(o.rpc.begin(), o.rpc.end(), [](const RpcEndpoint& w) { return rpc_unreachable(w, 1000).empty(); }))
            break;
        }
        std::cerr << "1bit serve: every rpc worker answers; starting the engine again\n";
        engines[i]->stop();
        start_engine(i);
        if (!wait_ready()) {
          std::cerr << "1bit serve: stopping\n";
          return shutdown(0);
        }
        proxy.set_ready(true);
        print_line("1bit serve: ready again on http://" + o.host + ":" + std::to_string(proxy.port()));
      }
    }
  } catch (const Error&) {
    shutdown(1);
    throw;
  }
  std::cerr << "1bit serve: stopping\n";
  return shutdown(0);
}

int serve(const ServeOptions& o) {
  const ServeSetup setup(o);
  for (const auto& e : setup.engines)
    for (const auto& line : setup.plan(e, 0).recipe_lines()) std::cerr << line << "\n";
  if (o.dry_run) {
    int last_port = 0;
    for (const auto& e : setup.engines) {
      int port;
      do port = pick_free_port("127.0.0.1");
      while (port == last_port);
      std::cout << setup.plan(e, port).command_line() << "\n";
      last_port = port;
    }
    return 0;
  }
  return run_engines(o, setup);
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
