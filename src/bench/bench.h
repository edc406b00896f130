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
  // "prompt", "decode-code", "decode-prose", "decode-short", "ttft", and with a drafter
  // "acceptance" (accepted / drafted), "tokens-per-step" (tokens a verification step yields) and
  // "step-time" (the time of one speculative step)
  const char* name;
  const char* unit;
  bool higher_is_better;
};
const std::vector<BenchMetric>& bench_metrics();

// A greedy answer of one configuration to one decode prompt (tune's quality check compares them).
struct BenchAnswer {
  std::string config;
  int round = 0;
  std::string prompt;  // decode-code, decode-prose, decode-short
  std::string text;
};

struct BenchRecord {
  std::string model;
  nlohmann::json facts;
  std::vector<BenchConfig> configs;
  int rounds = 0;
  std::vector<BenchSample> samples;
  std::vector<BenchAnswer> answers;
  int prompt_tokens = 0;    // the long prompt's length, as the engine counts it
  std::string prompt_note;  // why the long prompt was shortened, or ""
  nlohmann::json machine;  // cpu, cores, gpu, engine commit
  std::string started, finished;  // ISO 8601, UTC

  nlohmann::json to_json() const;
  // Samples of one configuration and metric.
  std::vector<double> values(const std::string& config, const std::string& metric) const;
  // Whether a configuration drafted: the engine reported speculative steps for it.
  bool drafted(const std::string& config) const { return !values(config, "step-time").empty(); }
  // A speculative configuration's step cost: the median time of one of its verification steps
  // over the time of one plain decode step (1000 / the median decode speed) of the first
  // configuration that drafts nothing. Empty without such a configuration.
  struct StepCost {
    std::string config, plain;
    double step_ms = 0, plain_ms = 0;
    double cost() const { return plain_ms > 0 ? step_ms / plain_ms : 0; }
  };
  std::vector<StepCost> step_costs() const;
  // For each configuration after the first: how many of its greedy answers are the first
  // configuration's answer to the same prompt in the same round, to the character (a drafter
  // must not change them; with --batch-invariant not on a GPU either). Only configurations with
  // answers that the first can be held against.
  struct SameAnswers {
    std::string config, baseline;
    int same = 0, of = 0;
  };
  std::vector<SameAnswers> same_answers() const;
};

using BenchProgress = std::function<void(const std::string&)>;

// Measurements of one model, one configuration at a time. The long prompt is fitted to the
// context of the first serve that runs: when the engine counts more tokens than that context
// holds (with the 8 generated), it is cut to fit, once, and the record says so.
class Bench {
 public:
  explicit Bench(BenchOptions options);  // throws Error when the model or the prompt file is unreadable
  // A record with the model's facts and the machine, started now, no samples.
  BenchRecord new_record() const;
  // One fresh serve for `config`: a warm-up, then every metric's samples for `round` appended to
  // `record` (configs are added to it as they first run). `progress` gets one-line statuses led
  // by `label` ("round 1/3"); `stop` aborts between and during requests, and so does passing
  // `time_limit_s` (0: none; checked between requests). Throws Error on any failure (a serve
  // that does not start, a response without timings, the limit); the serve is stopped before it
  // returns or throws.
  void measure(const BenchConfig& config, int round, const std::string& label, BenchRecord& record,
               const BenchProgress& progress, const std::atomic<bool>& stop, double time_limit_s = 0);
  const BenchOptions& options() const { return o_; }

 private:
  void fit_prompt(int port, BenchRecord& record, const BenchProgress& progress);

  BenchOptions o_;
  nlohmann::json facts_;
  std::string long_prompt_;
  bool fitted_ = false;
};

// Runs the benchmark: every configuration once per round, interleaved. Throws as measure() does.
BenchRecord run_bench(const BenchOptions& options, const BenchProgress& progress, const std::atomic<bool>& stop);

// Now, as records state times: ISO 8601 in UTC.
std::string utc_timestamp();

// The machine as the record states it.
nlohmann::json describe_machine();

// Statistics used by the report and by tune.
double median_of(std::vector<double> v);
double best_of(const std::vector<double>& v, bool higher_is_better);

}  // namespace onebit
