#include "hwarb/linux/syscalls.h"
#include "hwarb/linux/files.h"

#include <elf.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/linux/fd.h"
#include "hwarb/linux/stopped_child.h"
#include "hwarb/ptrace_compat/user_area.h"
#include "test_support.h"

namespace hwarb::native {
namespace {

using hwarb::BpType;
using ptrace_compat::debugreg_offset;
using ptrace_compat::user_area;
using ptrace_compat::UserLayout;
using testing::refused;
using testing::skip_reason;

const ptrace_compat::UserArea& kArea = user_area(UserLayout::kX86_64);
constexpr std::uint64_t kDr6Fresh = 0xffff0ff0;
// DR7: slot 0 locally enabled, R/W 01 (write), LEN 11 (8 bytes).
constexpr std::uint64_t kDr7Write8 = 0xd0001;

std::uint64_t dr(int n) {
  return debugreg_offset(kArea, n);
}

template <typename T>
void expect_error(const Result<T>& r, ErrorCode code, std::string_view field) {
  ASSERT_FALSE(r) << "expected " << errno_name(code);
  EXPECT_EQ(r.error().code(), code) << r.error().to_string();
  EXPECT_TRUE(r.error().message().starts_with(field)) << r.error().to_string();
}

TEST(Fd, ClosesWhatItOwnsAndMovesOwnership) {
  std::array<int, 2> p{};
  ASSERT_EQ(::pipe2(p.data(), O_CLOEXEC), 0);
  Fd w(p[1]);
  {
    Fd r(p[0]);
    Fd moved(std::move(r));
    EXPECT_FALSE(r.valid());
    EXPECT_EQ(moved.get(), p[0]);
  }
  EXPECT_EQ(::fcntl(p[0], F_GETFD), -1);
  EXPECT_EQ(::fcntl(p[1], F_GETFD), FD_CLOEXEC);
  ASSERT_TRUE(w.close());
  EXPECT_FALSE(w.valid());
  EXPECT_EQ(::fcntl(p[1], F_GETFD), -1);
  EXPECT_TRUE(w.close());  // owns nothing: nothing to do
}

TEST(Fd, CloseReportsTheKernelsErrorByName) {
  Fd bad(1 << 20);
  auto r = bad.close();
  expect_error(r, ErrorCode::kIo, "fd");  // EBADF is not an ErrorCode: folded into EIO...
  EXPECT_NE(r.error().message().find("EBADF"), std::string::npos) << r.error().message();
  EXPECT_FALSE(bad.valid());
}

TEST(Syscalls, PtraceOnAnUntracedProcessIsEsrch) {
  expect_error(ptrace_peek_user(::getpid(), dr(7)), ErrorCode::kSrch, "pid");
  expect_error(ptrace_poke_user(::getpid(), dr(7), 0), ErrorCode::kSrch, "pid");
  expect_error(ptrace_cont(::getpid()), ErrorCode::kSrch, "pid");
}

TEST(Syscalls, WaitForANonChildIsEchild) {
  expect_error(wait_for(1, true), ErrorCode::kChild, "pid");
  expect_error(wait_once(1, true), ErrorCode::kChild, "pid");
}

TEST(Syscalls, MoreRequestsOnAnUntracedProcessAreEsrch) {
  const pid_t self = ::getpid();
  expect_error(ptrace_syscall(self), ErrorCode::kSrch, "pid");
  expect_error(ptrace_interrupt(self), ErrorCode::kSrch, "pid");
  expect_error(ptrace_listen(self), ErrorCode::kSrch, "pid");
  siginfo_t info{};
  expect_error(ptrace_getsiginfo(self, info), ErrorCode::kSrch, "pid");
  expect_error(ptrace_event_message(self), ErrorCode::kSrch, "pid");
  __ptrace_syscall_info syscall_info{};
  expect_error(ptrace_get_syscall_info(self, syscall_info), ErrorCode::kSrch, "pid");
  user_regs_struct regs{};
  expect_error(ptrace_get_regset(self, NT_PRSTATUS, std::as_writable_bytes(std::span(&regs, 1))),
               ErrorCode::kSrch, "pid");
  expect_error(ptrace_set_regset(self, NT_PRSTATUS, std::as_bytes(std::span(&regs, 1))),
               ErrorCode::kSrch, "pid");
}

TEST(Syscalls, SeizeRefusalsNameTheirReason) {
  // No such thread (pids stop at 2^22).
  expect_error(ptrace_seize(0x7fffffff, 0), ErrorCode::kSrch, "pid");
  // Checked before the target: an option Linux does not know.
  expect_error(ptrace_seize(::getpid(), std::uint64_t{1} << 40), ErrorCode::kIo, "options");
  // A process may not trace its own threads.
  auto self = ptrace_seize(::getpid(), 0);
  expect_error(self, ErrorCode::kPerm, "pid");
  EXPECT_NE(self.error().message().find("ptrace_scope"), std::string::npos)
      << self.error().message();
}

TEST(Syscalls, ThreadSignalsNameTheThreadOrTheSignal) {
  EXPECT_EQ(own_pid(), ::getpid());
  EXPECT_TRUE(send_thread_signal(own_pid(), ::gettid(), 0));
  expect_error(send_thread_signal(own_pid(), 0x7fffffff, 0), ErrorCode::kSrch, "tid");
  expect_error(send_thread_signal(own_pid(), ::gettid(), 1000), ErrorCode::kInval, "signal");
}

TEST(Syscalls, SyscallReturnErrorIsTheErrnoByName) {
  const Error e = syscall_return_error(-ENOSPC, "addr", "mprotect of 0x1000");
  EXPECT_EQ(e.code(), ErrorCode::kNoSpc);
  EXPECT_EQ(e.message(), "addr: mprotect of 0x1000: ENOSPC (No space left on device)");
  const Error folded = syscall_return_error(-EBADF, "fd", "close");
  EXPECT_EQ(folded.code(), ErrorCode::kIo);
  EXPECT_NE(folded.message().find("EBADF"), std::string::npos) << folded.message();
}

TEST(Syscalls, OpenFileIsCloseOnExecAndNamesAMissingFile) {
  auto fd = open_file("/proc/self/status");
  ASSERT_TRUE(fd) << fd.error().to_string();
  EXPECT_EQ(::fcntl(fd->get(), F_GETFD), FD_CLOEXEC);
  auto missing = open_file("/nonexistent/hwarb");
  expect_error(missing, ErrorCode::kNoEnt, "file");
  EXPECT_NE(missing.error().message().find("/nonexistent/hwarb"), std::string::npos);
}

TEST(Syscalls, PreadFileAndFileStatSeeTheFileAsItIs) {
  char path[] = "/tmp/hwarb_pread_XXXXXX";
  const int raw = ::mkstemp(path);
  ASSERT_GE(raw, 0);
  Fd owner(raw);
  const std::string text = "0123456789abcdef";
  ASSERT_EQ(::write(raw, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  auto fd = open_file(path);
  ::unlink(path);
  ASSERT_TRUE(fd) << fd.error().to_string();
  std::vector<std::uint8_t> buf(8);
  auto n = pread_file(fd->get(), 10, buf);
  ASSERT_TRUE(n) << n.error().to_string();
  EXPECT_EQ(*n, 6u);  // short at the end
  EXPECT_EQ(std::string(buf.begin(), buf.begin() + 6), "abcdef");
  auto end = pread_file(fd->get(), 16, buf);
  ASSERT_TRUE(end);
  EXPECT_EQ(*end, 0u);
  auto st = file_stat(fd->get());
  ASSERT_TRUE(st) << st.error().to_string();
  EXPECT_EQ(st->size, text.size());
  EXPECT_TRUE(S_ISREG(st->mode));
  expect_error(pread_file(-1, 0, buf), ErrorCode::kIo, "fd");
  expect_error(file_stat(-1), ErrorCode::kIo, "fd");
}

// Arms SIGALRM with a handler that returns without SA_RESTART (as install_interrupt_flag's) to
// fire after 50 ms; the previous action comes back on destruction.
class AlarmInterrupt {
 public:
  AlarmInterrupt() {
    struct sigaction action {};
    action.sa_handler = [](int) {};
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;
    ::sigaction(SIGALRM, &action, &old_);
    itimerval timer{};
    timer.it_value.tv_usec = 50'000;
    ::setitimer(ITIMER_REAL, &timer, nullptr);
  }
  ~AlarmInterrupt() {
    const itimerval off{};
    ::setitimer(ITIMER_REAL, &off, nullptr);
    ::sigaction(SIGALRM, &old_, nullptr);
  }
  AlarmInterrupt(const AlarmInterrupt&) = delete;
  AlarmInterrupt& operator=(const AlarmInterrupt&) = delete;

 private:
  struct sigaction old_ {};
};

TEST(Syscalls, PollInOnceReportsReadinessAndIsInterrupted) {
  std::array<int, 2> p{};
  ASSERT_EQ(::pipe2(p.data(), O_CLOEXEC), 0);
  Fd r(p[0]);
  Fd w(p[1]);
  const std::vector<int> fds{r.get()};
  EXPECT_EQ(*poll_in_once(fds, 0), std::vector<short>{0});
  ASSERT_EQ(::write(w.get(), "x", 1), 1);
  auto ready = poll_in_once(fds, -1);
  ASSERT_TRUE(ready) << ready.error().to_string();
  EXPECT_NE((*ready)[0] & POLLIN, 0);
  char byte = 0;
  ASSERT_EQ(::read(r.get(), &byte, 1), 1);
  AlarmInterrupt alarm;
  expect_error(poll_in_once(fds, -1), ErrorCode::kIntr, "timeout");
}

class ChildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = StoppedChild::spawn();
    if (!c && refused(c.error())) GTEST_SKIP() << skip_reason("ptrace", c.error());
    ASSERT_TRUE(c) << c.error().to_string();
    child_.emplace(std::move(*c));
    pid_ = child_->pid();
  }
  // Opens a perf breakpoint on the child; skips the test when this machine refuses them.
  std::optional<Fd> open_or_skip(std::uint64_t addr) {
    auto fd = perf_breakpoint_open(pid_, addr, 8, BpType::kW);
    if (!fd && refused(fd.error())) {
      skip_ = skip_reason("perf_event_open(PERF_TYPE_BREAKPOINT)", fd.error());
      return std::nullopt;
    }
    EXPECT_TRUE(fd) << fd.error().to_string();
    if (!fd) return std::nullopt;
    return std::move(*fd);
  }

  std::optional<StoppedChild> child_;
  pid_t pid_ = -1;
  std::string skip_;
};

TEST_F(ChildTest, AFreshChildHasEmptyDebugRegisters) {
  EXPECT_GT(pid_, 0);
  for (int n : {0, 1, 2, 3, 4, 5, 7}) EXPECT_EQ(*ptrace_peek_user(pid_, dr(n)), 0u) << "DR" << n;
  EXPECT_EQ(*ptrace_peek_user(pid_, dr(6)), kDr6Fresh);
}

TEST_F(ChildTest, Dr0AndDr7RoundTrip) {
  ASSERT_TRUE(ptrace_poke_user(pid_, dr(0), 0x10000));
  EXPECT_EQ(*ptrace_peek_user(pid_, dr(0)), 0x10000u);
  ASSERT_TRUE(ptrace_poke_user(pid_, dr(7), kDr7Write8));
  EXPECT_EQ(*ptrace_peek_user(pid_, dr(7)), kDr7Write8);
  // DR7 reads back exactly as written: reserved bits 10-15 and bits 32-63 included.
  const std::uint64_t odd = kDr7Write8 | 0xfc00 | (std::uint64_t{0xabcd} << 40);
  ASSERT_TRUE(ptrace_poke_user(pid_, dr(7), odd));
  EXPECT_EQ(*ptrace_peek_user(pid_, dr(7)), odd);
  ASSERT_TRUE(ptrace_poke_user(pid_, dr(0), 0x20008));
  EXPECT_EQ(*ptrace_peek_user(pid_, dr(0)), 0x20008u);
  ASSERT_TRUE(ptrace_poke_user(pid_, dr(7), 0));
  EXPECT_EQ(*ptrace_peek_user(pid_, dr(7)), 0u);
  ASSERT_TRUE(ptrace_poke_user(pid_, dr(6), 0x1234));
  EXPECT_EQ(*ptrace_peek_user(pid_, dr(6)), 0x1234u);
}

TEST_F(ChildTest, BadOffsetsAreEio) {
  expect_error(ptrace_peek_user(pid_, dr(0) + 1), ErrorCode::kIo, "offset");
  expect_error(ptrace_poke_user(pid_, dr(7) + 4, 0), ErrorCode::kIo, "offset");
  // The kernel's struct user ends at 928: error_code and fault_address follow u_debugreg.
  EXPECT_EQ(*ptrace_peek_user(pid_, kArea.size - 8), 0u);
  expect_error(ptrace_poke_user(pid_, kArea.size - 8, 0), ErrorCode::kIo, "offset");
  expect_error(ptrace_peek_user(pid_, kArea.size), ErrorCode::kIo, "offset");
  expect_error(ptrace_poke_user(pid_, kArea.size, 0), ErrorCode::kIo, "offset");
}

TEST_F(ChildTest, Dr4AndDr5ReadZeroAndRefuseWrites) {
  for (int n : {4, 5}) {
    EXPECT_EQ(*ptrace_peek_user(pid_, dr(n)), 0u);
    expect_error(ptrace_poke_user(pid_, dr(n), 1), ErrorCode::kIo, "offset");
  }
}

TEST_F(ChildTest, RefusedBreakpointsAreEinvalAndChangeNothing) {
  expect_error(ptrace_poke_user(pid_, dr(0), 0xffffffff81000000), ErrorCode::kInval, "value");
  EXPECT_EQ(*ptrace_peek_user(pid_, dr(0)), 0u);
  // R/W 10 (I/O) is refused; DR7 keeps its previous value.
  ASSERT_TRUE(ptrace_poke_user(pid_, dr(7), kDr7Write8));
  expect_error(ptrace_poke_user(pid_, dr(7), 0x20001), ErrorCode::kInval, "value");
  EXPECT_EQ(*ptrace_peek_user(pid_, dr(7)), kDr7Write8);
}

TEST_F(ChildTest, PerfBreakpointsTakeTheTasksSlots) {
  std::vector<Fd> fds;
  for (int i = 0; i < 4; ++i) {
    auto fd = open_or_skip(0x10000 + 8 * static_cast<std::uint64_t>(i));
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(fd);
    EXPECT_TRUE(fd->valid());
    fds.push_back(std::move(*fd));
  }
  expect_error(perf_breakpoint_open(pid_, 0x10040, 8, BpType::kW), ErrorCode::kNoSpc, "slots");
  // ptrace is one more user of the same four slots.
  expect_error(ptrace_poke_user(pid_, dr(7), kDr7Write8), ErrorCode::kNoSpc, "value");
  expect_error(ptrace_poke_user(pid_, dr(0), 0x10000), ErrorCode::kNoSpc, "value");
  EXPECT_EQ(*ptrace_peek_user(pid_, dr(7)), 0u);
  EXPECT_EQ(*ptrace_peek_user(pid_, dr(0)), 0u);
  ASSERT_TRUE(fds.back().close());
  ASSERT_TRUE(ptrace_poke_user(pid_, dr(0), 0x10000));
  ASSERT_TRUE(ptrace_poke_user(pid_, dr(7), kDr7Write8));
  EXPECT_EQ(*ptrace_peek_user(pid_, dr(7)), kDr7Write8);
  // Slot 1 has no breakpoint and none is left for it.
  expect_error(ptrace_poke_user(pid_, dr(1), 0x10008), ErrorCode::kNoSpc, "value");
}

TEST_F(ChildTest, PerfBreakpointFieldsAreChecked) {
  auto probe = open_or_skip(0x10000);
  if (!skip_.empty()) GTEST_SKIP() << skip_;
  ASSERT_TRUE(probe);
  expect_error(perf_breakpoint_open(pid_, 0x10000, 3, BpType::kW), ErrorCode::kInval, "attr");
  expect_error(perf_breakpoint_open(pid_, 0x10001, 8, BpType::kW), ErrorCode::kInval, "attr");
  expect_error(perf_breakpoint_open(pid_, 0xffffffff81000000, 8, BpType::kW), ErrorCode::kInval,
               "attr");
  // No such pid (pids stop at 2^22).
  expect_error(perf_breakpoint_open(0x7fffffff, 0x10000, 8, BpType::kW), ErrorCode::kSrch, "pid");
}

TEST_F(ChildTest, ResumeNeedsAStop) {
  ASSERT_TRUE(ptrace_cont(pid_));
  expect_error(ptrace_cont(pid_), ErrorCode::kSrch, "pid");
  expect_error(ptrace_singlestep(pid_), ErrorCode::kSrch, "pid");
  expect_error(ptrace_peek_user(pid_, dr(7)), ErrorCode::kSrch, "pid");
  ASSERT_TRUE(send_signal(pid_, SIGSTOP));
  auto st = child_->wait(false);
  ASSERT_TRUE(st) << st.error().to_string();
  EXPECT_EQ(*st, (WaitStatus{WaitKind::kStopped, SIGSTOP, st->raw}));
  EXPECT_EQ(*ptrace_peek_user(pid_, dr(6)), kDr6Fresh);
}

TEST_F(ChildTest, SingleStepStopsWithSigtrap) {
  ASSERT_TRUE(ptrace_singlestep(pid_));
  auto st = child_->wait(false);
  ASSERT_TRUE(st) << st.error().to_string();
  EXPECT_EQ(st->kind, WaitKind::kStopped);
  EXPECT_EQ(st->value, SIGTRAP);
  EXPECT_NE(*ptrace_peek_user(pid_, dr(6)) & 0x4000, 0u);
}

TEST_F(ChildTest, PinsTheStoppedChildToOneCpu) {
  auto mine = cpu_affinity(0);
  ASSERT_TRUE(mine) << mine.error().to_string();
  ASSERT_FALSE(mine->empty());
  const int cpu = mine->back();
  ASSERT_TRUE(pin_to_cpu(pid_, cpu));
  EXPECT_EQ(*cpu_affinity(pid_), std::vector<int>{cpu});
  expect_error(pin_to_cpu(pid_, 1 << 20), ErrorCode::kInval, "cpu");
  // Still in its stop.
  EXPECT_EQ(*ptrace_peek_user(pid_, dr(6)), kDr6Fresh);
}

// The CPU a process last ran on: field 39 of /proc/PID/stat.
int last_cpu(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));  // from field 3 on
  std::string field;
  for (int i = 3; i <= 39; ++i) rest >> field;
  return std::stoi(field);
}

TEST(StoppedChild, SpawnedOnACpuStopsThere) {
  auto mine = cpu_affinity(0);
  ASSERT_TRUE(mine) << mine.error().to_string();
  for (int cpu : *mine) {
    auto c = StoppedChild::spawn(cpu);
    if (!c && refused(c.error())) GTEST_SKIP() << skip_reason("ptrace", c.error());
    ASSERT_TRUE(c) << c.error().to_string();
    EXPECT_EQ(*cpu_affinity(c->pid()), std::vector<int>{cpu});
    EXPECT_EQ(last_cpu(c->pid()), cpu);
  }
  expect_error(StoppedChild::spawn(-1), ErrorCode::kInval, "cpu");
  if (mine->back() + 1 >= ::sysconf(_SC_NPROCESSORS_CONF)) {
    expect_error(StoppedChild::spawn(mine->back() + 1), ErrorCode::kInval, "cpu");
  }
}

TEST_F(ChildTest, WaitOnceReportsWhichChildStoppedAndIsInterrupted) {
  EXPECT_EQ(*wait_once(pid_, true), WaitEvent{});  // its SIGSTOP stop was reported already
  ASSERT_TRUE(ptrace_singlestep(pid_));
  auto ev = wait_once(pid_, false);
  ASSERT_TRUE(ev) << ev.error().to_string();
  EXPECT_EQ(ev->pid, pid_);
  EXPECT_EQ(ev->status.kind, WaitKind::kStopped);
  EXPECT_EQ(ev->status.value, SIGTRAP);
  // The child stays in its stop: only the signal ends the wait.
  AlarmInterrupt alarm;
  expect_error(wait_once(pid_, false), ErrorCode::kIntr, "pid");
}

TEST_F(ChildTest, RegsetsAreTheGeneralRegisters) {
  user_regs_struct regs{};
  ASSERT_TRUE(ptrace_getregs(pid_, regs));
  user_regs_struct set{};
  auto n = ptrace_get_regset(pid_, NT_PRSTATUS, std::as_writable_bytes(std::span(&set, 1)));
  ASSERT_TRUE(n) << n.error().to_string();
  EXPECT_EQ(*n, sizeof set);
  EXPECT_EQ(set.rip, regs.rip);
  EXPECT_EQ(set.rsp, regs.rsp);
  set.r15 = 0x1234567890abcdefULL;
  ASSERT_TRUE(ptrace_set_regset(pid_, NT_PRSTATUS, std::as_bytes(std::span(&set, 1))));
  ASSERT_TRUE(ptrace_getregs(pid_, regs));
  EXPECT_EQ(regs.r15, 0x1234567890abcdefULL);
  // A buffer that is no whole number of registers, a set this kernel does not have.
  std::array<std::byte, 3> odd{};
  expect_error(ptrace_get_regset(pid_, NT_PRSTATUS, odd), ErrorCode::kInval, "regs");
  expect_error(ptrace_get_regset(pid_, 0x7777, std::as_writable_bytes(std::span(&set, 1))),
               ErrorCode::kInval, "regs");
}

TEST_F(ChildTest, SiginfoEventMessageAndSyscallInfoOfASignalStop) {
  siginfo_t info{};
  ASSERT_TRUE(ptrace_getsiginfo(pid_, info));
  EXPECT_EQ(info.si_signo, SIGSTOP);
  EXPECT_TRUE(ptrace_event_message(pid_));
  __ptrace_syscall_info syscall_info{};
  auto size = ptrace_get_syscall_info(pid_, syscall_info);
  ASSERT_TRUE(size) << size.error().to_string();
  EXPECT_GT(*size, 0u);
  EXPECT_EQ(syscall_info.op, PTRACE_SYSCALL_INFO_NONE);
  // PTRACE_TRACEME made this tracee: the requests of seized tracees are refused.
  expect_error(ptrace_interrupt(pid_), ErrorCode::kIo, "pid");
  expect_error(ptrace_listen(pid_), ErrorCode::kIo, "pid");
}

TEST_F(ChildTest, PtraceSyscallStopsAtTheNextSystemCall) {
  // Resumed from its SIGSTOP stop with PTRACE_SYSCALL, the child stops at the entry of its next
  // system call (pause(2)).
  ASSERT_TRUE(ptrace_syscall(pid_));
  auto st = child_->wait(false);
  ASSERT_TRUE(st) << st.error().to_string();
  EXPECT_EQ(st->kind, WaitKind::kStopped);
  EXPECT_EQ(st->value, SIGTRAP);
  user_regs_struct regs{};
  ASSERT_TRUE(ptrace_getregs(pid_, regs));
  EXPECT_EQ(regs.orig_rax, static_cast<unsigned long long>(SYS_pause));
  EXPECT_EQ(regs.rax, static_cast<unsigned long long>(-ENOSYS));  // an entry stop
}

TEST_F(ChildTest, KillReapsOnceAndMovesTransferOwnership) {
  StoppedChild moved(std::move(*child_));
  EXPECT_FALSE(child_->alive());
  EXPECT_TRUE(child_->kill());  // owns nothing
  EXPECT_EQ(moved.pid(), pid_);
  ASSERT_TRUE(moved.kill());
  EXPECT_FALSE(moved.alive());
  EXPECT_EQ(moved.pid(), -1);
  EXPECT_TRUE(moved.kill());
  expect_error(moved.wait(true), ErrorCode::kSrch, "child");
  // Reaped: the pid is no child of ours any more.
  expect_error(wait_for(pid_, true), ErrorCode::kChild, "pid");
}

TEST(Syscalls, CreateFileTruncatesIsCloseOnExecAndNamesAMissingDirectory) {
  char dir[] = "/tmp/hwarb_create_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/report";
  for (const char* text : {"a longer first text\n", "short\n"}) {
    auto fd = create_file(path);
    ASSERT_TRUE(fd) << fd.error().to_string();
    EXPECT_EQ(::fcntl(fd->get(), F_GETFD), FD_CLOEXEC);
    EXPECT_EQ(::fcntl(fd->get(), F_GETFL) & O_ACCMODE, O_WRONLY);
    const std::string s = text;
    ASSERT_EQ(::write(fd->get(), s.data(), s.size()), static_cast<ssize_t>(s.size()));
  }
  auto back = open_file(path);
  ASSERT_TRUE(back);
  char buf[64] = {};
  EXPECT_EQ(::read(back->get(), buf, sizeof buf), 6);
  EXPECT_STREQ(buf, "short\n");
  auto missing = create_file(std::string(dir) + "/no/such/report");
  expect_error(missing, ErrorCode::kNoEnt, "file");
  EXPECT_NE(missing.error().message().find(std::string(dir) + "/no/such/report"),
            std::string::npos);
  ::unlink(path.c_str());
  ::rmdir(dir);
}

// /dev/full takes nothing: every write(2) is ENOSPC. A failure is seen where it happens (stdio
// then drops the bytes, and a later fflush has nothing left to fail on).
TEST(Syscalls, StreamFailuresNameTheOutputAndTheErrno) {
  const std::string want = "--output /dev/full: ENOSPC: No space left on device";
  std::FILE* full = std::fopen("/dev/full", "w");
  ASSERT_NE(full, nullptr);
  ASSERT_TRUE(write_stream(full, "buffered\n", "--output /dev/full"));
  auto flushed = flush_stream(full, "--output /dev/full");
  ASSERT_FALSE(flushed);
  EXPECT_EQ(flushed.error().code(), ErrorCode::kNoSpc);
  EXPECT_EQ(flushed.error().message(), want);
  EXPECT_TRUE(flush_stream(full, "--output /dev/full"));  // nothing left to write
  // More than the buffer: the write itself fails.
  auto written = write_stream(full, std::string(1 << 20, 'x'), "--output /dev/full");
  ASSERT_FALSE(written);
  EXPECT_EQ(written.error().code(), ErrorCode::kNoSpc);
  EXPECT_EQ(written.error().message(), want);
  ASSERT_TRUE(write_stream(full, "pending", "--output /dev/full"));
  auto closed = close_stream(full, "--output /dev/full");  // closed all the same
  ASSERT_FALSE(closed);
  EXPECT_EQ(closed.error().code(), ErrorCode::kNoSpc);
  EXPECT_EQ(closed.error().message(), want);
  std::FILE* null = std::fopen("/dev/null", "w");
  ASSERT_NE(null, nullptr);
  EXPECT_TRUE(write_stream(null, "x", "stdout"));
  EXPECT_TRUE(flush_stream(null, "stdout"));
  EXPECT_TRUE(close_stream(null, "stdout"));
}

}  // namespace
}  // namespace hwarb::native

namespace hwarb::native {
namespace {

// A perf ring's mapping keeps its event alive: a process forked afterwards (hwarb's watchdog)
// must not inherit it. Checked with a memfd (any file mmap maps): present here, absent in a
// forked child (msync of an unmapped range is ENOMEM).
TEST(MapShared, IsNotInheritedByForkedProcesses) {
  const int fd = static_cast<int>(::syscall(SYS_memfd_create, "map_shared_test", 0U));
  ASSERT_GE(fd, 0);
  Fd owner(fd);
  const std::size_t bytes = page_size();
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(bytes)), 0);
  auto p = map_shared(fd, bytes);
  ASSERT_TRUE(p) << p.error().to_string();
  EXPECT_EQ(::msync(*p, bytes, MS_ASYNC), 0) << "mapped in this process";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(::msync(*p, bytes, MS_ASYNC) != 0 && errno == ENOMEM ? 0 : 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child has the mapping";
  unmap(*p, bytes);
}

}  // namespace
}  // namespace hwarb::native
