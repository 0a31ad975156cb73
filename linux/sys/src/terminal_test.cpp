#include "hwarb/linux/terminal.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>

namespace hwarb::native {
namespace {

// A child in a process group of its own that waits to be killed (at the latest when the leader
// below ends: kill_started).
pid_t g_started[8];
int g_count = 0;
pid_t start_group() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    for (;;) ::pause();
  }
  ::setpgid(pid, pid);
  g_started[g_count++] = pid;
  return pid;
}
void kill_started() {
  for (int i = 0; i < g_count; ++i) {
    ::kill(g_started[i], SIGKILL);
    ::waitpid(g_started[i], nullptr, 0);
  }
}

int take_in_turn();

// What the session leader below found, as its exit status: 0 when all held, else the step that
// failed. No child outlives it.
int programs_take_the_terminal_in_turn() {
  const int result = take_in_turn();
  kill_started();
  return result;
}

int take_in_turn() {
  if (::setsid() < 0) return 10;
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  if (master < 0 || ::grantpt(master) != 0 || ::unlockpt(master) != 0) return 11;
  const int tty = ::open(::ptsname(master), O_RDWR);
  if (tty < 0 || ::ioctl(tty, TIOCSCTTY, 0) != 0) return 12;
  if (::tcgetpgrp(tty) != ::getpgrp()) return 13;
  // Not a terminal: nothing given.
  if (give_terminal(master + 100, ::getpgrp())) return 14;
  const pid_t first = start_group();
  if (!give_terminal(tty, first) || ::tcgetpgrp(tty) != first) return 1;
  // The first program ends; the next one started takes the terminal over from it.
  ::kill(first, SIGKILL);
  ::waitpid(first, nullptr, 0);
  const pid_t second = start_group();
  if (!give_terminal(tty, second) || ::tcgetpgrp(tty) != second) return 2;
  // A group that took the terminal by itself (not given by the caller) keeps it.
  const pid_t other = start_group();
  if (::tcsetpgrp(tty, other) != 0) return 15;
  const pid_t third = start_group();
  if (give_terminal(tty, third) || ::tcgetpgrp(tty) != other) return 3;
  return 0;
}

// gdbserver --multi: each program it runs gets the terminal's foreground, also after the one
// before it ended with it (that group is gone, not the server's).
TEST(GiveTerminal, EachProgramStartedTakesTheForegroundInTurn) {
  const pid_t leader = ::fork();
  ASSERT_GE(leader, 0);
  if (leader == 0) ::_exit(programs_take_the_terminal_in_turn());
  int status = 0;
  ASSERT_EQ(::waitpid(leader, &status, 0), leader);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the step that failed (see the test)";
}

}  // namespace
}  // namespace hwarb::native
