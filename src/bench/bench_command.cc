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
#include "bench/bench.h"
#include "bench/report.h"

namespace onebit {
namespace {

struct BenchCli {
  MeasureCli measure;
  std::vector<std::string> configs;
};

std::vector<CliOption> bench_table(BenchCli& c) {
  auto t = measure_options(c.measure, BenchOptions{});
  t.insert(t.begin() + 1, CliOption{{"--config"}, "NAME=ARGS",
                                    "a configuration: a name and `1bit serve` arguments (may be empty: base=),\n"
                                    "led by VAR=VALUE words for its environment; the first is the baseline",
                                    [&c](const std::string& v) { c.configs.push_back(v); }});
  t.insert(t.begin() + 2, CliOption{{"--rounds"}, "N", "rounds; each runs every configuration once, interleaved (default: 2)",
                                    [&c](const std::string& v) {
                                      c.measure.bench.rounds = static_cast<int>(parse_int_option("--rounds", v, 1, 1000));
                                    }});
  return t;
}

void stop_children() {
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

}  // namespace

std::vector<CliOption> measure_options(MeasureCli& c, const BenchOptions& d) {
  auto count = [](const char* name, int& field, int max) {
    return [name, &field, max](const std::string& v) { field = static_cast<int>(parse_int_option(name, v, 1, max)); };
  };
  BenchOptions& b = c.bench;
  return {
      {{"-m", "--model"}, "FILE", "the GGUF model to measure", [&b](const std::string& v) { b.model = v; }},
      {{"--prompt-reps"}, "N", "prompt-speed requests per configuration and round (default: " + std::to_string(d.prompt_reps) + ")",
       count("--prompt-reps", b.prompt_reps, 1000)},
      {{"--decode-reps"}, "N", "decode requests per prompt kind (code, prose, short) (default: " + std::to_string(d.decode_reps) + ")",
       count("--decode-reps", b.decode_reps, 1000)},
      {{"--decode-tokens"}, "N", "tokens generated per decode request (default: " + std::to_string(d.decode_tokens) + ")",
       count("--decode-tokens", b.decode_tokens, 1 << 20)},
      {{"--prompt-file"}, "F", "the long prompt for prompt speed (default: generated)",
       [&b](const std::string& v) { b.prompt_file = v; }},
      {{"--prompt-chars"}, "N", "length of the generated long prompt (default: 8000, about 1800 tokens;\ncut to fit the engine's context)",
       [&c](const std::string& v) {
         c.bench.prompt_chars = static_cast<int>(parse_int_option("--prompt-chars", v, 1, 1 << 26));
         c.prompt_chars_set = true;
       }},
      {{"--lock"}, "FILE", "hold an exclusive lock on FILE for the whole run", [&c](const std::string& v) { c.lock_file = v; }},
      {{"--json"}, "OUT", "write the whole record as JSON", [&c](const std::string& v) { c.json_out = v; }},
      {{"--html"}, "OUT", "write a self-contained HTML report with charts", [&c](const std::string& v) { c.html_out = v; }},
      {{"--log-dir"}, "DIR", "where each serve's log goes (default: a new directory under $TMPDIR)",
       [&b](const std::string& v) { b.log_dir = v; }},
      {{"--load-timeout"}, "S", "seconds each serve may take to load (default: 600)",
       [&b](const std::string& v) { b.load_timeout_s = parse_double_option("--load-timeout", v, 1, 1e6); }},
  };
}

void finish_measure_options(MeasureCli& c) {
  BenchOptions& b = c.bench;
  if (b.model.empty()) throw Error("-m MODEL is required");
  if (!b.prompt_file.empty() && c.prompt_chars_set) throw Error("--prompt-file and --prompt-chars exclude each other");
  if (b.log_dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/1bit-bench-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) throw Error("cannot create a log directory under " + tmpl);
    b.log_dir = tmpl;
  } else {
    std::error_code ec;
    std::filesystem::create_directories(b.log_dir, ec);
    if (ec) throw Error(b.log_dir + ": cannot create the log directory: " + ec.message());
  }
  b.onebit = executable_dir() + "/1bit";
}

std::unique_ptr<FileLock> take_run_lock(const MeasureCli& c, const std::string& who) {
  if (c.lock_file.empty()) return nullptr;
  return std::make_unique<FileLock>(c.lock_file, [&] { std::cerr << who << ": waiting for lock " << c.lock_file << "\n"; });
}

void stop_on_signals(std::atomic<bool>& stop) {
  const sigset_t set = block_stop_signals();
  std::thread([set, &stop] {
    int sig;
    if (sigwait(&set, &sig) != 0) return;
    stop = true;
    stop_children();
  }).detach();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error(path + ": cannot write");
}

int run_bench_command(const std::vector<std::string>& args) {
  try {
    BenchCli c;
    CliParse p = parse_cli(bench_table(c), args);
    if (p.help) {
      std::cout << bench_usage();
      return 0;
    }
    if (!p.positional.empty()) throw Error("unexpected argument \"" + p.positional.front() + "\"");
    finish_measure_options(c.measure);
    BenchOptions& o = c.measure.bench;
    if (c.configs.empty()) throw Error("at least one --config NAME=ARGS is needed (the first is the baseline)");
    std::set<std::string> names;
    for (const auto& spec : c.configs) {
      BenchConfig bc = parse_bench_config(spec);
      if (!names.insert(bc.name).second) throw Error("--config: the name \"" + bc.name + "\" is used twice");
      o.configs.push_back(bc);
    }
    std::atomic<bool> stop{false};
    stop_on_signals(stop);
    auto lock = take_run_lock(c.measure, "1bit bench");
    std::cerr << "1bit bench: serve logs in " << o.log_dir << "\n";
    const bool tty = isatty(2);
    BenchRecord rec;
    try {
      rec = run_bench(o, [&](const std::string& line) {
        if (tty) std::fprintf(stderr, "\r\033[K1bit bench: %s", line.c_str());
        else if (line.find("starting serve") != std::string::npos || line.find("shortened") != std::string::npos)
          std::fprintf(stderr, "1bit bench: %s\n", line.c_str());
      }, stop);
    } catch (const Error&) {
      if (tty) std::fprintf(stderr, "\n");
      if (stop) {
        std::cerr << "1bit bench: interrupted; every serve it started is stopped\n";
        return 130;
      }
      throw;
    }
    if (tty) std::fprintf(stderr, "\r\033[K");
    std::cout << bench_table(rec);
    if (!rec.prompt_note.empty()) std::cout << "note: " << rec.prompt_note << "\n";
    if (!c.measure.json_out.empty())
      write_text(c.measure.json_out, rec.to_json().dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    if (!c.measure.html_out.empty()) write_text(c.measure.html_out, bench_html(rec));
    return 0;
  } catch (const Error& e) {
    std::cerr << "1bit bench: " << e.what() << "\n";
    return 1;
  }
}

std::string bench_usage() {
  BenchCli b;
  return "usage: 1bit bench -m MODEL --config NAME=ARGS [--config ...] [options]\n\n"
         "Measures `1bit serve` configurations against each other in one run. Rounds interleave\n"
         "the configurations (A B A B ...), each with a fresh serve on a free port: a warm-up, prompt\n"
         "speed on a long prompt (8 tokens, prompt cache off), decode speed on a code, a prose and a\n"
         "short prompt (greedy), time to first token and, with a drafter, acceptance. Prints best /\n"
         "median per metric, non-baseline rows with the change of the median.\n\noptions:\n" +
         format_options(bench_table(b));
}

}  // namespace onebit
