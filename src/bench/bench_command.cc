#include "bench/bench_command.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <thread>

#include "base/cli.h"
#include "base/error.h"
#include "base/file_lock.h"
#include "base/paths.h"
#include "base/process_setup.h"
#include "base/shell.h"
#include "bench/bench.h"
#include "bench/report.h"
#include "engine/device.h"
#include "engine/engine_args.h"
#include "recipes/recipes.h"
#include "recipes/tune.h"

namespace onebit {
namespace {

struct BenchCli {
  BenchOptions bench;
  std::vector<std::string> configs, tries;
  std::string lock_file, json_out, html_out, metric = "decode-code", write_file;
  bool prompt_chars_set = false;
};

// Options common to bench and tune.
std::vector<CliOption> common_table(BenchCli& c) {
  auto count = [](const char* name, int& field, int max) {
    return [name, &field, max](const std::string& v) { field = static_cast<int>(parse_int_option(name, v, 1, max)); };
  };
  return {
      {{"-m", "--model"}, "FILE", "the GGUF model to measure", [&c](const std::string& v) { c.bench.model = v; }},
      {{"--rounds"}, "N", "rounds; each runs every configuration once, interleaved (default: 2)",
       count("--rounds", c.bench.rounds, 1000)},
      {{"--prompt-reps"}, "N", "prompt-speed requests per configuration and round (default: 5)",
       count("--prompt-reps", c.bench.prompt_reps, 1000)},
      {{"--decode-reps"}, "N", "decode requests per prompt kind (code, prose, short) (default: 3)",
       count("--decode-reps", c.bench.decode_reps, 1000)},
      {{"--decode-tokens"}, "N", "tokens generated per decode request (default: 256)",
       count("--decode-tokens", c.bench.decode_tokens, 1 << 20)},
      {{"--prompt-file"}, "F", "the long prompt for prompt speed (default: generated)",
       [&c](const std::string& v) { c.bench.prompt_file = v; }},
      {{"--prompt-chars"}, "N", "length of the generated long prompt (default: 8000, about 1800 tokens)",
       [&c](const std::string& v) {
         c.bench.prompt_chars = static_cast<int>(parse_int_option("--prompt-chars", v, 1, 1 << 26));
         c.prompt_chars_set = true;
       }},
      {{"--lock"}, "FILE", "hold an exclusive lock on FILE for the whole run", [&c](const std::string& v) { c.lock_file = v; }},
      {{"--json"}, "OUT", "write the whole record as JSON", [&c](const std::string& v) { c.json_out = v; }},
      {{"--html"}, "OUT", "write a self-contained HTML report with charts", [&c](const std::string& v) { c.html_out = v; }},
      {{"--log-dir"}, "DIR", "where each serve's log goes (default: a new directory under $TMPDIR)",
       [&c](const std::string& v) { c.bench.log_dir = v; }},
      {{"--load-timeout"}, "S", "seconds each serve may take to load (default: 600)",
       [&c](const std::string& v) { c.bench.load_timeout_s = parse_double_option("--load-timeout", v, 1, 1e6); }},
  };
}

std::vector<CliOption> bench_table(BenchCli& c) {
  auto t = common_table(c);
  t.insert(t.begin() + 1, CliOption{{"--config"}, "NAME=ARGS",
                                    "a configuration: a name and `1bit serve` arguments (may be empty: base=),\n"
                                    "led by VAR=VALUE words for its environment; the first is the baseline",
                                    [&c](const std::string& v) { c.configs.push_back(v); }});
  return t;
}

std::vector<CliOption> tune_table(BenchCli& c) {
  auto t = common_table(c);
  t.insert(t.begin() + 1, CliOption{{"--try"}, "ARGS",
                                    "candidate engine arguments, e.g. \"-ub 1024\", led by VAR=VALUE words\n"
                                    "for an environment, e.g. \"ONEBIT_GDN_PREFILL=2\"",
                                    [&c](const std::string& v) { c.tries.push_back(v); }});
  t.insert(t.begin() + 2, CliOption{{"--metric"}, "M",
                                    "what to improve: prompt, decode-code, decode-prose, decode-short,\nttft or acceptance (default: decode-code)",
                                    [&c](const std::string& v) { c.metric = v; }});
  t.insert(t.begin() + 3, CliOption{{"--write"}, "FILE", "append each winning recipe to this recipes file",
                                    [&c](const std::string& v) { c.write_file = v; }});
  return t;
}

// Stops on SIGINT/SIGTERM: sets the flag and asks every serve this process started to stop, which
// ends the request in flight; the main thread then unwinds and removes what is left.
class SignalWatch {
 public:
  explicit SignalWatch(std::atomic<bool>& stop) {
    const sigset_t set = block_stop_signals();
    std::thread([set, &stop] {
      int sig;
      if (sigwait(&set, &sig) != 0) return;
      stop = true;
      stop_children();
    }).detach();
  }

 private:
  static void stop_children() {
    const pid_t self = getpid();
    DIR* d = opendir("/proc");
    if (d == nullptr) return;
    while (dirent* e = readdir(d)) {
      pid_t pid = std::atoi(e->d_name);
      if (pid <= 0) continue;
      std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
      std::string line;
      if (!std::getline(stat, line)) continue;
      size_t close = line.rfind(')');
      if (close == std::string::npos) continue;
      char state;
      pid_t ppid;
      if (std::sscanf(line.c_str() + close + 2, "%c %d", &state, &ppid) == 2 && ppid == self) kill(-pid, SIGTERM);
    }
    closedir(d);
  }
};

void check(BenchCli& c, bool tune) {
  if (c.bench.model.empty()) throw Error("-m MODEL is required");
  if (!c.bench.prompt_file.empty() && c.prompt_chars_set) throw Error("--prompt-file and --prompt-chars exclude each other");
  if (c.bench.log_dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/1bit-bench-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) throw Error("cannot create a log directory under " + tmpl);
    c.bench.log_dir = tmpl;
  } else {
    std::error_code ec;
    std::filesystem::create_directories(c.bench.log_dir, ec);
    if (ec) throw Error(c.bench.log_dir + ": cannot create the log directory: " + ec.message());
  }
  c.bench.onebit = executable_dir() + "/1bit";
  if (tune) {
    bool known = false;
    for (const auto& m : bench_metrics()) known = known || c.metric == m.name;
    if (!known) throw Error("--metric: unknown metric \"" + c.metric + "\"");
    if (c.tries.empty()) throw Error("at least one --try is needed");
    c.bench.configs.push_back({"current", {}, {}});
    for (size_t i = 0; i < c.tries.size(); ++i) {
      std::vector<std::string> args = shell_split(c.tries[i]);
      auto env = take_env_assignments(args);
      if (args.empty() && env.empty()) throw Error("--try: empty arguments");
      // The candidate must be a valid recipe: parse it as one before measuring anything.
      nlohmann::json probe = recipe_body(args, env);
      probe["id"] = "try";
      probe["measured"] = "-";
      parse_recipes(nlohmann::json{{"recipes", {probe}}}.dump(), "--try \"" + c.tries[i] + "\"", EngineArgs::builtin());
      std::vector<std::string> serve_args;
      if (!args.empty()) serve_args.push_back("--");
      serve_args.insert(serve_args.end(), args.begin(), args.end());
      c.bench.configs.push_back({"try" + std::to_string(i + 1), env, serve_args});
    }
    return;
  }
  if (c.configs.empty()) throw Error("at least one --config NAME=ARGS is needed (the first is the baseline)");
  std::set<std::string> names;
  for (const auto& spec : c.configs) {
    BenchConfig bc = parse_bench_config(spec);
    if (!names.insert(bc.name).second) throw Error("--config: the name \"" + bc.name + "\" is used twice");
    c.bench.configs.push_back(bc);
  }
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error(path + ": cannot write");
}

int run(const std::vector<std::string>& args, bool tune) {
  const char* name = tune ? "tune" : "bench";
  try {
    BenchCli c;
    CliParse p = parse_cli(tune ? tune_table(c) : bench_table(c), args);
    if (p.help) {
      std::cout << bench_usage();
      return 0;
    }
    if (!p.positional.empty()) throw Error("unexpected argument \"" + p.positional.front() + "\"");
    check(c, tune);
    std::atomic<bool> stop{false};
    SignalWatch watch(stop);
    std::unique_ptr<FileLock> lock;
    if (!c.lock_file.empty())
      lock = std::make_unique<FileLock>(c.lock_file, [&] { std::cerr << "1bit " << name << ": waiting for lock " << c.lock_file << "\n"; });
    std::cerr << "1bit " << name << ": serve logs in " << c.bench.log_dir << "\n";
    const bool tty = isatty(2);
    BenchRecord rec;
    try {
      rec = run_bench(c.bench, [&](const std::string& line) {
        if (tty) std::fprintf(stderr, "\r\033[K1bit %s: %s", name, line.c_str());
        else if (line.find("starting serve") != std::string::npos) std::fprintf(stderr, "1bit %s: %s\n", name, line.c_str());
      }, stop);
    } catch (const Error&) {
      if (tty) std::fprintf(stderr, "\n");
      if (stop) {
        std::cerr << "1bit " << name << ": interrupted; every serve it started is stopped\n";
        return 130;
      }
      throw;
    }
    if (tty) std::fprintf(stderr, "\r\033[K");
    std::cout << bench_table(rec);
    if (!c.json_out.empty()) write_text(c.json_out, rec.to_json().dump(1) + "\n");
    if (!c.html_out.empty()) write_text(c.html_out, bench_html(rec));
    if (!tune) return 0;

    const DeviceChoice where = resolve_device("auto", default_llama_server());
    if (where.device == "cuda" && where.gpu.empty())
      std::cerr << "1bit tune: the engine names no GPU model; a recipe written now matches any CUDA GPU\n";
    int wins = 0;
    for (size_t i = 1; i < rec.configs.size(); ++i) {
      TuneVerdict v = judge(rec, rec.configs[i].name, c.metric);
      const BenchConfig& tried = rec.configs[i];
      std::vector<std::string> engine_args(tried.args.begin() + (tried.args.empty() ? 0 : 1), tried.args.end());
      std::string label = shell_assignments(tried.env) + shell_join(engine_args);
      while (!label.empty() && label.back() == ' ') label.pop_back();
      std::cerr << "1bit tune: " << label << ": " << c.metric << " median " << v.base_median << " -> "
                << v.median << ", gain " << v.gain * 100 << "% against noise " << v.noise * 100 << "%: "
                << (v.wins ? "wins" : "no win") << "\n";
      if (!v.wins) continue;
      ++wins;
      nlohmann::json entry = recipe_entry(rec, v, c.metric, engine_args, tried.env, where);
      if (!c.write_file.empty()) entry["id"] = append_recipe(c.write_file, entry);
      std::cout << entry.dump(2) << "\n";
    }
    if (wins == 0) std::cerr << "1bit tune: no candidate won beyond the noise; nothing to write\n";
    return 0;
  } catch (const Error& e) {
    std::cerr << "1bit " << name << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace

std::string bench_usage() {
  BenchCli b, t;
  return "usage: 1bit bench -m MODEL --config NAME=ARGS [--config ...] [options]\n\n"
         "Measures `1bit serve` configurations against each other in one run. Rounds interleave\n"
         "the configurations (A B A B ...), each with a fresh serve on a free port: a warm-up, prompt\n"
         "speed on a long prompt (8 tokens, prompt cache off), decode speed on a code, a prose and a\n"
         "short prompt (greedy), time to first token and, with a drafter, acceptance. Prints best /\n"
         "median per metric, non-baseline rows with the change of the median.\n\noptions:\n" +
         format_options(bench_table(b)) +
         "\nusage: 1bit tune -m MODEL --try \"ARGS\" [--try ...] [--metric M] [--write FILE] [options]\n\n"
         "Benches the current launch against each candidate's engine arguments and prints a recipe\n"
         "entry for every candidate whose median beats the baseline's by more than the run's noise\n"
         "(half the larger relative spread of the two sample sets) and by more than 1%.\n\noptions:\n" +
         format_options(tune_table(t));
}

int run_bench_command(const std::vector<std::string>& args) { return run(args, false); }
int run_tune_command(const std::vector<std::string>& args) { return run(args, true); }

}  // namespace onebit
