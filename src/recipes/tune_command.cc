#include "recipes/tune_command.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <set>

#include <nlohmann/json.hpp>

#include "base/cli.h"
#include "base/error.h"
#include "base/paths.h"
#include "base/shell.h"
#include "bench/bench.h"
#include "bench/bench_command.h"
#include "bench/machine.h"
#include "engine/device.h"
#include "engine/engine_args.h"
#include "model/gguf_facts.h"
#include "recipes/recipe_store.h"
#include "recipes/tune.h"
#include "recipes/tune_report.h"
#include "recipes/tune_search.h"
#include "recipes/tune_space.h"
#include "serve/serve_options.h"

namespace onebit {
namespace {

using nlohmann::json;

struct TuneCli {
  MeasureCli measure;
  std::vector<std::string> tries;
  double budget_s = 600;
  TuneGoal goal = TuneGoal::kChat;
  std::string knobs = "all";
  int max_rounds = 4;
  bool no_save = false;
  std::string write_file;
  ServeOptions serve;               // the launch's serve options, parsed
  std::vector<std::string> launch;  // the same, as typed
};

// Shorter measurements than bench's: a search runs many, and its rounds carry the noise estimate.
BenchOptions tune_defaults() {
  BenchOptions d;
  d.prompt_reps = 3;
  d.decode_reps = 2;
  d.decode_tokens = 128;
  return d;
}

// The serve options a launch may carry; the rest are bench's to set (model, port, key, logs).
const std::set<std::string> kLaunchOptions = {"--device", "--ctx-size", "--flash-attn", "--parallel", "--draft",
                                              "--dflash", "--eagle3", "--mtp", "--draft-max", "--draft-p-min", "--recipes",
                                              "--no-recipes", "--llama-server"};

std::vector<CliOption> tune_table(TuneCli& c) {
  std::vector<CliOption> t = measure_options(c.measure, tune_defaults());
  const std::vector<CliOption> own = {
      {{"--try"}, "ARGS",
       "a candidate of its own: engine arguments, led by VAR=VALUE words for its\nenvironment (\"-ub 1024\", \"ONEBIT_GDN_PREFILL=2\"); searched first",
       [&c](const std::string& v) { c.tries.push_back(v); }},
      {{"--budget"}, "DURATION", "wall-clock cap for the whole search, model loads included\n(90s, 10m, 1h; default: 10m)",
       [&c](const std::string& v) { c.budget_s = parse_duration(v); }},
      {{"--goal"}, "G",
       "chat (decode and time to first token; prompt speed may get worse),\nprompt, or balanced (all of them) (default: chat)",
       [&c](const std::string& v) { c.goal = parse_tune_goal(v); }},
      {{"--knobs"}, "LIST", "the tune space's knobs to search, comma-separated (default: all that\napply here; none: only --try)",
       [&c](const std::string& v) { c.knobs = v; }},
      {{"--rounds"}, "N", "most rounds a candidate runs, 2 or more (default: 4)",
       [&c](const std::string& v) { c.max_rounds = static_cast<int>(parse_int_option("--rounds", v, 2, 100)); }},
      {{"--write"}, "FILE", "append the winning recipes to FILE instead of the user's recipe store",
       [&c](const std::string& v) { c.write_file = v; }},
      {{"--no-save"}, "", "print the winning recipes, save none", [&c](const std::string&) { c.no_save = true; }},
  };
  t.insert(t.begin() + 1, own.begin(), own.end());
  return t;
}

// Serve's options that a launch may carry, each also kept as typed for the launch's command line.
std::vector<CliOption> launch_table(TuneCli& c) {
  std::vector<CliOption> t;
  for (CliOption& opt : serve_option_table(c.serve)) {
    if (!kLaunchOptions.count(opt.names.back())) continue;
    auto inner = opt.set;
    const std::string name = opt.names.back();
    const bool takes_value = !opt.value.empty();
    opt.set = [inner, name, takes_value, &c](const std::string& v) {
      inner(v);
      // An optional value stays attached ("--mtp=head.bin"): alone after the flag, the relaunch
      // might not take it for the flag's.
      if (takes_value) c.launch.insert(c.launch.end(), {name, v});
      else c.launch.push_back(v.empty() ? name : name + "=" + v);
    };
    t.push_back(opt);
  }
  return t;
}

// The engine options that serve's own options of `o` set (a knob must not set them again).
std::vector<std::pair<std::string, std::string>> serve_owned(const ServeOptions& o) {
  std::vector<std::pair<std::string, std::string>> out;  // engine spelling, serve option
  if (o.ctx_size) out.push_back({"-c", "--ctx-size"});
  if (!o.flash_attn.empty()) out.push_back({"-fa", "--flash-attn"});
  if (o.parallel) out.push_back({"-np", "--parallel"});
  if (o.draft_max) out.push_back({"--spec-draft-n-max", "--draft-max"});
  if (!o.draft_p_min.empty()) out.push_back({"--draft-p-min", "--draft-p-min"});
  return out;
}

// Why `values` cannot be tried on this launch, or "".
std::string owned_conflict(const std::vector<TuneSetting>& values, const ServeOptions& o, const EngineArgs& engine) {
  for (const auto& [flag, option] : serve_owned(o))
    for (const auto& v : values)
      for (const auto& a : v.args)
        if (engine.find(a) != nullptr && engine.find(a) == engine.find(flag))
          return "the launch sets " + flag + " through serve's " + option;
  return "";
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    size_t comma = s.find(',', at);
    if (comma == std::string::npos) comma = s.size();
    if (comma > at) out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

// The knobs to search here, in order: the --try candidates, then the tune space's that apply.
std::vector<SearchKnob> choose_knobs(const TuneCli& c, const TuneContext& ctx, const EngineArgs& engine,
                                     std::vector<std::string>& skipped) {
  std::vector<SearchKnob> knobs;
  if (!c.tries.empty()) {
    SearchKnob tries{"try", "the --try candidates", {}, false};
    for (const auto& t : c.tries) tries.values.push_back(parse_setting(t, "--try \"" + t + "\"", engine));
    knobs.push_back(tries);
  }
  const TuneSpace& space = builtin_tune_space();
  std::set<std::string> wanted;
  const bool all = c.knobs == "all";
  if (!all && c.knobs != "none") {
    for (const auto& id : split_list(c.knobs)) {
      bool known = false;
      for (const auto& k : space.knobs) known = known || k.id == id;
      if (!known) {
        std::string ids;
        for (const auto& k : space.knobs) ids += (ids.empty() ? "" : ", ") + k.id;
        throw Error("--knobs: unknown knob \"" + id + "\" (known: " + ids + ")");
      }
      wanted.insert(id);
    }
  }
  for (const Knob& k : space.knobs) {
    if (!all && !wanted.count(k.id)) continue;
    std::string why = knob_mismatch(k, ctx);
    const std::vector<TuneSetting> values = why.empty() ? knob_settings(k, ctx) : std::vector<TuneSetting>{};
    if (why.empty() && values.empty()) why = "no value applies to this model";
    if (why.empty()) why = owned_conflict(values, c.serve, engine);
    if (!why.empty()) {
      skipped.push_back(k.id + " (" + why + ")");
      continue;
    }
    knobs.push_back({k.id, k.what, values, k.changes_output});
  }
  if (knobs.empty()) throw Error("nothing to search: no --try, and no knob of the tune space applies here");
  return knobs;
}

// The options of the recipe's args that the launch's own engine arguments set: those win over it.
std::vector<std::string> shadowed(const json& entry, const std::vector<std::string>& launch_engine_args,
                                  const EngineArgs& engine) {
  std::vector<std::string> out;
  if (!entry.contains("args")) return out;
  for (const auto& a : entry["args"]) {
    const EngineOption* opt = engine.find(a.get<std::string>());
    if (opt != nullptr && engine.present_on(launch_engine_args, *opt)) out.push_back(a);
  }
  return out;
}

int run(const std::vector<std::string>& args) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [t0] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  TuneCli c;
  c.measure.bench = tune_defaults();
  std::vector<CliOption> table = tune_table(c);
  for (auto& o : launch_table(c)) table.push_back(std::move(o));
  // A launch's llama-server options may come directly, as on serve's command line; serve's own
  // options that a launch may not carry (its port, key, logs) stay unknown here.
  const EngineArgs& engine = EngineArgs::builtin();
  std::set<std::string> serve_names;
  ServeOptions unused;
  for (const CliOption& opt : serve_option_table(unused)) serve_names.insert(opt.names.begin(), opt.names.end());
  CliParse p = parse_cli(table, args, [&](const std::string& name) {
    return serve_names.count(name) ? -1 : engine.values_of(name);
  });
  if (p.help) {
    std::cout << tune_usage();
    return 0;
  }
  std::vector<std::string> engine_args = p.foreign;
  engine_args.insert(engine_args.end(), p.after_dashes.begin(), p.after_dashes.end());
  if (!p.positional.empty()) throw Error("unexpected argument \"" + p.positional.front() + "\"");
  finish_measure_options(c.measure);
  if (!c.write_file.empty() && c.no_save) throw Error("--write and --no-save exclude each other");

  // The current launch, checked as serve would check it.
  BenchConfig launch{"current", {}, c.launch};
  if (!engine_args.empty()) {
    launch.args.push_back("--");
    launch.args.insert(launch.args.end(), engine_args.begin(), engine_args.end());
  }
  std::vector<std::string> as_serve = launch.args;
  as_serve.insert(as_serve.begin(), {"-m", c.measure.bench.model});
  const ServeOptions serve = parse_serve_options(as_serve);
  const ModelFacts facts = read_model_facts(c.measure.bench.model);
  const std::string program = serve.llama_server.empty() ? default_llama_server() : serve.llama_server;
  const DeviceChoice where = resolve_device(serve.device, program);

  TuneContext ctx;
  ctx.device = where.device;
  ctx.drafter = serve.drafter_kind();
  ctx.facts = &facts;
  ctx.physical_cores = std::max(1u, physical_cores());
  ctx.gpus = static_cast<int>(where.devices.size());
  if (where.device == "cuda")
    for (const auto& row : nvidia_smi("memory.total"))
      if (!row.empty() && ctx.gpu_memory_bytes == 0) ctx.gpu_memory_bytes = std::strtoull(row[0].c_str(), nullptr, 10) << 20;
  std::vector<std::string> skipped;
  TuneSearchOptions so;
  so.launch = launch;
  so.knobs = choose_knobs(c, ctx, engine, skipped);
  so.goal = c.goal;
  so.budget_s = c.budget_s;
  so.max_rounds = c.max_rounds;
  const std::string store = c.no_save ? "" : !c.write_file.empty() ? c.write_file : required_recipe_store_path();

  std::atomic<bool> stop{false};
  stop_on_signals(stop);
  auto lock = take_run_lock(c.measure, "1bit tune");
  std::cerr << "1bit tune: goal " << goal_name(c.goal) << ", budget " << static_cast<long>(c.budget_s) << " s, "
            << so.knobs.size() << " knob" << (so.knobs.size() == 1 ? "" : "s") << " on " << where.device
            << (where.gpu.empty() ? "" : " (" + where.gpu + ")") << "; serve logs in " << c.measure.bench.log_dir << "\n";
  for (const auto& s : skipped) std::cerr << "1bit tune: skipped " << s << "\n";

  const bool tty = isatty(2);
  std::string status_line;
  auto show = [&](const std::string& line, bool keep) {
    if (tty) std::fprintf(stderr, "\r\033[K1bit tune: %s", line.c_str());
    if (keep) std::fprintf(stderr, tty ? "\n" : "1bit tune: %s\n", line.c_str());
  };
  Bench bench(c.measure.bench);
  BenchRecord rec = bench.new_record();
  auto measure = [&](const BenchConfig& config, int round, const std::string& label, double limit) {
    bench.measure(config, round, label, rec, [&](const std::string& step) {
      if (step.find("shortened") != std::string::npos) show(step, true);
      else if (tty) show(status_line + " | " + step.substr(step.find(", ") + 2), false);
    }, stop, limit);
  };
  auto status = [&](const std::string& line) {
    status_line = line;
    // A knob's outcome is kept on screen; a step only on the live line (or as a plain line).
    show(line, !tty || line.find("; best so far") == std::string::npos);
  };
  const TuneSearchResult result = tune_search(so, rec, measure, elapsed, status, stop, engine);
  rec.finished = utc_timestamp();
  if (tty) std::fprintf(stderr, "\r\033[K");

  TuneRun run;
  run.record = &rec;
  run.result = &result;
  run.goal = c.goal;
  run.budget_s = c.budget_s;
  run.launch = shell_join(launch.args);
  run.skipped = skipped;
  run.written_to = store;
  const RecipeScope scope{where, serve.drafter_kind(), RecipeMachine::here()};
  for (const KnobRun& k : result.knobs) {
    if (k.winner < 0) continue;
    const TuneCandidate& w = k.candidates[static_cast<size_t>(k.winner)];
    json entry = recipe_entry(rec, w.comparison, c.goal, k.knob, w.value, k.base, scope);
    if (!store.empty()) entry["id"] = append_recipe(store, entry);
    for (const auto& flag : shadowed(entry, engine_args, engine))
      std::cerr << "1bit tune: recipe " << entry["id"].get<std::string>() << " sets " << flag
                << ", which this launch sets itself; a launch without it gets the recipe\n";
    run.recipes.push_back(entry);
  }
  run.elapsed_s = elapsed();
  std::cout << tune_text(run);
  for (const auto& e : run.recipes) std::cout << e.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  if (!c.measure.json_out.empty())
    write_text(c.measure.json_out, tune_json(run).dump(1, ' ', false, json::error_handler_t::replace) + "\n");
  if (!c.measure.html_out.empty()) write_text(c.measure.html_out, tune_html(run));
  if (run.recipes.empty()) std::cerr << "1bit tune: no value won beyond the noise; nothing to write\n";
  else if (!store.empty())
    std::cerr << "1bit tune: " << run.recipes.size() << " recipe" << (run.recipes.size() == 1 ? "" : "s")
              << " written to " << store << "\n";
  if (stop) {
    std::cerr << "1bit tune: interrupted; every serve it started is stopped\n";
    return 130;
  }
  if (!result.failure.empty()) throw Error(result.failure);
  return 0;
}

}  // namespace

double parse_duration(const std::string& text) {
  double total = 0;
  size_t at = 0;
  auto bad = [&] { return Error("--budget: \"" + text + "\" is not a duration (90s, 10m, 1h, 1h30m, or seconds)"); };
  if (text.empty()) throw bad();
  while (at < text.size()) {
    size_t end = at;
    while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.')) ++end;
    if (end == at || end - at > 12) throw bad();
    const double n = std::stod(text.substr(at, end - at));
    const char unit = end < text.size() ? text[end] : 's';
    if (end < text.size()) ++end;
    if (unit == 's') total += n;
    else if (unit == 'm') total += n * 60;
    else if (unit == 'h') total += n * 3600;
    else throw bad();
    at = end;
  }
  if (total < 1) throw Error("--budget: at least 1 s");
  return total;
}

int run_tune_command(const std::vector<std::string>& args) {
  try {
    return run(args);
  } catch (const Error& e) {
    std::cerr << "1bit tune: " << e.what() << "\n";
    return 1;
  }
}

std::string tune_usage() {
  TuneCli t;
  return "usage: 1bit tune -m MODEL [options] [launch options] [-- engine arguments]\n\n"
         "Finds the fastest settings for this model on this machine. The current launch (its serve\n"
         "options and engine arguments, as `1bit serve` takes them) is the baseline; the search runs\n"
         "over the knobs of the tune space that apply here (threads, batch sizes, flash attention,\n"
         "1bit's kernels, speculative settings, ...; `1bit tune --help` lists them below) and the\n"
         "--try candidates, each knob's values in interleaved rounds against the best so far. A value\n"
         "wins when it beats the best on the goal beyond the run's noise and loses no other metric\n"
         "that counts; winners are saved as recipes in the user's recipe store, each quoting its\n"
         "measurement, and every 1bit launch on this machine applies them.\n\noptions:\n" +
         format_options(tune_table(t)) + "\nlaunch options (as 1bit serve's):\n" + format_options(launch_table(t)) +
         "\nknobs:\n" + [] {
           std::string s;
           for (const auto& k : builtin_tune_space().knobs) s += "  " + k.id + std::string(k.id.size() < 18 ? 18 - k.id.size() : 1, ' ') + k.what + "\n";
           return s;
         }();
}

}  // namespace onebit
