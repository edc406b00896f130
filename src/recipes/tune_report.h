// What `1bit tune` shows of a search: the path it took (each knob, each candidate, the decision)
// as text, as JSON beside the bench record's every sample, and as a self-contained HTML page with
// the path and each knob's charts.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "recipes/tune_search.h"

namespace onebit {

struct TuneRun {
  const BenchRecord* record = nullptr;
  const TuneSearchResult* result = nullptr;
  TuneGoal goal = TuneGoal::kChat;
  double budget_s = 0;
  double elapsed_s = 0;
  std::string launch;                  // the current launch, as `1bit serve` arguments
  std::vector<std::string> skipped;    // "knob: why it does not apply here"
  std::vector<nlohmann::json> recipes; // the entries written (or printed, with --no-save)
  std::string written_to;              // the file they went to; "" with --no-save
};

// One line a knob, and under it one a candidate.
std::string tune_text(const TuneRun& run);
// The bench record's JSON with "tune": goal, budget, elapsed, launch, skipped knobs, the search
// path, the recipes.
nlohmann::json tune_json(const TuneRun& run);
std::string tune_html(const TuneRun& run);

}  // namespace onebit
