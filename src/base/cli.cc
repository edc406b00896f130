#include "base/cli.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "base/error.h"

namespace onebit {

void print_line(const std::string& line) {
  const std::string whole = line + "\n";
  for (size_t done = 0; done < whole.size();) {
    const ssize_t n = ::write(2, whole.data() + done, whole.size() - done);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;
    }
    done += static_cast<size_t>(n);
  }
}
namespace {

const CliOption* lookup(const std::vector<CliOption>& table, const std::string& name) {
  for (const auto& o : table)
    if (std::find(o.names.begin(), o.names.end(), name) != o.names.end()) return &o;
  return nullptr;
}

}  // namespace

CliParse parse_cli(const std::vector<CliOption>& table, const std::vector<std::string>& args,
                   const ForeignValues& foreign_values) {
  CliParse out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      out.after_dashes.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (a == "-h" || a == "--help") {
      out.help = true;
      continue;
    }
    if (a.size() < 2 || a[0] != '-') {
      out.positional.push_back(a);
      continue;
    }
    std::string name = a, inline_value;
    bool has_inline = false;
    if (a.rfind("--", 0) == 0) {
      if (size_t eq = a.find('='); eq != std::string::npos) {
        name = a.substr(0, eq);
        inline_value = a.substr(eq + 1);
        has_inline = true;
      }
    }
    const CliOption* opt = lookup(table, name);
    if (opt == nullptr) {
      const int values = foreign_values ? foreign_values(name) : -1;
      if (values < 0) throw Error("unknown option " + name);
      out.foreign.push_back(a);
      const int wanted = has_inline ? values - 1 : values;
      for (int v = 0; v < wanted; ++v) {
        if (i + 1 >= args.size() || args[i + 1] == "--") throw Error(name + " needs a value");
        out.foreign.push_back(args[++i]);
      }
      continue;
    }
    if (opt->value.empty()) {
      if (!opt->optional_values.empty() || opt->takes_next) {
        if (has_inline) {
          opt->set(inline_value);
        } else if (i + 1 < args.size() &&
                   (opt->takes_next ? opt->takes_next(args[i + 1])
                                    : std::find(opt->optional_values.begin(), opt->optional_values.end(), args[i + 1]) !=
                                          opt->optional_values.end())) {
          opt->set(args[++i]);
        } else {
          opt->set("");
        }
        continue;
      }
      if (has_inline) throw Error(name + " takes no value");
      opt->set("");
      continue;
    }
    if (has_inline) {
      opt->set(inline_value);
    } else {
      if (i + 1 >= args.size()) throw Error(name + " needs a value (" + opt->value + ")");
      opt->set(args[++i]);
    }
  }
  return out;
}

std::string format_options(const std::vector<CliOption>& table) {
  std::string out;
  for (const auto& o : table) {
    std::string head = "  ";
    for (size_t i = 0; i < o.names.size(); ++i) head += (i ? ", " : "") + o.names[i];
    if (!o.value.empty()) head += " " + o.value;
    if (!o.optional_value.empty()) head += " [" + o.optional_value + "]";
    if (!o.optional_values.empty()) head += " [" + [&] {
      std::string s;
      for (const auto& v : o.optional_values) s += (s.empty() ? "" : "|") + v;
      return s;
    }() + "]";
    constexpr size_t kColumn = 30;
    if (head.size() + 2 > kColumn) out += head + "\n" + std::string(kColumn, ' ');
    else out += head + std::string(kColumn - head.size(), ' ');
    for (char c : o.help) {
      out += c;
      if (c == '\n') out += std::string(kColumn, ' ');
    }
    out += "\n";
  }
  return out;
}

int64_t parse_int_option(const std::string& option, const std::string& value, int64_t min, int64_t max) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0)
    throw Error(option + ": \"" + value + "\" is not a whole number");
  if (v < min || v > max)
    throw Error(option + ": " + value + " is out of range [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  return v;
}

double parse_double_option(const std::string& option, const std::string& value, double min, double max) {
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno != 0 || !std::isfinite(v))
    throw Error(option + ": \"" + value + "\" is not a number");
  if (v < min || v > max)
    throw Error(option + ": " + value + " is out of range [" + std::to_string(min) + ", " + std::to_string(max) + "]");
  return v;
}

}  // namespace onebit
