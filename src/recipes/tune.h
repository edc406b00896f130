// `1bit tune`: the recipes rule made automatic. A bench run with the current launch as baseline
// and candidate engine arguments; a candidate that wins beyond the run's noise becomes a recipe
// entry whose `measured` quotes the record.
//
// The decision, per candidate, on one metric: gain = relative change of the median against the
// baseline's median (sign turned so that better is positive); noise = half the larger relative
// spread ((max - min) / median) of the two sample sets. A candidate wins when gain > noise and
// gain > 1%.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "engine/device.h"

namespace onebit {

struct TuneVerdict {
  std::string config;
  double base_median = 0, median = 0;
  double gain = 0, noise = 0;  // fractions
  bool wins = false;
};

TuneVerdict judge(const BenchRecord& record, const std::string& config, const std::string& metric);

// What a candidate adds, as a recipe's "args" and "env" (each only when not empty).
nlohmann::json recipe_body(const std::vector<std::string>& args,
                           const std::vector<std::pair<std::string, std::string>>& env);

// The recipe entry for a winning candidate: engine `args` and `env`, `match` from the facts, the
// device and (cuda) the GPU model it was measured on, `measured` as "<model>, <machine>, <metric> <base> -> <candidate>, <date>".
nlohmann::json recipe_entry(const BenchRecord& record, const TuneVerdict& verdict, const std::string& metric,
                            const std::vector<std::string>& args,
                            const std::vector<std::pair<std::string, std::string>>& env, const DeviceChoice& where);

// Appends `entry` to the recipes file at `path` (created when missing), keeping its id unique and
// the file valid (it is parsed back before it replaces the old one). Returns the id written.
std::string append_recipe(const std::string& path, nlohmann::json entry);

}  // namespace onebit
