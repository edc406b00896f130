#include "engine/port_owner.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "http/net.h"

namespace onebit {
namespace {

// A listening socket on 127.0.0.1:port with SO_REUSEPORT (port 0: any).
Fd listen_shared(int port) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(::listen(fd.get(), 1), 0);
  return fd;
}

// A child that holds `keep` (or nothing) until killed; returns once it has dropped the rest.
pid_t child_holding(Fd* keep, int drop_fd) {
  int ready[2];
  EXPECT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    if (drop_fd >= 0) close(drop_fd);
    (void)keep;
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  char c;
  (void)!read(ready[0], &c, 1);
  close(ready[0]);
  close(ready[1]);
  return pid;
}

void end(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(PortOwner, OwnListeningSocket) {
  int port = 0;
  {
    Fd fd = listen_tcp("127.0.0.1", 0, 1);
    port = bound_port(fd.get());
    EXPECT_TRUE(port_has_listener(port));
    EXPECT_EQ(listening_socket_inodes(port).size(), 1u);
    EXPECT_TRUE(process_owns_port(getpid(), port));
  }
  EXPECT_FALSE(port_has_listener(port));
  // Nobody listens: /proc cannot name an owner, and the caller's health check decides.
  EXPECT_TRUE(process_owns_port(getpid(), port));
}

TEST(PortOwner, AnotherProcessDoesNotOwnOurPort) {
  Fd fd = listen_tcp("127.0.0.1", 0, 1);
  const int port = bound_port(fd.get());
  const pid_t child = child_holding(nullptr, fd.get());
  EXPECT_FALSE(process_owns_port(child, port));
  EXPECT_TRUE(process_owns_port(getpid(), port));
  end(child);
}

// With SO_REUSEPORT two processes can listen on one port; neither owns it.
TEST(PortOwner, ASharedPortBelongsToNobody) {
  Fd ours = listen_shared(0);
  const int port = bound_port(ours.get());
  Fd theirs = listen_shared(port);
  const pid_t child = child_holding(&theirs, ours.get());
  theirs.reset();  // the child keeps its copy
  EXPECT_EQ(listening_socket_inodes(port).size(), 2u);
  EXPECT_FALSE(process_owns_port(getpid(), port));
  EXPECT_FALSE(process_owns_port(child, port));
  end(child);
  EXPECT_TRUE(process_owns_port(getpid(), port));
}

TEST(PortOwner, ANonexistentProcessOwnsNothing) {
  Fd fd = listen_tcp("127.0.0.1", 0, 1);
  EXPECT_FALSE(process_owns_port(999999999, bound_port(fd.get())));
}

}  // namespace
}  // namespace onebit
