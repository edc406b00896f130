// What the long-running commands (serve, bench, lemonade) set up before they start threads.
#pragma once

#include <signal.h>

namespace onebit {

// Blocks SIGINT, SIGTERM and SIGHUP in this thread and every thread started after it, so they are
// taken synchronously (sigwait / sigtimedwait on the returned set) instead of interrupting
// whatever thread they land on; ignores SIGPIPE (a vanished peer is an error code, not a death).
sigset_t block_stop_signals();

// Each client connection holds descriptors (two through a proxy): use the hard limit, not the
// soft default of 1024.
void raise_fd_limit();

}  // namespace onebit
