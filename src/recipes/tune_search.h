// The search of `1bit tune`: coordinate descent over the knobs, each knob's values measured
// against the best launch found so far.
//
// For a knob, every value (laid over the current best; a value that leaves it unchanged is not
// measured) runs in interleaved rounds with the current best as the base, each round a fresh
// serve per configuration. After the first round the candidates clearly worse on the goal are
// dropped (successive halving); from the second round on, a candidate is decided when it wins
// (tune.h's rule) by twice its noise or is clearly worse, and further rounds (up to max_rounds)
// run only for the close calls (after two rounds those above the 1% floor, from three rounds on
// those above half their noise). The winner with the largest goal gain becomes the new best; a knob that
// changes the output must also have given the base's greedy answers to every prompt.
//
// The budget caps the whole search: no measurement starts once it is spent, so the search ends at
// most one measurement past it, with the best found so far; a stop (Ctrl-C) ends it the same way.
// A candidate whose serve fails is dropped with the reason, and so is one whose measurement takes
// more than three times the base's (plus 10 s): a hopeless value must not eat the budget. A
// failure of the base ends the search.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "recipes/tune.h"
#include "recipes/tune_space.h"

namespace onebit {

// A knob as the search sees it: its values here, already evaluated.
struct SearchKnob {
  std::string id;
  std::string what;
  std::vector<TuneSetting> values;
  bool changes_output = false;
};

struct TuneCandidate {
  TuneSetting value;       // the knob's value
  TuneSetting launch;      // what the configuration adds to the launch: the best so far with the value over it
  std::string config;      // its bench configuration's name
  int rounds = 0;          // rounds it was measured in
  Comparison comparison;   // against the base, over every round measured
  std::string decision;    // "wins", "clearly worse", "no win", "changes the output", "failed: ...", ...
};

struct KnobRun {
  std::string knob, what;
  TuneSetting base;          // the best so far when this knob ran
  std::string base_config;
  int rounds = 0;
  std::vector<TuneCandidate> candidates;
  int winner = -1;           // index into candidates
  std::string outcome;       // one line: what the knob's search decided
};

struct TuneSearchOptions {
  BenchConfig launch;          // the current launch: serve arguments (engine arguments after "--") and env
  std::vector<SearchKnob> knobs;
  TuneGoal goal = TuneGoal::kChat;
  double budget_s = 600;
  int max_rounds = 4;
};

struct TuneSearchResult {
  std::vector<KnobRun> knobs;
  TuneSetting best;            // every winner laid over each other, in order
  bool budget_spent = false;   // the search stopped early: the budget, `stop`, or a failure
  std::string failure;         // why the base could not be measured, or ""
};

// Runs one measurement of `config` (one serve, every metric) for `round`, appending to the record
// the search passes it (Bench::measure in `1bit tune`, synthetic samples in tests); throws Error
// when it fails or runs past `time_limit_s` (0: no limit).
using TuneMeasure =
    std::function<void(const BenchConfig& config, int round, const std::string& label, double time_limit_s)>;

// The search. `elapsed_s` is the wall clock since the run began (model loads included); `status`
// gets one line per step (knob, candidate, round, elapsed / budget, best so far); `stop` ends it
// like a spent budget (the measurement it interrupts counts for nothing). `record` must be the
// one `measure` appends to.
TuneSearchResult tune_search(const TuneSearchOptions& options, const BenchRecord& record, const TuneMeasure& measure,
                             const std::function<double()>& elapsed_s, const std::function<void(const std::string&)>& status,
                             const std::atomic<bool>& stop, const EngineArgs& engine);

// The configuration that runs `setting` on top of `launch`: its serve arguments with the
// setting's engine arguments laid over those after "--", and the setting's environment.
BenchConfig launch_with(const BenchConfig& launch, const TuneSetting& setting, const std::string& name,
                        const EngineArgs& engine);

}  // namespace onebit
