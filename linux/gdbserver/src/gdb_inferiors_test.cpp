// Tests of GdbInferiors with real processes: two programs started side by side on one
// connection (gdb's inferiors 1 and 2), each run, stopped and ended on its own.
#include "hwarb/linux/gdb_server.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "test_programs.h"
#include "test_support.h"

namespace hwarb::native {
namespace {

using gdb::ResumeAction;
using gdb::StopEvent;

class GdbInferiorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GdbLaunch launch;
    launch.startup_with_shell = false;
    launch.inferior.stdout_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    target.launch_with(std::move(launch));
  }
  // A stop of the targets: waited for without a client.
  StopEvent next_stop() {
    for (int i = 0; i < 1000; ++i) {
      auto w = target.wait(-1);
      EXPECT_TRUE(w) << w.error().to_string();
      if (!w) return {};
      if (w->stop) return *w->stop;
    }
    ADD_FAILURE() << "no stop";
    return {};
  }
  bool has_thread(gdb::Tid tid) const {
    const auto all = target.threads();
    return std::find(all.begin(), all.end(), tid) != all.end();
  }

  GdbConnection connection{-1, -1, std::chrono::nanoseconds(0)};
  GdbInferiors target{connection};
};

// Rules 2 and 4: a resume that names one process runs it alone; its end is reported with the
// other remaining, which never ran meanwhile and is then run to its own end.
TEST_F(GdbInferiorsTest, TwoProcessesSideBySideEachRunsToItsEndWhenNamed) {
  auto first = target.start(std::vector<std::string>{testing::program("hello")});
  if (!first && testing::refused(first.error())) {
    GTEST_SKIP() << testing::skip_reason("tracing a child", first.error());
  }
  ASSERT_TRUE(first) << first.error().to_string();
  auto second = target.start(std::vector<std::string>{testing::program("hello")});
  ASSERT_TRUE(second) << second.error().to_string();
  ASSERT_NE(*first, *second);
  EXPECT_TRUE(has_thread(*first));
  EXPECT_TRUE(has_thread(*second));
  EXPECT_EQ(target.process_of(*second), *second);
  EXPECT_EQ(target.pid(), *first);

  auto r = target.resume(
      std::vector<ResumeAction>{ResumeAction{.kind = 'c', .tid = -1, .process = *second}});
  ASSERT_TRUE(r) << r.error().to_string();
  StopEvent end = next_stop();
  EXPECT_EQ(end.kind, StopEvent::Kind::kExited);
  EXPECT_EQ(end.process, *second);
  EXPECT_TRUE(end.remains);
  // The first never ran: still at its first instruction, alone now.
  EXPECT_TRUE(target.is_stopped(*first));
  EXPECT_EQ(target.threads(), std::vector<gdb::Tid>{*first});

  r = target.resume(std::vector<ResumeAction>{ResumeAction{.kind = 'c', .tid = -1}});
  ASSERT_TRUE(r) << r.error().to_string();
  end = next_stop();
  EXPECT_EQ(end.kind, StopEvent::Kind::kExited);
  EXPECT_EQ(end.process, *first);
  EXPECT_FALSE(end.remains);
}

// Rule 1: memory and registers are the named process's own; a kill of one leaves the other.
TEST_F(GdbInferiorsTest, EachProcessIsReadAndKilledOnItsOwn) {
  auto first = target.start(std::vector<std::string>{testing::program("hello")});
  if (!first && testing::refused(first.error())) {
    GTEST_SKIP() << testing::skip_reason("tracing a child", first.error());
  }
  ASSERT_TRUE(first) << first.error().to_string();
  auto second = target.attach(*first);
  ASSERT_FALSE(second);  // already here
  EXPECT_EQ(second.error().code(), ErrorCode::kBusy);
  second = target.start(std::vector<std::string>{testing::program("hello")});
  ASSERT_TRUE(second) << second.error().to_string();
  auto regs = target.general_registers(*second);
  ASSERT_TRUE(regs) << regs.error().to_string();
  // A write into the second process is not seen in the first (no shared memory).
  const std::uint64_t addr = regs->rsp - 64;
  auto before = target.read_memory(*first, addr, 4);
  ASSERT_TRUE(before) << before.error().to_string();
  std::vector<std::uint8_t> bytes{0x5a, 0xa5, 0x5a, 0xa5};
  if (*before == bytes) bytes[0] = 0x11;
  ASSERT_TRUE(target.write_memory(*second, addr, bytes));
  EXPECT_EQ(*target.read_memory(*second, addr, 4), bytes);
  EXPECT_EQ(*target.read_memory(*first, addr, 4), *before);

  ASSERT_TRUE(target.kill_process(*second));
  EXPECT_FALSE(has_thread(*second));
  EXPECT_TRUE(has_thread(*first));
  auto r = target.resume(std::vector<ResumeAction>{ResumeAction{.kind = 'c', .tid = -1}});
  ASSERT_TRUE(r) << r.error().to_string();
  const StopEvent end = next_stop();
  EXPECT_EQ(end.kind, StopEvent::Kind::kExited);
  EXPECT_EQ(end.process, *first);
  EXPECT_FALSE(end.remains);
}

// A thread the server stopped for the client (Ctrl-C here) shows gdbserver's siginfo: a SIGSTOP
// from the server (tgkill), not the kernel's record of a PTRACE_INTERRUPT stop (SIGTRAP, event
// code), which gdb cannot tell from a trap of the program's.
TEST_F(GdbInferiorsTest, AThreadTheServerStoppedShowsASigstopFromTheServer) {
  auto pid = target.start(std::vector<std::string>{testing::program("spin")});
  if (!pid && testing::refused(pid.error())) {
    GTEST_SKIP() << testing::skip_reason("tracing a child", pid.error());
  }
  ASSERT_TRUE(pid) << pid.error().to_string();
  auto r = target.resume(std::vector<ResumeAction>{ResumeAction{.kind = 'c', .tid = -1}});
  ASSERT_TRUE(r) << r.error().to_string();
  auto stop = target.interrupt();
  ASSERT_TRUE(stop) << stop.error().to_string();
  EXPECT_EQ(stop->signal, SIGINT);
  auto bytes = target.siginfo(*pid);
  ASSERT_TRUE(bytes) << bytes.error().to_string();
  ASSERT_EQ(bytes->size(), sizeof(siginfo_t));
  siginfo_t info{};
  std::memcpy(&info, bytes->data(), sizeof info);
  EXPECT_EQ(info.si_signo, SIGSTOP);
  EXPECT_EQ(info.si_code, SI_TKILL);
  EXPECT_EQ(info.si_pid, ::getpid());
  ASSERT_TRUE(target.kill_process(*pid));
}

}  // namespace
}  // namespace hwarb::native
