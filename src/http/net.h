// Thin, blocking TCP helpers over POSIX sockets: listening, connecting with a timeout, and writing
// everything. Every socket gets TCP_NODELAY, because the proxy relays small SSE chunks and Nagle's
// delay would show up directly in time-to-first-token.
#pragma once

#include <string>

namespace onebit {

// An owned file descriptor, closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Listens on host:port (port 0 picks a free one). Throws Error naming the address and the cause.
Fd listen_tcp(const std::string& host, int port, int backlog = 512);
// The port a bound socket got.
int bound_port(int fd);
// A port that was free on host a moment ago (bind to 0, read it, close).
int pick_free_port(const std::string& host);
// Connects with a timeout; returns an invalid Fd on failure and sets `error` when given.
Fd connect_tcp(const std::string& host, int port, int timeout_ms, std::string* error = nullptr);
// Turns off Nagle's algorithm on a connected socket.
void set_nodelay(int fd);
// Writes all of `data`, retrying short writes; false when the peer is gone. Never raises SIGPIPE.
bool write_all(int fd, const char* data, size_t size);
inline bool write_all(int fd, const std::string& s) { return write_all(fd, s.data(), s.size()); }
// Waits until fd is readable; false on timeout or error.
bool wait_readable(int fd, int timeout_ms);

}  // namespace onebit
