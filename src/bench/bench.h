// `1bit bench`: A/B measurements of serve configurations in one run. Rounds interleave the
// configurations (A B A B ...); each configuration in each round gets a fresh `1bit serve` on a
// free port. Speeds come from the engine's own `timings`, time to first token from the client.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace onebit {

struct BenchConfig {
  std::string name;
  std::vector<std::pair<std::string, std::string>> env;  // set for this configuration's serve
  std::vector<std::string> args;                         // `1bit serve` arguments
};

// Moves the leading VAR=VALUE words of `words` out, as a shell takes a command's environment.
std::vector<std::pair<std::string, std::string>> take_env_assignments(std::vector<std::string>& words);
// The assignments as a JSON object {"VAR": "VALUE", ...} (records and recipes write them so).
nlohmann::json env_object(const std::vector<std::pair<std::string, std::string>>& env);

// Parses "NAME=ARGS" (ARGS shell-split, may be empty). As on a shell's command line, leading
// words VAR=VALUE are environment for the configuration's serve and its engine (an engine switch
// such as ONEBIT_GDN_PREFILL=2 against its absence, in one run). Throws Error without '=' or a name.
BenchConfig parse_bench_config(const std::string& spec);

struct BenchOptions {
  std::string model;
  std::vector<BenchConfig> configs;  // the first is the baseline
  int rounds = 2;
  int prompt_reps = 5;
  int decode_reps = 3;
  int decode_tokens = 256;
  std::string prompt_file;  // the long prompt; empty: generated, prompt_chars long
  int prompt_chars = 8000;
  std::string log_dir;      // serve logs: <log_dir>/<config>-round<N>.log
  double load_timeout_s = 600;
  std::string onebit;       // the 1bit binary that runs serve
};

// One measured value.
struct BenchSample {
  std::string config;
  int round = 0;
  std::string metric;  // see bench_metrics()
  double value = 0;
};

struct BenchMetric {
  const char* name;  // "prompt", "decode-code", "decode-prose", "decode-short", "ttft", "acceptance"
  const char* unit;
  bool higher_is_better;
};
const std::vector<BenchMetric>& bench_metrics();

struct BenchRecord {
  std::string model;
  nlohmann::json facts;
  std::vector<BenchConfig> configs;
  int rounds = 0;
  std::vector<BenchSample> samples;
  nlohmann::json machine;  // cpu, cores, gpu, engine commit
  std::string started, finished;  // ISO 8601, UTC

  nlohmann::json to_json() const;
  // Samples of one configuration and metric.
  std::vector<double> values(const std::string& config, const std::string& metric) const;
};

// Runs the benchmark. `progress` gets a one-line status as it goes; `stop` aborts between and
// during requests. Throws Error on any failure (a serve that does not start, a response without
// timings); every serve it started is stopped before it returns or throws.
BenchRecord run_bench(const BenchOptions& options, const std::function<void(const std::string&)>& progress,
                      const std::atomic<bool>& stop);

// The machine as the record states it.
nlohmann::json describe_machine();

// Statistics used by the report and by tune.
double median_of(std::vector<double> v);
double best_of(const std::vector<double>& v, bool higher_is_better);

}  // namespace onebit
