// Who holds a listening TCP port, read from Linux's /proc. serve and lemonade hand each engine a
// port that was free a moment earlier; another program (or another 1bit) can take it first, and a
// /health that answers 200 there is then a stranger's engine. Asking whether the answering socket
// belongs to our own child closes that hole.
#pragma once

#include <sys/types.h>

#include <set>

namespace onebit {

// Inodes of the sockets listening on TCP `port` (IPv4 and IPv6), from /proc/net/tcp{,6}.
std::set<unsigned long> listening_socket_inodes(int port);
// Whether process `pid` is the one listening on `port`: it holds every socket listening there
// (with SO_REUSEPORT another program could share the port and take some of its connections).
// True when /proc shows no listener on the port at all (where /proc/net is empty or missing it
// cannot tell, and a health check's answer is then trusted as before); false for a process that
// does not exist or whose descriptors cannot be read.
bool process_owns_port(pid_t pid, int port);
// Whether some process listens on `port` (on any local address).
bool port_has_listener(int port);

// Whether child `pid` is ready on `port`: its /health answers 200 and it owns the port, so the
// answer is not another program's.
bool child_ready_on(pid_t pid, int port);

}  // namespace onebit
