#include "engine/port_owner.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "http/conn.h"

namespace onebit {
namespace {

constexpr const char* kListenState = "0A";  // TCP_LISTEN in /proc/net/tcp's "st" column

// Each line after the header: sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...
void collect(const char* table, int port, std::set<unsigned long>& inodes) {
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string sl, local, remote, state, queues, timer, retransmits, uid, timeout;
    unsigned long inode = 0;
    if (!(fields >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode))
      continue;
    const auto colon = local.rfind(':');
    if (colon == std::string::npos || state != kListenState || inode == 0) continue;
    if (std::stoi(local.substr(colon + 1), nullptr, 16) == port) inodes.insert(inode);
  }
}

}  // namespace

std::set<unsigned long> listening_socket_inodes(int port) {
  std::set<unsigned long> inodes;
  collect("/proc/net/tcp", port, inodes);
  collect("/proc/net/tcp6", port, inodes);
  return inodes;
}

bool process_owns_port(pid_t pid, int port) {
  std::set<unsigned long> inodes = listening_socket_inodes(port);
  if (inodes.empty()) return true;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return false;
  while (dirent* ent = readdir(d)) {
    char target[64];
    const std::string link = dir + "/" + ent->d_name;
    const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    unsigned long inode = 0;
    if (std::sscanf(target, "socket:[%lu]", &inode) == 1) inodes.erase(inode);
  }
  closedir(d);
  return inodes.empty();
}

bool port_has_listener(int port) { return !listening_socket_inodes(port).empty(); }

bool child_ready_on(pid_t pid, int port) {
  return http_fetch("127.0.0.1", port, "GET", "/health", "", {}, 2000).status == 200 && process_owns_port(pid, port);
}

}  // namespace onebit
