#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace onebit {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

int digits_for(const BenchMetric& m) {
  const std::string n = m.name;
  return n == "acceptance" ? 3 : n == "tokens-per-step" || n == "step-time" ? 2 : 1;
}

}  // namespace

std::string escape_html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

// The metrics that have samples in this record.
std::vector<BenchMetric> measured(const BenchRecord& r) {
  std::vector<BenchMetric> out;
  for (const auto& m : bench_metrics())
    for (const auto& c : r.configs)
      if (!r.values(c.name, m.name).empty()) {
        out.push_back(m);
        break;
      }
  return out;
}

}  // namespace

std::string percent_change(double base, double value) {
  if (base == 0) return "n/a";
  double p = (value - base) / base * 100.0;
  if (std::fabs(p) < 0.05) p = 0.0;  // no "-0.0%"
  return (p >= 0 ? "+" : "") + fixed(p, 1) + "%";
}

std::string bench_table(const BenchRecord& r) {
  const auto metrics = measured(r);
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> header = {"config"};
  for (const auto& m : metrics) header.push_back(std::string(m.name) + (*m.unit ? std::string(" ") + m.unit : "") + " best / median");
  rows.push_back(header);
  const std::string& base = r.configs.front().name;
  for (const auto& c : r.configs) {
    std::vector<std::string> row = {c.name};
    for (const auto& m : metrics) {
      auto v = r.values(c.name, m.name);
      if (v.empty()) {
        row.push_back("-");
        continue;
      }
      const int d = digits_for(m);
      std::string cell = fixed(best_of(v, m.higher_is_better), d) + " / " + fixed(median_of(v), d);
      auto bv = r.values(base, m.name);
      if (c.name != base && !bv.empty()) cell += " (" + percent_change(median_of(bv), median_of(v)) + ")";
      row.push_back(cell);
    }
    rows.push_back(row);
  }
  std::vector<size_t> width(header.size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  std::string out;
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) {
      out += row[i];
      if (i + 1 < row.size()) out += std::string(width[i] - row[i].size() + 3, ' ');
    }
    out += "\n";
  }
  for (const auto& sc : r.step_costs())
    out += "step cost of " + sc.config + ": " + fixed(sc.cost(), 2) + " (a verification step " + fixed(sc.step_ms, 2) +
           " ms, a plain decode step " + fixed(sc.plain_ms, 2) + " ms in " + sc.plain + ")\n";
  // Under the table for the configurations that draft, whose answers must be the baseline's; in
  // the record for every configuration.
  for (const auto& sa : r.same_answers()) {
    if (!r.drafted(sa.config)) continue;
    out += "greedy answers of " + sa.config + ": " + std::to_string(sa.same) + " of " + std::to_string(sa.of) +
           " the same as " + sa.baseline + "'s\n";
  }
  return out;
}

std::string bench_charts(const BenchRecord& r, std::vector<std::string> configs) {
  if (configs.empty())
    for (const auto& c : r.configs) configs.push_back(c.name);
  std::ostringstream h;
  // One horizontal bar chart per metric: for each configuration a "best" and a "median" bar.
  const int bar = 16, gap = 10, label_w = 160, plot_w = 420;
  for (const auto& m : measured(r)) {
    double top = 0;
    for (const auto& c : configs)
      for (double v : r.values(c, m.name)) top = std::max(top, v);
    if (top <= 0) top = 1;
    const int height = static_cast<int>(configs.size()) * (2 * bar + gap) + 30;
    h << "<div class=\"chart\"><h3>" << m.name << (*m.unit ? std::string(" (") + m.unit + ")" : "")
      << (m.higher_is_better ? ", higher is better" : ", lower is better") << "</h3>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << label_w + plot_w + 120 << "\" height=\"" << height
      << "\" role=\"img\">\n";
    int y = 10;
    for (size_t i = 0; i < configs.size(); ++i) {
      auto v = r.values(configs[i], m.name);
      h << "<text x=\"0\" y=\"" << y + bar << "\" font-size=\"13\">" << escape_html(configs[i]) << (i == 0 ? " (base)" : "")
        << "</text>\n";
      const std::pair<const char*, double> bars[] = {{"best", best_of(v, m.higher_is_better)}, {"median", median_of(v)}};
      for (int b = 0; b < 2; ++b) {
        const double value = v.empty() ? 0 : bars[b].second;
        const int w = static_cast<int>(plot_w * value / top);
        h << "<rect x=\"" << label_w << "\" y=\"" << y << "\" width=\"" << w << "\" height=\"" << bar - 2
          << "\" fill=\"" << (i == 0 ? (b == 0 ? "#7a7a7a" : "#b0b0b0") : (b == 0 ? "#1f6fb2" : "#7fb0dc"))
          << "\"><title>" << bars[b].first << " " << fixed(value, digits_for(m)) << "</title></rect>\n"
          << "<text x=\"" << label_w + w + 6 << "\" y=\"" << y + bar - 4 << "\" font-size=\"11\">" << bars[b].first
          << " " << fixed(value, digits_for(m)) << "</text>\n";
        y += bar;
      }
      y += gap;
    }
    h << "</svg></div>\n";
  }
  return h.str();
}

std::string bench_html(const BenchRecord& r) {
  std::ostringstream h;
  h << "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>1bit bench: "
    << escape_html(r.model) << "</title>\n<style>body{font:14px sans-serif;margin:2em;color:#222}"
    << "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}"
    << ".chart{margin:1.5em 0}code{background:#f4f4f4}pre{overflow-x:auto}</style></head><body>\n";
  auto rows = [&](const nlohmann::json& j) {
    for (auto it = j.begin(); it != j.end(); ++it)
      h << "<tr><th>" << escape_html(it.key()) << "</th><td>"
        << escape_html(it->is_string() ? it->get<std::string>() : it->dump()) << "</td></tr>\n";
  };
  h << "<h1>1bit bench</h1>\n<p>Model <code>" << escape_html(r.model) << "</code>, " << r.rounds << " rounds, "
    << escape_html(r.started) << " to " << escape_html(r.finished) << ".</p>\n<table>\n";
  rows(r.facts);
  rows(r.machine);
  h << "</table>\n<h2>Configurations</h2>\n<table><tr><th>name</th><th>serve arguments</th></tr>\n";
  for (size_t i = 0; i < r.configs.size(); ++i) {
    std::string args;
    for (const auto& a : r.configs[i].args) args += (args.empty() ? "" : " ") + a;
    h << "<tr><td>" << escape_html(r.configs[i].name) << (i == 0 ? " (baseline)" : "") << "</td><td><code>"
      << escape_html(args) << "</code></td></tr>\n";
  }
  h << "</table>\n<h2>Results</h2>\n<pre>" << escape_html(bench_table(r)) << "</pre>\n";

  h << bench_charts(r, {});
  h << "<h2>Record</h2>\n<p>Every sample is in the JSON record (<code>--json</code>).</p>\n</body></html>\n";
  return h.str();
}

}  // namespace onebit
