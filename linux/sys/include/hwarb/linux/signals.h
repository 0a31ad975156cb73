// hwarb/linux/signals.h — a signal read from a file descriptor (signalfd(2)), for a wait that
// must watch other descriptors too: Inferior::wait_or_poll learns of SIGCHLD this way.
//
// Contract:
//  - blocked_signal_fd(signal) blocks `signal` in the calling thread (pthread_sigmask; it stays
//    blocked: only a blocked signal waits for a signalfd to read it) and returns a non-blocking,
//    close-on-exec signalfd for it. EINVAL naming `signal` for a number that is not a signal.
//  - drain_signal_fd(fd) reads every siginfo pending on such a descriptor and returns how many
//    it read (0: none). The kernel's errno naming `fd` (EBADF).
//  - ignore_signal(signal) sets its disposition to SIG_IGN for the whole process (e.g. SIGPIPE for
//    a server whose client may go away mid-write: the write then fails with EPIPE instead).
//    EINVAL naming `signal` for a number that cannot be ignored. Those it turned from SIG_DFL to
//    SIG_IGN are remembered: signals_ignored_here() returns them (bit n-1 for signal n), and
//    spawn_stopped()'s child sets them back to SIG_DFL before its execve, so that a program
//    started keeps the actions it would have had (an ignored SIGPIPE, say, would change how it
//    ends on a closed pipe; gdb and gdbserver restore them too).
// Thread-safety: the signal mask is per thread; the descriptor may be read from any thread.
#pragma once

#include <cstdint>

#include "hwarb/base/error.h"
#include "hwarb/linux/fd.h"

namespace hwarb::native {

Result<Fd> blocked_signal_fd(int signal);
Result<int> drain_signal_fd(int fd);
Result<void> ignore_signal(int signal);
std::uint64_t signals_ignored_here();

}  // namespace hwarb::native
