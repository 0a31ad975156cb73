#include "hwarb/linux/linux_tracee.h"

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <csignal>
#include <optional>
#include <string_view>

#include "hwarb/linux/syscalls.h"
#include "test_support.h"

namespace hwarb::native {
namespace {

using ptrace_compat::Stop;
using ptrace_compat::Tracee;
using ptrace_compat::UserLayout;
using ptrace_compat::WaitMode;
using testing::refused;
using testing::skip_reason;

constexpr std::uint64_t kDr6Fresh = 0xffff0ff0;
constexpr std::uint64_t kBs = 0x4000;
constexpr std::uint64_t kDr7Write8 = 0xd0001;

template <typename T>
void expect_error(const Result<T>& r, ErrorCode code, std::string_view field) {
  ASSERT_FALSE(r) << "expected " << errno_name(code);
  EXPECT_EQ(r.error().code(), code) << r.error().to_string();
  EXPECT_TRUE(r.error().message().starts_with(field)) << r.error().to_string();
}

// A child nobody traces, pausing until killed (for attach()).
class PausedChild {
 public:
  PausedChild() {
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0L, 0L, 0L);
      if (::syscall(SYS_getppid) != parent) ::syscall(SYS_exit_group, 1);
      for (;;) ::syscall(SYS_pause);
    }
  }
  PausedChild(const PausedChild&) = delete;
  PausedChild& operator=(const PausedChild&) = delete;
  ~PausedChild() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, __WALL) < 0 && errno == EINTR) {
    }
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// A child nobody traces that exits with `status` once release()d (a byte on a pipe).
class ExitingChild {
 public:
  explicit ExitingChild(int status) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0L, 0L, 0L);
      if (::syscall(SYS_getppid) != parent) ::syscall(SYS_exit_group, 1);
      char byte = 0;
      // Interrupted by the tracer's attach (EINTR) or not: it waits for the byte or EOF.
      while (::syscall(SYS_read, fds[0], &byte, 1L) < 0) {
      }
      ::syscall(SYS_exit_group, status);
    }
    ::close(fds[0]);
    release_fd_ = fds[1];
  }
  ExitingChild(const ExitingChild&) = delete;
  ExitingChild& operator=(const ExitingChild&) = delete;
  ~ExitingChild() {
    if (release_fd_ >= 0) ::close(release_fd_);
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, __WALL) < 0 && errno == EINTR) {
    }
  }
  pid_t pid() const { return pid_; }
  void release() {
    const char byte = 1;
    EXPECT_EQ(::write(release_fd_, &byte, 1), 1);
  }
  // Its tracer reaped it: the pid is no longer ours to signal.
  void reaped() { pid_ = -1; }

 private:
  pid_t pid_ = -1;
  int release_fd_ = -1;
};

class TraceeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = StoppedChild::spawn();
    if (!c && refused(c.error())) GTEST_SKIP() << skip_reason("ptrace", c.error());
    ASSERT_TRUE(c) << c.error().to_string();
    pid_ = c->pid();
    auto t = LinuxTracee::create(std::move(*c));
    ASSERT_TRUE(t) << t.error().to_string();
    tracee_.emplace(std::move(*t));
  }
  Tracee& tracee() { return *tracee_; }

  std::optional<LinuxTracee> tracee_;
  pid_t pid_ = -1;
};

TEST_F(TraceeTest, StartsInItsSigstopStop) {
  EXPECT_EQ(tracee_->pid(), pid_);
  EXPECT_EQ(tracee().layout(), UserLayout::kX86_64);
  for (auto mode : {WaitMode::kNoHang, WaitMode::kBlock}) {
    auto s = tracee().wait(mode);
    ASSERT_TRUE(s) << s.error().to_string();
    EXPECT_EQ(*s, (Stop{SIGSTOP, kDr6Fresh}));
  }
}

TEST_F(TraceeTest, DebugRegistersRoundTripThroughTheInterface) {
  ASSERT_TRUE(tracee().poke_debugreg(0, 0x10000));
  ASSERT_TRUE(tracee().poke_debugreg(7, kDr7Write8));
  EXPECT_EQ(*tracee().peek_debugreg(0), 0x10000u);
  EXPECT_EQ(*tracee().peek_debugreg(7), kDr7Write8);
  expect_error(tracee().peek_user(849), ErrorCode::kIo, "offset");
  ASSERT_TRUE(tracee().poke_debugreg(6, 0xfeed));
  EXPECT_EQ(tracee().wait()->value().dr6, 0xfeedu);  // wait() re-reads DR6
}

TEST_F(TraceeTest, StepStopsWithSigtrapAndBs) {
  ASSERT_TRUE(tracee().step());
  auto s = tracee().wait(WaitMode::kBlock);
  ASSERT_TRUE(s) << s.error().to_string();
  ASSERT_TRUE(*s);
  EXPECT_EQ((*s)->signal, SIGTRAP);
  EXPECT_NE((*s)->dr6 & kBs, 0u) << std::hex << (*s)->dr6;
  // The same stop until the tracee is resumed.
  EXPECT_EQ(**tracee().wait(WaitMode::kNoHang), **s);
}

TEST_F(TraceeTest, RunningTraceeRefusesEverythingButWait) {
  ASSERT_TRUE(tracee().cont());
  auto s = tracee().wait(WaitMode::kNoHang);
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_FALSE(*s);
  expect_error(tracee().peek_debugreg(7), ErrorCode::kSrch, "pid");
  expect_error(tracee().poke_debugreg(7, 0), ErrorCode::kSrch, "pid");
  expect_error(tracee().cont(), ErrorCode::kSrch, "pid");
  expect_error(tracee().step(), ErrorCode::kSrch, "pid");
  ASSERT_TRUE(send_signal(pid_, SIGSTOP));
  s = tracee().wait(WaitMode::kBlock);
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_EQ(*s, (Stop{SIGSTOP, kDr6Fresh}));
  EXPECT_TRUE(tracee().poke_debugreg(7, 0));
}

TEST_F(TraceeTest, ATraceeKilledBySignalIsReportedOnceThenEsrch) {
  ASSERT_TRUE(tracee().cont());
  ASSERT_TRUE(send_signal(pid_, SIGKILL));
  auto end = tracee().wait(WaitMode::kBlock);
  ASSERT_TRUE(end) << end.error().to_string();
  EXPECT_EQ(*end, Stop::killed(SIGKILL));
  EXPECT_EQ((*end)->kind, ptrace_compat::StopKind::kKilled);
  expect_error(tracee().wait(WaitMode::kBlock), ErrorCode::kSrch, "pid");
  expect_error(tracee().wait(WaitMode::kNoHang), ErrorCode::kSrch, "pid");
  expect_error(tracee().peek_debugreg(7), ErrorCode::kSrch, "pid");
  expect_error(tracee().cont(), ErrorCode::kSrch, "pid");
}

TEST(LinuxTracee, AnExitIsReportedWithItsStatusOnceThenEsrch) {
  ExitingChild child(7);
  ASSERT_GT(child.pid(), 0);
  auto t = LinuxTracee::attach(child.pid());
  if (!t && refused(t.error())) GTEST_SKIP() << skip_reason("PTRACE_ATTACH", t.error());
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(**t->wait(), (Stop{SIGSTOP, kDr6Fresh}));
  ASSERT_TRUE(t->cont());
  child.release();
  // Until it has exited (seen without reaping it), then a cont that finds the end first is
  // ESRCH, and the end stays for wait to report.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child.pid()), &info, WEXITED | WNOWAIT), 0);
  expect_error(t->cont(), ErrorCode::kSrch, "pid");
  auto end = t->wait(WaitMode::kNoHang);
  ASSERT_TRUE(end) << end.error().to_string();
  child.reaped();
  EXPECT_EQ(*end, Stop::exited(7));
  EXPECT_EQ((*end)->kind, ptrace_compat::StopKind::kExited);
  expect_error(t->wait(WaitMode::kNoHang), ErrorCode::kSrch, "pid");
  expect_error(t->peek_debugreg(7), ErrorCode::kSrch, "pid");
}

TEST(LinuxTracee, I386LayoutNeedsA32BitTracer) {
  auto c = StoppedChild::spawn();
  if (!c && refused(c.error())) GTEST_SKIP() << skip_reason("ptrace", c.error());
  ASSERT_TRUE(c) << c.error().to_string();
  expect_error(LinuxTracee::create(std::move(*c), UserLayout::kI386), ErrorCode::kOpNotSupp,
               "layout");
}

TEST(LinuxTracee, AttachesAndDetachesKeepingTheBreakpoints) {
  PausedChild child;
  ASSERT_GT(child.pid(), 0);
  {
    auto t = LinuxTracee::attach(child.pid());
    if (!t && refused(t.error())) GTEST_SKIP() << skip_reason("PTRACE_ATTACH", t.error());
    ASSERT_TRUE(t) << t.error().to_string();
    EXPECT_EQ(**t->wait(), (Stop{SIGSTOP, kDr6Fresh}));
    ASSERT_TRUE(t->poke_debugreg(0, 0x10000));
    ASSERT_TRUE(t->poke_debugreg(7, kDr7Write8));
    // A second tracer is refused.
    expect_error(LinuxTracee::attach(child.pid()), ErrorCode::kPerm, "pid");
  }  // stopped: detached at once
  {
    auto t = LinuxTracee::attach(child.pid());
    ASSERT_TRUE(t) << t.error().to_string();
    // Linux flushes ptrace breakpoints at exec and exit, not at detach.
    EXPECT_EQ(*t->peek_debugreg(7), kDr7Write8);
    EXPECT_EQ(*t->peek_debugreg(0), 0x10000u);
    ASSERT_TRUE(t->cont());
  }  // running: stopped, then detached
  auto t = LinuxTracee::attach(child.pid());
  ASSERT_TRUE(t) << t.error().to_string();
  EXPECT_EQ(**t->wait(), (Stop{SIGSTOP, kDr6Fresh}));
}

}  // namespace
}  // namespace hwarb::native
