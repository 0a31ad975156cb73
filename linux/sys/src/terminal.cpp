#include "hwarb/linux/terminal.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "hwarb/linux/signals.h"

namespace hwarb::native {
namespace {

// The terminal give_terminal() took the foreground of, and the group that had it (-1: none).
int g_terminal_fd = -1;
pid_t g_terminal_owner = -1;
pid_t g_terminal_given = -1;  // the group give_terminal() gave it to last

void give_terminal_back() {
  if (g_terminal_fd >= 0) ::tcsetpgrp(g_terminal_fd, g_terminal_owner);
}

volatile sig_atomic_t g_interrupted = 0;
volatile sig_atomic_t g_interrupts = 0;

void on_interrupt(int) {
  g_interrupted = 1;
  g_interrupts = g_interrupts + 1;
}

}  // namespace

bool is_terminal(int fd) {
  return ::isatty(fd) == 1;
}

bool give_terminal(int fd, int pgrp) {
  if (::isatty(fd) != 1) return false;
  // Ours to give: the foreground is the caller's group, or the one it gave it to before (a
  // program that ended since: the next one started takes it over).
  const pid_t now = ::tcgetpgrp(fd);
  if (now != ::getpgrp() && !(fd == g_terminal_fd && now == g_terminal_given)) return false;
  ignore_error(ignore_signal(SIGTTOU), "SIGTTOU is a signal that can be ignored");
  ignore_error(ignore_signal(SIGTTIN), "SIGTTIN is a signal that can be ignored");
  if (::tcsetpgrp(fd, pgrp) != 0) return false;
  g_terminal_given = pgrp;
  if (g_terminal_fd < 0) {
    g_terminal_fd = fd;
    g_terminal_owner = ::getpgrp();
    std::atexit(give_terminal_back);
  }
  return true;
}

void install_interrupt_flag() {
  struct sigaction action {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: waitpid returns EINTR
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGHUP, &action, nullptr);
}

bool interrupt_requested() {
  return g_interrupted != 0;
}

unsigned interrupt_count() {
  return static_cast<unsigned>(g_interrupts);
}

}  // namespace hwarb::native
