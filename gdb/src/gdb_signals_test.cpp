// Tests of the signal numbering of gdb's remote protocol against Linux's.
#include "hwarb/gdb/gdb_signals.h"

#include <signal.h>

#include <gtest/gtest.h>

namespace hwarb::gdb {
namespace {

// gdb's numbers (include/gdb/signals.def), spelled out for the signals a program meets.
TEST(GdbSignals, LinuxSignalsTakeGdbsNumbers) {
  const std::pair<int, int> cases[] = {
      {0, 0},        {SIGHUP, 1},    {SIGINT, 2},   {SIGTRAP, 5},
      {SIGABRT, 6},  {SIGBUS, 10},   {SIGFPE, 8},   {SIGKILL, 9},
      {SIGUSR1, 30}, {SIGSEGV, 11},  {SIGUSR2, 31}, {SIGPIPE, 13},
      {SIGALRM, 14}, {SIGTERM, 15},  {SIGCHLD, 20}, {SIGCONT, 19},
      {SIGSTOP, 17}, {SIGTSTP, 18},  {SIGTTIN, 21}, {SIGTTOU, 22},
      {SIGURG, 16},  {SIGXCPU, 24},  {SIGXFSZ, 25}, {SIGVTALRM, 26},
      {SIGPROF, 27}, {SIGWINCH, 28}, {SIGIO, 23},   {SIGPWR, 32},
      {SIGSYS, 12},  {32, 77},       {33, 45},      {SIGRTMIN, 45 + SIGRTMIN - 33},
      {63, 75},      {64, 78},
  };
  for (const auto& [linux_number, gdb_number] : cases) {
    EXPECT_EQ(gdb_signal_from_linux(linux_number), gdb_number) << "Linux signal " << linux_number;
  }
  EXPECT_EQ(gdb_signal_from_linux(SIGSTKFLT), kGdbSignalUnknown);
  EXPECT_EQ(gdb_signal_from_linux(65), kGdbSignalUnknown);
  EXPECT_EQ(gdb_signal_from_linux(-1), kGdbSignalUnknown);
}

TEST(GdbSignals, EveryLinuxSignalComesBackFromGdbsNumber) {
  for (int s = 0; s <= 64; ++s) {
    if (s == SIGSTKFLT) continue;
    const int wire = gdb_signal_from_linux(s);
    ASSERT_NE(wire, kGdbSignalUnknown) << s;
    EXPECT_EQ(linux_signal_from_gdb(wire), s) << "Linux signal " << s << ", gdb " << wire;
  }
  EXPECT_EQ(linux_signal_from_gdb(33), SIGIO);        // gdb's SIGPOLL
  EXPECT_EQ(linux_signal_from_gdb(7), std::nullopt);  // SIGEMT
  EXPECT_EQ(linux_signal_from_gdb(kGdbSignalUnknown), std::nullopt);
  EXPECT_EQ(linux_signal_from_gdb(200), std::nullopt);
}

}  // namespace
}  // namespace hwarb::gdb
