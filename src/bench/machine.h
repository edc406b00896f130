// Facts about the machine this runs on, as bench records and lemonade's /system-info report them.
// Nothing here fails: a fact that cannot be read is empty.
#pragma once

#include <string>
#include <vector>

namespace onebit {

// The first line of `file` that starts with `key`, or "" (no such line, or no such file).
std::string first_line_with(const std::string& file, const std::string& key);

// The CPU's model name from /proc/cpuinfo, or "".
std::string cpu_model();

// The CPU cores listed in a /proc/cpuinfo-style file: distinct (physical id, core id) pairs, so
// hyper-threads count once; 0 when it lists none.
unsigned physical_cores(const std::string& cpuinfo = "/proc/cpuinfo");

// nvidia-smi's rows for a --query-gpu list of fields (csv, no header, no units), each cell
// trimmed; none when there is no NVIDIA driver.
std::vector<std::vector<std::string>> nvidia_smi(const std::string& fields);

}  // namespace onebit
