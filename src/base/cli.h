// Command-line parsing for 1bit's subcommands: each command declares a table of options, and the
// same table prints its help, so the two cannot disagree.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace onebit {

struct CliOption {
  std::vector<std::string> names;  // "-m", "--model"
  std::string value;               // placeholder such as "FILE"; empty for a plain flag
  std::string help;
  std::function<void(const std::string&)> set;  // receives the value ("" for a flag)
  std::vector<std::string> optional_values;     // a flag that may take one of these next ("-fa on")
  // A flag that may take the next word when this says it is one ("--mtp head.gguf"); shown in
  // the help as [optional_value].
  std::function<bool(const std::string&)> takes_next;
  std::string optional_value;
};

struct CliParse {
  std::vector<std::string> positional;
  std::vector<std::string> foreign;       // options `foreign_values` knew, with their values
  std::vector<std::string> after_dashes;  // everything after a lone "--"
  bool help = false;                       // -h or --help was given
};

// How many values an option outside the table takes (another program's, passed along), or -1
// when it is unknown there too.
using ForeignValues = std::function<int(const std::string& name)>;

// Parses `args` (after the command name). "--name=value" works for long names. Throws Error
// naming the option for unknown options and missing or malformed values. An option the table
// lacks goes to `foreign` with its values when `foreign_values` knows it.
CliParse parse_cli(const std::vector<CliOption>& table, const std::vector<std::string>& args,
                   const ForeignValues& foreign_values = nullptr);

// The option list for --help, one option per entry, help wrapped under the names.
std::string format_options(const std::vector<CliOption>& table);

// Writes `line` and a newline to stderr in one write, so that a program watching the output (a
// test, a supervisor reading the port) never sees a line half written.
void print_line(const std::string& line);

// Value parsers that throw Error("<option>: ...") when the value is not a number in range.
int64_t parse_int_option(const std::string& option, const std::string& value, int64_t min, int64_t max);
double parse_double_option(const std::string& option, const std::string& value, double min, double max);

}  // namespace onebit
