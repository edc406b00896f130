#include "http/loopback_guard.h"

#include <algorithm>
#include <cctype>

namespace onebit {
namespace {

// Host and port of "host[:port]" or "[v6]:port"; the port is "" when absent.
std::pair<std::string, std::string> split_host_port(std::string_view s) {
  if (!s.empty() && s.front() == '[') {
    const size_t close = s.find(']');
    if (close == std::string_view::npos) return {std::string(s), ""};
    std::string_view rest = s.substr(close + 1);
    return {std::string(s.substr(0, close + 1)), rest.size() > 1 && rest[0] == ':' ? std::string(rest.substr(1)) : ""};
  }
  const size_t colon = s.rfind(':');
  if (colon == std::string_view::npos) return {std::string(s), ""};
  return {std::string(s.substr(0, colon)), std::string(s.substr(colon + 1))};
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool is_ipv4_loopback(const std::string& h) {
  int parts = 0, value = -1;
  for (size_t i = 0; i <= h.size(); ++i) {
    if (i == h.size() || h[i] == '.') {
      if (value < 0 || value > 255) return false;
      if (parts == 0 && value != 127) return false;
      ++parts;
      value = -1;
    } else if (std::isdigit(static_cast<unsigned char>(h[i]))) {
      value = (value < 0 ? 0 : value * 10) + (h[i] - '0');
      if (value > 255) return false;
    } else {
      return false;
    }
  }
  return parts == 4;
}

}  // namespace

bool is_loopback_host(std::string_view host) {
  const std::string h = lower(split_host_port(host).first);
  if (h == "localhost" || h == "[::1]" || is_ipv4_loopback(h)) return true;
  constexpr std::string_view kSuffix = ".localhost";
  return h.size() > kSuffix.size() && h.compare(h.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0;
}

bool is_loopback_address(const std::string& listen_host) {
  const bool bare_v6 = listen_host.find(':') != std::string::npos && listen_host.front() != '[';
  return is_loopback_host(bare_v6 ? "[" + listen_host + "]" : listen_host);
}

std::string loopback_refusal(const RequestHead& head, const std::vector<std::string>& allowed_origins) {
  std::string host;
  int hosts = 0;
  for (const auto& [name, value] : head.headers)
    if (lower(name) == "host") {
      host = value;
      ++hosts;
    }
  if (hosts > 1) return "more than one Host header";
  if (hosts == 1 && !is_loopback_host(host))
    return "Host \"" + host + "\" is not a loopback name: this server answers only programs on this machine";
  const std::string* origin = find_header(head.headers, "Origin");
  if (origin == nullptr) return "";
  if (std::find(allowed_origins.begin(), allowed_origins.end(), *origin) != allowed_origins.end()) return "";
  const std::string o = lower(*origin);
  const size_t scheme = o.find("://");
  if (scheme != std::string::npos && (o.compare(0, scheme, "http") == 0 || o.compare(0, scheme, "https") == 0)) {
    const std::string rest = o.substr(scheme + 3);
    if (rest.find('/') == std::string::npos && is_loopback_host(rest) &&
        split_host_port(rest).second == split_host_port(host).second)
      return "";
  }
  return "Origin \"" + *origin + "\" is not this server's own (allow it with --allow-origin " + *origin + ")";
}

}  // namespace onebit
