// `1bit bench` on the command line, and what `1bit tune` shares with it: the options that say how
// a configuration is measured, and stopping every serve on Ctrl-C.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "base/cli.h"
#include "base/file_lock.h"
#include "bench/bench.h"

namespace onebit {

int run_bench_command(const std::vector<std::string>& args);
std::string bench_usage();

// How each configuration is measured, where its logs go, what the run writes.
struct MeasureCli {
  BenchOptions bench;
  std::string lock_file, json_out, html_out;
  bool prompt_chars_set = false;
};
// Their options (-m first); `defaults` names the defaults the help shows.
std::vector<CliOption> measure_options(MeasureCli& c, const BenchOptions& defaults);
// Checks them and fills in the rest: -m given, the log directory made, the 1bit binary found.
void finish_measure_options(MeasureCli& c);
// Takes the --lock (waiting with a line on stderr when another run holds it); nullptr without one.
std::unique_ptr<FileLock> take_run_lock(const MeasureCli& c, const std::string& who);

// On SIGINT/SIGTERM: sets `stop` and asks every serve this process started to stop, which ends
// the request in flight; the main thread then unwinds and removes what is left.
void stop_on_signals(std::atomic<bool>& stop);

// Writes `text` to `path`; throws Error when it cannot.
void write_text(const std::string& path, const std::string& text);

}  // namespace onebit
