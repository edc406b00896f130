#include "engine/engine_key.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace onebit {

std::string new_engine_key() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(std::string("cannot draw a random engine key: ") + std::strerror(errno));
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string key;
  for (unsigned char b : bytes) {
    key += kHex[b >> 4];
    key += kHex[b & 15];
  }
  return key;
}

std::vector<std::pair<std::string, std::string>> with_engine_key(std::vector<std::pair<std::string, std::string>> env,
                                                                 const std::string& key) {
  env.push_back({kEngineKeyVariable, key});
  return env;
}

}  // namespace onebit
