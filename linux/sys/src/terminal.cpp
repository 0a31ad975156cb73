#include "hwarb/linux/terminal.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

namespace hwarb::native {
namespace {

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
