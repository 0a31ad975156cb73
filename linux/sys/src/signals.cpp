#include "hwarb/linux/signals.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>

#include "sys_error.h"

namespace hwarb::native {

Result<Fd> blocked_signal_fd(int signal) {
  const std::string what = "signal " + std::to_string(signal);
  sigset_t set;
  sigemptyset(&set);
  if (sigaddset(&set, signal) != 0) {
    return detail::sys_fail<Fd>(errno, "signal", "sigaddset(" + what + ")");
  }
  // pthread_sigmask returns its error instead of setting errno.
  if (const int err = ::pthread_sigmask(SIG_BLOCK, &set, nullptr); err != 0) {
    return detail::sys_fail<Fd>(err, "signal", "pthread_sigmask(SIG_BLOCK, " + what + ")");
  }
  const int fd = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) return detail::sys_fail<Fd>(errno, "signal", "signalfd(" + what + ")");
  return Fd(fd);
}

Result<int> drain_signal_fd(int fd) {
  int count = 0;
  for (;;) {
    signalfd_siginfo info;
    const ssize_t n = ::read(fd, &info, sizeof info);
    if (n == static_cast<ssize_t>(sizeof info)) {
      ++count;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) {
      return detail::sys_fail<int>(errno, "fd", "read of signalfd " + std::to_string(fd));
    }
    return count;
  }
}

namespace {
std::atomic<std::uint64_t> g_ignored_here{0};  // see signals_ignored_here()
}  // namespace

Result<void> ignore_signal(int signal) {
  struct sigaction action {};
  action.sa_handler = SIG_IGN;
  sigemptyset(&action.sa_mask);
  struct sigaction before {};
  if (::sigaction(signal, &action, &before) != 0) {
    return detail::sys_fail<void>(errno, "signal",
                                  "sigaction(SIG_IGN) of signal " + std::to_string(signal));
  }
  if (before.sa_handler == SIG_DFL && signal >= 1 && signal <= 64) {
    g_ignored_here.fetch_or(std::uint64_t{1} << (signal - 1));
  }
  return {};
}

std::uint64_t signals_ignored_here() {
  return g_ignored_here.load();
}

}  // namespace hwarb::native
