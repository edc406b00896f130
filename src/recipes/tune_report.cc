#include "recipes/tune_report.h"

#include <cstdio>
#include <sstream>

#include "bench/report.h"

namespace onebit {
namespace {

using nlohmann::json;

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.0f s", s);
  return buf;
}

json comparison_json(const Comparison& c) {
  json metrics = json::array();
  for (const auto& m : c.metrics)
    metrics.push_back({{"metric", m.metric}, {"base_median", m.base_median}, {"median", m.median}, {"gain", m.gain},
                       {"noise", m.noise}, {"weight", m.weight}, {"counts", m.counts}});
  return {{"goal_gain", c.gain}, {"goal_noise", c.noise}, {"metrics", metrics}};
}

std::string heading(const TuneRun& run) {
  std::string s = "goal " + std::string(goal_name(run.goal)) + ", " + seconds(run.elapsed_s) + " of a " +
                  seconds(run.budget_s) + " budget";
  if (run.result->failure.empty() && run.result->budget_spent) s += " (spent: the search ended early)";
  return s;
}

}  // namespace

std::string tune_text(const TuneRun& run) {
  std::string out = "1bit tune: " + heading(run) + "\n";
  for (const auto& k : run.result->knobs) {
    out += "  " + k.knob + ": " + k.outcome + "\n";
    for (const auto& c : k.candidates) {
      out += "    " + c.value.label() + ": " + c.decision;
      if (c.rounds > 0 && !c.comparison.metrics.empty())
        out += " (" + std::to_string(c.rounds) + (c.rounds == 1 ? " round; " : " rounds; ") + c.comparison.summary() + ")";
      out += "\n";
    }
  }
  for (const auto& s : run.skipped) out += "  skipped " + s + "\n";
  if (!run.result->failure.empty()) out += "  stopped: " + run.result->failure + "\n";
  out += "  best: " + (run.result->best.empty() ? std::string("the current launch") : run.result->best.label()) + "\n";
  return out;
}

json tune_json(const TuneRun& run) {
  json j = run.record->to_json();
  json knobs = json::array();
  for (const auto& k : run.result->knobs) {
    json cands = json::array();
    for (const auto& c : k.candidates)
      cands.push_back({{"value", c.value.label()}, {"launch", c.launch.label()}, {"config", c.config}, {"rounds", c.rounds},
                       {"decision", c.decision}, {"comparison", comparison_json(c.comparison)}});
    knobs.push_back({{"knob", k.knob}, {"what", k.what}, {"base", k.base.label()}, {"base_config", k.base_config},
                     {"rounds", k.rounds}, {"candidates", cands}, {"outcome", k.outcome},
                     {"winner", k.winner < 0 ? json(nullptr) : json(k.candidates[k.winner].value.label())}});
  }
  j["tune"] = {{"goal", goal_name(run.goal)}, {"budget_s", run.budget_s}, {"elapsed_s", run.elapsed_s},
               {"launch", run.launch}, {"skipped", run.skipped}, {"knobs", knobs},
               {"best", run.result->best.label()}, {"stopped_early", run.result->budget_spent},
               {"failure", run.result->failure}, {"recipes", run.recipes}, {"written_to", run.written_to}};
  return j;
}

std::string tune_html(const TuneRun& run) {
  const BenchRecord& r = *run.record;
  std::ostringstream h;
  h << "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>1bit tune: " << escape_html(r.model)
    << "</title>\n<style>body{font:14px sans-serif;margin:2em;color:#222}"
    << "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}"
    << ".chart{margin:1.5em 0}code{background:#f4f4f4}.won{background:#e6f4e6}</style></head><body>\n"
    << "<h1>1bit tune</h1>\n<p>Model <code>" << escape_html(r.model) << "</code>, launch <code>1bit serve "
    << escape_html(run.launch) << "</code>, " << escape_html(heading(run)) << ", " << escape_html(r.started) << " to "
    << escape_html(r.finished) << ".</p>\n";
  h << "<p>Best: <code>" << escape_html(run.result->best.empty() ? "the current launch" : run.result->best.label())
    << "</code>";
  if (!run.recipes.empty())
    h << "; " << run.recipes.size() << " recipe" << (run.recipes.size() == 1 ? "" : "s")
      << (run.written_to.empty() ? " printed (not saved)" : " written to <code>" + escape_html(run.written_to) + "</code>");
  h << ".</p>\n";
  if (!run.result->failure.empty()) h << "<p>Stopped: " << escape_html(run.result->failure) << "</p>\n";
  h << "<h2>Search path</h2>\n<table><tr><th>knob</th><th>candidate</th><th>rounds</th><th>goal</th><th>metrics</th>"
       "<th>decision</th></tr>\n";
  for (const auto& k : run.result->knobs) {
    h << "<tr><th rowspan=\"" << k.candidates.size() + 1 << "\">" << escape_html(k.knob) << "<br><small>"
      << escape_html(k.what) << "</small></th><td colspan=\"5\">base <code>"
      << escape_html(k.base.empty() ? "the current launch" : k.base.label()) << "</code>: " << escape_html(k.outcome)
      << "</td></tr>\n";
    for (size_t i = 0; i < k.candidates.size(); ++i) {
      const auto& c = k.candidates[i];
      std::string metrics;
      for (const auto& m : c.comparison.metrics) metrics += (metrics.empty() ? "" : ", ") + m.moved();
      h << "<tr" << (static_cast<int>(i) == k.winner ? " class=\"won\"" : "") << "><td><code>" << escape_html(c.value.label())
        << "</code></td><td>" << c.rounds << "</td><td>"
        << (c.rounds ? signed_percent(c.comparison.gain) + " &plusmn; " + signed_percent(c.comparison.noise).substr(1) : "")
        << "</td><td>" << escape_html(metrics) << "</td><td>" << escape_html(c.decision) << "</td></tr>\n";
    }
  }
  h << "</table>\n";
  for (const auto& s : run.skipped) h << "<p>Skipped " << escape_html(s) << "</p>\n";
  for (const auto& k : run.result->knobs) {
    std::vector<std::string> configs = {k.base_config};
    for (const auto& c : k.candidates)
      if (c.rounds > 0) configs.push_back(c.config);
    if (configs.size() < 2) continue;
    h << "<h2>" << escape_html(k.knob) << "</h2>\n" << bench_charts(r, configs);
  }
  if (!run.recipes.empty()) {
    h << "<h2>Recipes</h2>\n";
    for (const auto& e : run.recipes)
      h << "<pre>" << escape_html(e.dump(2, ' ', false, json::error_handler_t::replace)) << "</pre>\n";
  }
  h << "<p>Every sample is in the JSON record (<code>--json</code>).</p>\n</body></html>\n";
  return h.str();
}

}  // namespace onebit
