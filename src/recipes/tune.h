// `1bit tune`'s decision rule and what it writes: when a candidate beats the current best, and the
// recipe entry that quotes the measurement.
//
// A goal says what "faster" means. Per metric, gain = the relative change of the candidate's
// median against the base's (sign turned so that better is positive; time to first token changes
// by 5 ms less, none within 5 ms: the scheduler alone moves it that much), noise = what the
// difference may be by chance: once both sides have two rounds or more, the 95% half-width
// (Student's t) of the difference of their per-round means, from the pooled spread of their
// per-round medians (a fresh serve moves speed by a few percent by itself: on the H200 an 8B's
// decode ran from 272 to 305 tok/s over serves of one launch); in one round, half the larger
// relative spread of their samples ((max - min) / median, from four values on without the lowest
// and the highest); time to first token's noise, like its change, 5 ms less. The goal's gain and noise are the weighted means over
// its metrics:
//   chat      decode-code, decode-prose, decode-short, ttft (equal weights)
//   prompt    prompt
//   balanced  prompt 1/3, the three decode metrics 1/9 each, ttft 1/3
// A candidate wins when the goal's gain exceeds its noise and 1%, and no metric that counts loses
// beyond its own noise and 1%. Under chat prompt speed does not count (a loss there is reported as
// the candidate's cost); the speculative metrics (acceptance, tokens per step, step time) never
// count (decode speed already says what they buy).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench.h"
#include "engine/device.h"
#include "recipes/recipes.h"
#include "recipes/tune_space.h"

namespace onebit {

enum class TuneGoal { kChat, kPrompt, kBalanced };

// "chat", "prompt", "balanced"; throws Error for any other word.
TuneGoal parse_tune_goal(const std::string& word);
const char* goal_name(TuneGoal goal);

struct MetricChange {
  std::string metric;
  double base_median = 0, median = 0;
  double gain = 0, noise = 0;  // fractions
  double weight = 0;           // in the goal; 0: not part of it
  bool counts = true;          // false: the goal lets it get worse
  bool loses() const { return gain < -noise && gain < -0.01; }
  // The change as the metric itself moved: "ttft +59.0%" is slower, "decode-code +6.2%" faster.
  std::string moved() const;
};

// "+5.1%" for 0.051.
std::string signed_percent(double fraction);

struct Comparison {
  std::vector<MetricChange> metrics;  // every metric both sides have samples of
  double gain = 0, noise = 0;         // the goal's
  bool beats() const { return gain > noise && gain > 0.01; }
  bool clearly_worse() const { return gain < -noise && gain < -0.01; }
  std::vector<std::string> losses() const;  // counted metrics lost: "ttft +59.0%"
  std::vector<std::string> costs() const;   // uncounted metrics lost
  bool wins() const { return beats() && losses().empty(); }
  // "decode-code +6.2%, ..., goal +5.1% against noise 1.2%".
  std::string summary() const;
};

// `candidate` against `base` in `record` under `goal`. Throws Error when a goal metric has no
// samples on either side.
Comparison compare_configs(const BenchRecord& record, const std::string& base, const std::string& candidate,
                           TuneGoal goal);

// Where a recipe was measured: the device (and GPU), the drafter kind, the CPU and engine build.
struct RecipeScope {
  DeviceChoice where;
  std::string drafter = "none";
  RecipeMachine machine;
};

// The recipe entry for `setting`, which won `comparison` in `record` under `goal`. `match` binds it
// to what it was measured on: the model's architecture, MoE, stamp, file type and size (within
// 10%), the device and GPU, the drafter kind, the CPU and the engine build (each only when known).
// `why` says what it gains, what it costs elsewhere and what it was measured on top of;
// `measured` is "<model>, <machine>, <goal metrics> <base> -> <new>, <date>".
nlohmann::json recipe_entry(const BenchRecord& record, const Comparison& comparison, TuneGoal goal,
                            const std::string& knob, const TuneSetting& setting, const TuneSetting& on_top_of,
                            const RecipeScope& scope);

// Appends `entry` to the recipes file at `path` (created with its folder when missing), keeping
// its id unique and the file valid (it is parsed back before it replaces the old one, atomically).
// Returns the id written.
std::string append_recipe(const std::string& path, nlohmann::json entry);

}  // namespace onebit
