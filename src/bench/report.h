// What `1bit bench` shows of a record: a text table (best / median per metric, non-baseline
// rows with the change of the median against the baseline's) and a self-contained HTML page
// with one SVG chart per metric that opens offline.
#pragma once

#include <string>
#include <vector>

#include "bench/bench.h"

namespace onebit {

std::string bench_table(const BenchRecord& record);
std::string bench_html(const BenchRecord& record);
// The page's charts alone (one SVG a metric): `configs` in order, the first as the base; empty:
// every configuration of the record.
std::string bench_charts(const BenchRecord& record, std::vector<std::string> configs);
// `s` with & < > " as entities.
std::string escape_html(const std::string& s);

// "+4.2%" for the change from `base` to `value`; "+0.0%" when equal.
std::string percent_change(double base, double value);

}  // namespace onebit
