#include "recipes/tune.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "engine/engine_args.h"
#include "recipes/recipes.h"

namespace onebit {
namespace {

using nlohmann::json;

const BenchMetric& metric_named(const std::string& name) {
  for (const auto& m : bench_metrics())
    if (name == m.name) return m;
  throw Error("unknown metric \"" + name + "\"");
}

double spread(const std::vector<double>& v) {
  double med = median_of(v);
  if (v.empty() || med == 0) return 0;
  return (*std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end())) / std::fabs(med);
}

std::string slug(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) {
    if (!s.empty() && s.back() != '-') s += '-';
    for (char c : a) {
      if (std::isalnum(static_cast<unsigned char>(c))) s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      else if (!s.empty() && s.back() != '-') s += '-';
    }
  }
  while (!s.empty() && s.back() == '-') s.pop_back();
  return s;
}

std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), v >= 100 ? "%.0f" : v >= 1 ? "%.1f" : "%.3f", v);
  return buf;
}

}  // namespace

TuneVerdict judge(const BenchRecord& r, const std::string& config, const std::string& metric) {
  const BenchMetric& m = metric_named(metric);
  auto base = r.values(r.configs.front().name, metric), cand = r.values(config, metric);
  if (base.empty() || cand.empty()) throw Error("no " + metric + " samples for " + (base.empty() ? r.configs.front().name : config));
  TuneVerdict v;
  v.config = config;
  v.base_median = median_of(base);
  v.median = median_of(cand);
  v.gain = v.base_median == 0 ? 0 : (v.median - v.base_median) / v.base_median * (m.higher_is_better ? 1 : -1);
  v.noise = std::max(spread(base), spread(cand)) / 2;
  v.wins = v.gain > v.noise && v.gain > 0.01;
  return v;
}

json recipe_body(const std::vector<std::string>& args, const std::vector<std::pair<std::string, std::string>>& env) {
  json body = json::object();
  if (!args.empty()) body["args"] = args;
  if (!env.empty()) body["env"] = env_object(env);
  return body;
}

json recipe_entry(const BenchRecord& r, const TuneVerdict& v, const std::string& metric,
                  const std::vector<std::string>& args, const std::vector<std::pair<std::string, std::string>>& env,
                  const DeviceChoice& where) {
  const json& f = r.facts;
  std::string machine = r.machine.value("cpu", "unknown CPU");
  if (r.machine.contains("gpus") && !r.machine["gpus"].empty()) machine = r.machine["gpus"][0].get<std::string>();
  const std::string date = r.finished.substr(0, 10);
  const std::string unit = metric_named(metric).unit;
  json match = {{"device", {where.device}}, {"architecture", {f.value("architecture", "")}}, {"moe", f.value("moe", false)},
                {"hadamard_q4_0", f.value("hadamard_q4_0", false)}, {"drafter", {"none"}}};
  if (where.device == "cuda" && !where.gpu.empty()) match["gpu"] = {where.gpu};  // measured on this GPU only
  std::vector<std::string> words;
  for (const auto& [k, val] : env) words.push_back(k + "=" + val);
  words.insert(words.end(), args.begin(), args.end());
  json entry = {{"id", f.value("architecture", "model") + "-" + where.device + "-" + slug(words)},
                {"match", match},
                {"why", "wins on " + metric + " beyond the run's noise: median " + short_number(v.gain * 100) + "% better, noise " +
                            short_number(v.noise * 100) + "%"},
                {"measured", std::filesystem::path(r.model).filename().string() + ", " + machine + ", " + metric + " " +
                                 short_number(v.base_median) + " -> " + short_number(v.median) + (unit.empty() ? "" : " " + unit) +
                                 ", " + date},
                {"source", "1bit tune, " + std::to_string(r.rounds) + " rounds"}};
  entry.update(recipe_body(args, env));
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
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp);
    out << text;
    if (!out) throw Error(path + ": cannot write");
  }
  std::filesystem::rename(tmp, path);
  return id;
}

}  // namespace onebit
