#include "bench/machine.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

namespace onebit {

std::string first_line_with(const std::string& file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return line;
  return "";
}

std::string cpu_model() {
  const std::string line = first_line_with("/proc/cpuinfo", "model name");
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return "";
  const size_t start = line.find_first_not_of(' ', colon + 1);
  return start == std::string::npos ? "" : line.substr(start);
}

unsigned physical_cores(const std::string& cpuinfo) {
  std::ifstream in(cpuinfo);
  std::set<std::pair<std::string, std::string>> cores;
  std::string line, package = "0";
  auto value = [](const std::string& l) { return l.substr(l.find(':') + 1); };
  while (std::getline(in, line)) {
    if (line.rfind("physical id", 0) == 0) package = value(line);
    if (line.rfind("core id", 0) == 0) cores.insert({package, value(line)});
  }
  return static_cast<unsigned>(cores.size());
}

std::vector<std::vector<std::string>> nvidia_smi(const std::string& fields) {
  std::vector<std::vector<std::string>> rows;
  const std::string cmd = "nvidia-smi --query-gpu=" + fields + " --format=csv,noheader,nounits 2>/dev/null";
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[512];
    while (fgets(buf, sizeof(buf), p)) {
      std::vector<std::string> cols;
      std::stringstream s(buf);
      std::string c;
      while (std::getline(s, c, ',')) {
        const size_t a = c.find_first_not_of(" \r\n"), b = c.find_last_not_of(" \r\n");
        cols.push_back(a == std::string::npos ? "" : c.substr(a, b - a + 1));
      }
      if (!cols.empty() && !cols[0].empty()) rows.push_back(cols);
    }
    pclose(p);
  }
  return rows;
}

}  // namespace onebit
