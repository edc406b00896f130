#include "recipes/tune.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "base/error.h"
#include "engine/engine_args.h"
#include "recipes/recipe_store.h"
#include "recipes/recipes.h"

namespace onebit {
namespace {

using nlohmann::json;

// The goal's metrics and their weights; `free` metrics may get worse.
struct GoalSpec {
  std::map<std::string, double> weights;
  std::vector<std::string> free;
};

GoalSpec goal_spec(TuneGoal g) {
  const std::vector<std::string> speculative = {"acceptance", "tokens-per-step", "step-time"};
  std::vector<std::string> chat_free = speculative;
  chat_free.push_back("prompt");
  switch (g) {
    case TuneGoal::kChat:
      return {{{"decode-code", 1}, {"decode-prose", 1}, {"decode-short", 1}, {"ttft", 1}}, chat_free};
    case TuneGoal::kPrompt:
      return {{{"prompt", 1}}, speculative};
    case TuneGoal::kBalanced:
      return {{{"prompt", 3}, {"decode-code", 1}, {"decode-prose", 1}, {"decode-short", 1}, {"ttft", 3}}, speculative};
  }
  return {};
}

// Below this many milliseconds a change of time to first token is no change: a client's first
// token moves that much with the scheduler alone, and on a fast GPU it is a few milliseconds in all.
constexpr double kTtftDeadZoneMs = 5;

// (max - min) / median; from four values on without the lowest and the highest, so that one
// disturbed value (another program took the cores for a moment) does not stand for the run.
double spread(std::vector<double> v) {
  double med = median_of(v);
  if (v.empty() || med == 0) return 0;
  std::sort(v.begin(), v.end());
  const size_t cut = v.size() >= 4 ? 1 : 0;
  return (v[v.size() - 1 - cut] - v[cut]) / std::fabs(med);
}

// One configuration's per-round medians of a metric, in round order.
std::vector<double> round_medians(const BenchRecord& r, const std::string& config, const std::string& metric) {
  std::map<int, std::vector<double>> by_round;
  for (const auto& s : r.samples)
    if (s.config == config && s.metric == metric) by_round[s.round].push_back(s.value);
  std::vector<double> medians;
  for (const auto& [round, values] : by_round) medians.push_back(median_of(values));
  return medians;
}

// Student's t for a two-sided 95% interval with `df` degrees of freedom (rounded up past 30).
double t95(size_t df) {
  static const double t[] = {12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14, 2.13,
                             2.12,  2.11, 2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05, 2.04};
  constexpr size_t n = sizeof(t) / sizeof(t[0]);
  if (df <= n) return t[df == 0 ? 0 : df - 1];
  return df <= 60 ? 2.04 : df <= 120 ? 2.00 : 1.98;
}

// What the difference of two configurations' medians of a metric may be by chance, relative to
// `base_median`. Over two rounds or more on both sides: the 95% half-width of the difference of
// their per-round means (a fresh serve moves decode speed by a few percent on its own, so the
// rounds, not a round's samples, are what vary). In one round: half the larger spread of their
// samples, which mix prompts of different lengths, as the first quick look.
double difference_noise(const BenchRecord& r, const std::string& base, const std::string& candidate,
                        const std::string& metric, double base_median) {
  const auto b = round_medians(r, base, metric), c = round_medians(r, candidate, metric);
  if (b.size() < 2 || c.size() < 2)
    return std::max(spread(r.values(base, metric)), spread(r.values(candidate, metric))) / 2;
  if (base_median == 0) return 0;
  auto squares = [](const std::vector<double>& v) {
    double mean = 0, sum = 0;
    for (double x : v) mean += x / static_cast<double>(v.size());
    for (double x : v) sum += (x - mean) * (x - mean);
    return sum;
  };
  const size_t df = b.size() + c.size() - 2;
  const double pooled = (squares(b) + squares(c)) / static_cast<double>(df);
  const double se = std::sqrt(pooled * (1.0 / static_cast<double>(b.size()) + 1.0 / static_cast<double>(c.size())));
  return t95(df) * se / std::fabs(base_median);
}


std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), v >= 100 ? "%.0f" : v >= 1 ? "%.1f" : "%.3f", v);
  return buf;
}


}  // namespace

std::string signed_percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%+.1f%%", fraction * 100);
  return buf;
}

std::string MetricChange::moved() const {
  return metric + " " + (base_median == 0 ? std::string("n/a") : signed_percent((median - base_median) / base_median));
}

TuneGoal parse_tune_goal(const std::string& word) {
  if (word == "chat") return TuneGoal::kChat;
  if (word == "prompt") return TuneGoal::kPrompt;
  if (word == "balanced") return TuneGoal::kBalanced;
  throw Error("--goal: \"" + word + "\" is not one of chat, prompt, balanced");
}

const char* goal_name(TuneGoal g) {
  return g == TuneGoal::kChat ? "chat" : g == TuneGoal::kPrompt ? "prompt" : "balanced";
}

std::vector<std::string> Comparison::losses() const {
  std::vector<std::string> out;
  for (const auto& m : metrics)
    if (m.counts && m.loses()) out.push_back(m.moved());
  return out;
}

std::vector<std::string> Comparison::costs() const {
  std::vector<std::string> out;
  for (const auto& m : metrics)
    if (!m.counts && m.loses()) out.push_back(m.moved());
  return out;
}

std::string Comparison::summary() const {
  std::string s;
  for (const auto& m : metrics) s += m.moved() + ", ";
  return s + "goal " + signed_percent(gain) + " against noise " + signed_percent(noise).substr(1);
}

Comparison compare_configs(const BenchRecord& r, const std::string& base, const std::string& candidate, TuneGoal goal) {
  const GoalSpec spec = goal_spec(goal);
  Comparison c;
  double weights = 0;
  for (const auto& m : bench_metrics()) {
    const auto b = r.values(base, m.name), v = r.values(candidate, m.name);
    const auto w = spec.weights.find(m.name);
    if (b.empty() || v.empty()) {
      if (w != spec.weights.end())
        throw Error(std::string("no ") + m.name + " samples for " + (b.empty() ? base : candidate));
      continue;
    }
    MetricChange mc;
    mc.metric = m.name;
    mc.base_median = median_of(b);
    mc.median = median_of(v);
    double change = mc.median - mc.base_median;
    if (mc.metric == "ttft") change = std::copysign(std::max(0.0, std::fabs(change) - kTtftDeadZoneMs), change);
    mc.gain = mc.base_median == 0 ? 0 : change / mc.base_median * (m.higher_is_better ? 1 : -1);
    mc.noise = difference_noise(r, base, candidate, m.name, mc.base_median);
    // The dead zone takes as much off what chance may do as off the change itself.
    if (mc.metric == "ttft" && mc.base_median > 0)
      mc.noise = std::max(0.0, mc.noise * mc.base_median - kTtftDeadZoneMs) / mc.base_median;
    mc.weight = w == spec.weights.end() ? 0 : w->second;
    mc.counts = std::find(spec.free.begin(), spec.free.end(), m.name) == spec.free.end();
    c.gain += mc.weight * mc.gain;
    c.noise += mc.weight * mc.noise;
    weights += mc.weight;
    c.metrics.push_back(mc);
  }
  if (weights > 0) {
    c.gain /= weights;
    c.noise /= weights;
  }
  return c;
}

json recipe_entry(const BenchRecord& r, const Comparison& c, TuneGoal goal, const std::string& knob,
                  const TuneSetting& setting, const TuneSetting& on_top_of, const RecipeScope& scope) {
  const json& f = r.facts;
  std::string machine = r.machine.value("cpu", "unknown CPU");
  if (r.machine.contains("gpus") && !r.machine["gpus"].empty()) machine = r.machine["gpus"][0].get<std::string>();
  auto list = [](const json& one) { return json::array({one}); };
  json match = {{"device", list(scope.where.device)}, {"architecture", list(f.value("architecture", ""))},
                {"moe", f.value("moe", false)}, {"hadamard_q4_0", f.value("hadamard_q4_0", false)},
                {"drafter", list(scope.drafter)}};
  if (scope.where.device != "cpu" && !scope.where.gpu.empty()) match["gpu"] = list(scope.where.gpu);
  if (f.contains("file_type") && f["file_type"].is_string()) match["file_type"] = list(f["file_type"]);
  if (const uint64_t size = f.value("file_size", uint64_t{0}); size > 0)
    match["size_bytes"] = json::array({size - size / 10, size + size / 10});
  if (!scope.machine.cpu.empty()) match["cpu"] = list(scope.machine.cpu);
  if (!scope.machine.engine.empty()) match["engine"] = list(scope.machine.engine);
  std::string gains, measured;
  for (const auto& m : c.metrics) {
    if (m.weight == 0) continue;
    const BenchMetric* bm = nullptr;
    for (const auto& x : bench_metrics())
      if (m.metric == x.name) bm = &x;
    gains += (gains.empty() ? "" : ", ") + m.moved();
    measured += (measured.empty() ? "" : ", ") + m.metric + " " + short_number(m.base_median) + " -> " +
                short_number(m.median) + (bm && *bm->unit ? std::string(" ") + bm->unit : "");
  }
  std::string why = knob + " " + setting.label() + " wins for " + goal_name(goal) + " beyond the run's noise: " + gains +
                    " (goal " + signed_percent(c.gain) + ", noise " + signed_percent(c.noise).substr(1) + ")";
  const auto costs = c.costs();
  if (!costs.empty()) {
    why += "; it costs ";
    for (size_t i = 0; i < costs.size(); ++i) why += (i ? ", " : "") + costs[i];
  }
  if (!on_top_of.empty()) why += "; measured on top of " + on_top_of.label();
  json entry = {{"id", f.value("architecture", "model") + "-" + scope.where.device + "-" + setting.slug()},
                {"match", match},
                {"why", why},
                {"measured", std::filesystem::path(r.model).filename().string() + ", " + machine + ", " + measured + ", " +
                                 r.finished.substr(0, 10)},
                {"source", "1bit tune --goal " + std::string(goal_name(goal)) + ", " + std::to_string(r.rounds) + " rounds"}};
  if (!setting.args.empty()) entry["args"] = setting.args;
  if (!setting.env.empty()) entry["env"] = env_object(setting.env);
  return entry;
}

std::string append_recipe(const std::string& path, json entry) {
  json file = {{"about", "Recipes written by 1bit tune; each quotes the bench record behind it."}, {"recipes", json::array()}};
  if (std::filesystem::exists(path)) {
    std::ifstream in(path);
    std::ostringstream text;
    text << in.rdbuf();
    parse_recipes(text.str(), path, EngineArgs::builtin());  // refuse to extend a broken file
    file = json::parse(text.str());
  }
  const std::string base = entry["id"];
  std::string id = base;
  for (int n = 2;; ++n) {
    bool taken = std::any_of(file["recipes"].begin(), file["recipes"].end(), [&](const json& r) { return r.value("id", "") == id; });
    if (!taken) break;
    id = base + "-" + std::to_string(n);
  }
  entry["id"] = id;
  file["recipes"].push_back(entry);
  const std::string text = file.dump(2) + "\n";
  parse_recipes(text, path, EngineArgs::builtin());
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) throw Error(path + ": cannot create its folder: " + ec.message());
  write_file_atomically(path, text);
  return id;
}

}  // namespace onebit
