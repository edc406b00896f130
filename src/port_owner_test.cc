#include "port_owner.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net.h"

namespace onebit {
namespace {

TEST(PortOwner, OwnListeningSocketIsFoundAndGoneAfterClose) {
  int port = 0;
  {
    Fd fd = listen_tcp("127.0.0.1", 0, 1);
    port = bound_port(fd.get());
    EXPECT_TRUE(port_has_listener(port));
    EXPECT_EQ(listening_socket_inodes(port).size(), 1u);
    EXPECT_TRUE(process_listens_on(getpid(), port));
  }
  EXPECT_FALSE(port_has_listener(port));
  EXPECT_FALSE(process_listens_on(getpid(), port));
}

TEST(PortOwner, AnotherProcessDoesNotOwnOurPort) {
  Fd fd = listen_tcp("127.0.0.1", 0, 1);
  const int port = bound_port(fd.get());
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Drop the inherited socket, then wait to be killed.
    fd.reset();
    pause();
    _exit(0);
  }
  // The child may still hold the inherited descriptor for a moment; wait until it has dropped it.
  bool released = false;
  for (int i = 0; i < 200 && !released; ++i) {
    released = !process_listens_on(child, port);
    if (!released) usleep(10000);
  }
  EXPECT_TRUE(released);
  EXPECT_TRUE(process_listens_on(getpid(), port));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

TEST(PortOwner, ANonexistentProcessOwnsNothing) {
  Fd fd = listen_tcp("127.0.0.1", 0, 1);
  EXPECT_FALSE(process_listens_on(999999999, bound_port(fd.get())));
}

TEST(PortOwner, AnUnusedPortHasNoListener) {
  const int port = pick_free_port("127.0.0.1");
  EXPECT_FALSE(port_has_listener(port));
}

}  // namespace
}  // namespace onebit
