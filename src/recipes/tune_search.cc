#include "recipes/tune_search.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "base/error.h"

namespace onebit {
namespace {

std::string clock_text(double s) {
  char buf[32];
  const long t = static_cast<long>(s);
  std::snprintf(buf, sizeof(buf), "%ld:%02ld", t / 60, t % 60);
  return buf;
}

// Whether `candidate` gave `base`'s greedy answer to every prompt, in every round of both.
bool same_answers(const BenchRecord& r, const std::string& base, const std::string& candidate) {
  bool any = false;
  for (const auto& c : r.answers) {
    if (c.config != candidate) continue;
    for (const auto& b : r.answers)
      if (b.config == base && b.prompt == c.prompt) {
        any = true;
        if (b.text != c.text) return false;
      }
  }
  return any;
}

// How a measured candidate stands after `round`: "" while it is a close call that more rounds may
// settle, else its decision.
std::string decide(const TuneCandidate& c, int round, int max_rounds) {
  const Comparison& k = c.comparison;
  if (k.clearly_worse()) return "clearly worse";
  if (round < 2) return "";
  const auto losses = k.losses();
  if (k.beats() && !losses.empty()) {
    std::string s = "no win: loses ";
    for (size_t i = 0; i < losses.size(); ++i) s += (i ? ", " : "") + losses[i];
    return s;
  }
  if (k.wins() && (k.gain > 2 * k.noise || round >= max_rounds)) return "wins";
  // Two rounds a side give a wide interval (t = 4.3): there only a gain under the 1% floor is
  // hopeless; from three rounds on, one under half the noise.
  const bool hopeless = round >= 3 ? k.gain <= k.noise / 2 : k.gain <= 0.01;
  if (hopeless || round >= max_rounds) return k.wins() ? "wins" : "no win";
  return "";
}

}  // namespace

BenchConfig launch_with(const BenchConfig& launch, const TuneSetting& setting, const std::string& name,
                        const EngineArgs& engine) {
  auto dashes = std::find(launch.args.begin(), launch.args.end(), "--");
  TuneSetting base;
  base.args.assign(dashes == launch.args.end() ? dashes : dashes + 1, launch.args.end());
  base.env = launch.env;
  const TuneSetting merged = overlay(base, setting, engine);
  BenchConfig c;
  c.name = name;
  c.env = merged.env;
  c.args.assign(launch.args.begin(), dashes);
  if (!merged.args.empty()) {
    c.args.push_back("--");
    c.args.insert(c.args.end(), merged.args.begin(), merged.args.end());
  }
  return c;
}

TuneSearchResult tune_search(const TuneSearchOptions& o, const BenchRecord& record, const TuneMeasure& measure,
                             const std::function<double()>& elapsed_s, const std::function<void(const std::string&)>& status,
                             const std::atomic<bool>& stop, const EngineArgs& engine) {
  TuneSearchResult result;
  std::string best_note = "the current launch";
  auto spent = [&] {
    if (stop || elapsed_s() >= o.budget_s) result.budget_spent = true;
    return result.budget_spent;
  };
  auto say = [&](const std::string& what) {
    status("[" + clock_text(elapsed_s()) + " / " + clock_text(o.budget_s) + "] " + what + "; best so far: " + best_note);
  };
  for (const SearchKnob& knob : o.knobs) {
    KnobRun run;
    run.knob = knob.id;
    run.what = knob.what;
    run.base = result.best;
    run.base_config = knob.id + ".base";
    const BenchConfig base = launch_with(o.launch, result.best, run.base_config, engine);
    std::set<std::string> names = {run.base_config};
    for (const TuneSetting& value : knob.values) {
      TuneCandidate c;
      c.value = value;
      c.launch = overlay(result.best, value, engine);
      const std::string stem = knob.id + "." + (value.slug().empty() ? "value" : value.slug());
      std::string name = stem;
      for (int n = 2; names.count(name); ++n) name = stem + "-" + std::to_string(n);
      c.config = name;
      const BenchConfig config = launch_with(o.launch, c.launch, name, engine);
      if (config.args == base.args && config.env == base.env) continue;  // the launch has this value already
      names.insert(name);
      run.candidates.push_back(c);
    }
    if (run.candidates.empty()) {
      run.outcome = "nothing to try: the launch has every value already";
      result.knobs.push_back(run);
      continue;
    }
    if (spent()) {
      run.outcome = "not measured: the budget was spent";
      result.knobs.push_back(run);
      break;
    }
    std::vector<size_t> live(run.candidates.size());
    for (size_t i = 0; i < live.size(); ++i) live[i] = i;
    for (int round = 1; round <= o.max_rounds && !live.empty(); ++round) {
      if (spent()) break;
      const std::string label = knob.id + ", round " + std::to_string(round) + "/" + std::to_string(o.max_rounds);
      say(label + ": the base");
      const double base_start = elapsed_s();
      try {
        measure(base, round, label, 0);
      } catch (const Error& e) {
        if (!stop) result.failure = "the base of " + knob.id + " failed: " + e.what();
        result.budget_spent = true;
        break;
      }
      run.rounds = round;
      const double limit = 3 * (elapsed_s() - base_start) + 10;
      std::rotate(live.begin(), live.begin() + static_cast<std::ptrdiff_t>((round - 1) % live.size()), live.end());
      std::vector<size_t> measured, unmeasured;  // unmeasured: the round was cut short
      for (size_t i : live) {
        if (spent()) {
          unmeasured.push_back(i);
          continue;
        }
        TuneCandidate& c = run.candidates[i];
        say(label + ": " + c.value.label());
        try {
          measure(launch_with(o.launch, c.launch, c.config, engine), round, label, limit);
          c.rounds = round;
          measured.push_back(i);
        } catch (const Error& e) {
          if (stop) unmeasured.push_back(i);
          else c.decision = std::string("failed: ") + e.what();
        }
      }
      std::vector<size_t> next = unmeasured;
      for (size_t i : measured) {
        TuneCandidate& c = run.candidates[i];
        c.comparison = compare_configs(record, run.base_config, c.config, o.goal);
        if (knob.changes_output && !same_answers(record, run.base_config, c.config)) {
          c.decision = "changes the greedy output";
          continue;
        }
        c.decision = decide(c, round, o.max_rounds);
        if (c.decision.empty()) next.push_back(i);
      }
      live = next;
    }
    for (size_t i : live)  // close calls the budget left open
      if (run.candidates[i].decision.empty())
        run.candidates[i].decision = run.candidates[i].rounds == 0 ? "not measured: the budget was spent"
                                                                    : "undecided: the budget was spent";
    for (auto& c : run.candidates)
      if (c.decision.empty()) c.decision = "not measured: the budget was spent";
    for (size_t i = 0; i < run.candidates.size(); ++i) {
      const TuneCandidate& c = run.candidates[i];
      if (c.decision == "wins" && (run.winner < 0 || c.comparison.gain > run.candidates[run.winner].comparison.gain))
        run.winner = static_cast<int>(i);
    }
    if (run.winner >= 0) {
      const TuneCandidate& w = run.candidates[run.winner];
      result.best = w.launch;
      best_note = result.best.label();
      run.outcome = "kept " + w.value.label() + ": " + w.comparison.summary();
    } else {
      run.outcome = "kept the base: no value won";
    }
    status("[" + clock_text(elapsed_s()) + " / " + clock_text(o.budget_s) + "] " + knob.id + ": " + run.outcome);
    result.knobs.push_back(run);
    if (result.budget_spent) break;
  }
  return result;
}

}  // namespace onebit
