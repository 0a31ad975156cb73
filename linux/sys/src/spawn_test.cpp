#include "hwarb/linux/spawn.h"

#include "hwarb/linux/signals.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "hwarb/linux/syscalls.h"
#include "test_programs.h"
#include "test_support.h"

namespace hwarb::native {
namespace {

using testing::Capture;
using testing::program;
using testing::refused;
using testing::skip_reason;

template <typename T>
void expect_error(const Result<T>& r, ErrorCode code, std::string_view field) {
  ASSERT_FALSE(r) << "expected " << errno_name(code);
  EXPECT_EQ(r.error().code(), code) << r.error().to_string();
  EXPECT_TRUE(r.error().message().starts_with(field)) << r.error().to_string();
}

// The state letter of /proc/PID/stat ('T': stopped).
char proc_state(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() ? '?' : stat[paren + 2];
}

// The personality of process `pid` (/proc/PID/personality, hexadecimal).
unsigned long proc_personality(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/personality");
  std::string text;
  f >> text;
  return std::strtoul(text.c_str(), nullptr, 16);
}

// SIGCONT, then the exit status; kills and reaps the child on the way out whatever happens.
class Spawned {
 public:
  explicit Spawned(pid_t pid) : pid_(pid) {}
  ~Spawned() {
    if (pid_ <= 0) return;
    (void)send_signal(pid_, SIGKILL);
    (void)wait_for(pid_, false);
  }
  Spawned(const Spawned&) = delete;
  Spawned& operator=(const Spawned&) = delete;
  pid_t pid() const { return pid_; }
  Result<WaitStatus> run_to_exit() {
    if (auto sent = send_signal(pid_, SIGCONT); !sent) return std::unexpected(sent.error());
    for (;;) {
      auto st = wait_for(pid_, false);
      if (!st) return st;
      if (st->kind == WaitKind::kExited || st->kind == WaitKind::kKilled) {
        pid_ = -1;
        return st;
      }
    }
  }

 private:
  pid_t pid_;
};

TEST(CheckRunnable, ARegularExecutableFileIsRunnable) {
  EXPECT_TRUE(check_runnable(program("hello")));
}

TEST(CheckRunnable, NamesTheCommandAndTheKernelsReason) {
  auto missing = check_runnable("/nonexistent/hwarb-prog");
  expect_error(missing, ErrorCode::kNoEnt, "command");
  EXPECT_NE(missing.error().message().find("'/nonexistent/hwarb-prog' cannot be run"),
            std::string::npos)
      << missing.error().message();
  expect_error(check_runnable("/"), ErrorCode::kAcces, "command");
  // Not executable: no x bit for anyone (not even for root).
  char path[] = "/tmp/hwarb_spawn_test_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  ASSERT_EQ(::chmod(path, 0644), 0);
  expect_error(check_runnable(path), ErrorCode::kAcces, "command");
  ::unlink(path);
}

TEST(InWorkingDirectory, ARegularFileHereIsItsAbsolutePathAnythingElseIsNot) {
  char dir[] = "/tmp/hwarb_cwd_test_XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  char before[4096];
  ASSERT_NE(::getcwd(before, sizeof before), nullptr);
  ASSERT_EQ(::chdir(dir), 0);
  const std::string here(dir);
  {
    std::ofstream("prog") << "not even executable";  // gdbserver takes it all the same
  }
  ASSERT_EQ(::mkdir("subdir", 0755), 0);
  ASSERT_EQ(::symlink("prog", "link"), 0);
  EXPECT_EQ(in_working_directory("prog"), here + "/prog");
  EXPECT_EQ(in_working_directory("link"), here + "/link");  // followed: a regular file
  EXPECT_EQ(in_working_directory("subdir"), std::nullopt);
  EXPECT_EQ(in_working_directory("absent"), std::nullopt);
  EXPECT_EQ(in_working_directory("./prog"), std::nullopt);  // a slash: the path as given
  EXPECT_EQ(in_working_directory(""), std::nullopt);
  ::unlink("link");
  ::unlink("prog");
  ::rmdir("subdir");
  ASSERT_EQ(::chdir(before), 0);
  ::rmdir(dir);
}

// The detached process holds no copy of the caller's descriptors once fork_detached returns:
// a pipe's write end the caller closes then is the last one (its reader sees the end at once),
// as a perf event's descriptor must be for its debug register to be free.
TEST(ForkDetached, NoCopyOfTheCallersDescriptorsOutlivesTheCall) {
  for (int round = 0; round < 20; ++round) {
    int fds[2];
    ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    auto side = fork_detached({});
    ASSERT_TRUE(side) << side.error().to_string();
    if (*side == ForkSide::kDetached) {
      const timespec nap{0, 100'000'000};
      ::nanosleep(&nap, nullptr);  // lives on a while, past the caller's check
      ::_exit(0);
    }
    ::close(fds[1]);
    pollfd in{fds[0], POLLIN, 0};
    ASSERT_EQ(::poll(&in, 1, 0), 1) << "round " << round << ": another writer is still there";
    char byte = 0;
    EXPECT_EQ(::read(fds[0], &byte, 1), 0);
    ::close(fds[0]);
  }
}

TEST(SpawnStopped, StopsBeforeTheExecThenRunsTheProgram) {
  Capture out;
  auto pid = spawn_stopped(program("hello"), {"hello"}, {.stdout_fd = out.fd()});
  ASSERT_TRUE(pid) << pid.error().to_string();
  Spawned child(*pid);
  EXPECT_EQ(proc_state(*pid), 'T');
  EXPECT_EQ(out.text(), "");
  auto st = child.run_to_exit();
  ASSERT_TRUE(st) << st.error().to_string();
  EXPECT_EQ(*st, (WaitStatus{WaitKind::kExited, 0, st->raw}));
  EXPECT_EQ(out.text(), "hello\n");
}

TEST(SpawnStopped, DisablesAddressRandomizationWhenAsked) {
  for (bool disable : {false, true}) {
    auto pid =
        spawn_stopped(program("hello"), {"hello"}, {.stdout_fd = -1, .disable_aslr = disable});
    ASSERT_TRUE(pid) << pid.error().to_string();
    Spawned child(*pid);
    EXPECT_EQ((proc_personality(*pid) & ADDR_NO_RANDOMIZE) != 0,
              disable || (proc_personality(::getpid()) & ADDR_NO_RANDOMIZE) != 0);
  }
}

// What the caller ignored for itself (ignore_signal: SIGPIPE for a server) is no action of the
// program's; a process group of its own when asked.
TEST(SpawnStopped, TheProgramGetsNeitherTheCallersIgnoredSignalsNorItsGroup) {
  struct sigaction before {};
  ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &before), 0);
  ASSERT_EQ(before.sa_handler, SIG_DFL) << "the test runs with SIGPIPE at its default";
  ASSERT_TRUE(ignore_signal(SIGPIPE));
  EXPECT_NE(signals_ignored_here() & (std::uint64_t{1} << (SIGPIPE - 1)), 0u);
  Capture out;
  auto pid = spawn_stopped("/bin/grep", {"grep", "^SigIgn", "/proc/self/status"},
                           {.stdout_fd = out.fd(), .own_process_group = true});
  ::sigaction(SIGPIPE, &before, nullptr);
  ASSERT_TRUE(pid) << pid.error().to_string();
  Spawned child(*pid);
  EXPECT_EQ(::getpgid(*pid), *pid);
  auto st = child.run_to_exit();
  ASSERT_TRUE(st) << st.error().to_string();
  const std::string text = out.text();
  ASSERT_EQ(text.rfind("SigIgn:", 0), 0u) << text;
  const std::uint64_t ignored = std::stoull(text.substr(7), nullptr, 16);
  EXPECT_EQ(ignored & (std::uint64_t{1} << (SIGPIPE - 1)), 0u) << text;
  auto shared = spawn_stopped(program("hello"), {"hello"}, {.stdout_fd = -1});
  ASSERT_TRUE(shared) << shared.error().to_string();
  Spawned other(*shared);
  EXPECT_EQ(::getpgid(*shared), ::getpgrp());
}

// gdb's `set cwd`: the program starts in the directory given, its path (relative here) still
// the caller's; a directory that is not there is the caller's error, naming `cwd`, before any
// fork.
TEST(SpawnStopped, StartsTheProgramInTheWorkingDirectoryGiven) {
  Capture out;
  auto pid =
      spawn_stopped("/bin/pwd", {"pwd"}, {.stdout_fd = out.fd(), .working_directory = "/proc"});
  ASSERT_TRUE(pid) << pid.error().to_string();
  Spawned child(*pid);
  auto st = child.run_to_exit();
  ASSERT_TRUE(st) << st.error().to_string();
  EXPECT_EQ(st->value, 0);
  EXPECT_EQ(out.text(), "/proc\n");

  for (const char* bad : {"/nonexistent/hwarb-dir", "/bin/sh"}) {
    auto refused = spawn_stopped("/bin/pwd", {"pwd"}, {.working_directory = bad});
    ASSERT_FALSE(refused) << bad;
    EXPECT_NE(refused.error().to_string().find("cwd"), std::string::npos)
        << refused.error().to_string();
  }
}

TEST(SpawnStopped, AFailedExecIsExitStatus127) {
  auto pid = spawn_stopped("/nonexistent/hwarb-prog", {"hwarb-prog"});
  ASSERT_TRUE(pid) << pid.error().to_string();
  Spawned child(*pid);
  auto st = child.run_to_exit();
  ASSERT_TRUE(st) << st.error().to_string();
  EXPECT_EQ(st->kind, WaitKind::kExited);
  EXPECT_EQ(st->value, 127);
}

TEST(SpawnStopped, CanBeSeizedAndReportsItsExec) {
  auto pid = spawn_stopped(program("hello"), {"hello"},
                           {.stdout_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC)});
  ASSERT_TRUE(pid) << pid.error().to_string();
  Spawned child(*pid);
  auto seized = ptrace_seize(*pid, PTRACE_O_TRACEEXEC);
  if (!seized && refused(seized.error())) GTEST_SKIP() << skip_reason("ptrace", seized.error());
  ASSERT_TRUE(seized) << seized.error().to_string();
  ASSERT_TRUE(send_signal(*pid, SIGCONT));
  // Job-control stops and the SIGCONT come first; then the exec stop.
  for (int i = 0; i < 16; ++i) {
    auto ev = wait_once(*pid, false);
    ASSERT_TRUE(ev) << ev.error().to_string();
    ASSERT_EQ(ev->pid, *pid);
    ASSERT_EQ(ev->status.kind, WaitKind::kStopped);
    if ((ev->status.raw >> 16) == PTRACE_EVENT_EXEC) {
      auto former = ptrace_event_message(*pid);
      ASSERT_TRUE(former) << former.error().to_string();
      EXPECT_EQ(static_cast<pid_t>(*former), *pid);
      EXPECT_TRUE(ptrace_interrupt(*pid));  // a request for seized tracees only
      return;
    }
    ASSERT_TRUE(ptrace_cont(*pid));
  }
  FAIL() << "no exec stop";
}

// The gated child's function: exits with status 7 (a raw system call, as fork_gated requires).
void exit_seven() {
  ::syscall(SYS_exit_group, 7);
}

void do_nothing() {}

Result<WaitStatus> wait_exit(pid_t pid) {
  for (;;) {
    auto st = wait_for(pid, false);
    if (!st || st->kind == WaitKind::kExited || st->kind == WaitKind::kKilled) return st;
  }
}

// A spawner that dies between the fork and the exec (hwarb killed at start-up) must not leave its
// stopped child behind: the child dies with its parent.
TEST(SpawnStopped, TheStoppedChildDiesWithItsParent) {
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const pid_t spawner = ::fork();
  ASSERT_GE(spawner, 0);
  if (spawner == 0) {
    auto child = spawn_stopped(program("hello"), {program("hello")});
    const pid_t pid = child ? *child : -1;
    (void)!::write(pipefd[1], &pid, sizeof pid);
    ::_exit(0);
  }
  ::close(pipefd[1]);
  pid_t child = -1;
  ASSERT_EQ(::read(pipefd[0], &child, sizeof child), static_cast<ssize_t>(sizeof child));
  ::close(pipefd[0]);
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(spawner, &status, 0), spawner);
  // Gone (reaped by its new parent) or a zombie within two seconds; stopped is a failure.
  std::string state = "?";
  for (int i = 0; i < 200; ++i) {
    std::ifstream stat("/proc/" + std::to_string(child) + "/stat");
    if (!stat) {
      state = "gone";
      break;
    }
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(") ");
    state = close == std::string::npos ? "?" : text.substr(close + 2, 1);
    if (state == "Z" || state == "X") break;
    ::usleep(10'000);
  }
  if (state != "gone" && state != "Z" && state != "X") ::kill(child, SIGKILL);
  EXPECT_TRUE(state == "gone" || state == "Z" || state == "X") << "child state " << state;
}

TEST(ForkGated, RunsItsFunctionOnlyAfterTheGo) {
  auto child = fork_gated(exit_seven);
  ASSERT_TRUE(child) << child.error().to_string();
  EXPECT_TRUE(child->go.valid());
  EXPECT_EQ(*wait_for(child->pid, true), WaitStatus{});  // waiting for its go
  ASSERT_TRUE(start_gated(*child));
  auto st = wait_exit(child->pid);
  ASSERT_TRUE(st) << st.error().to_string();
  EXPECT_EQ(*st, (WaitStatus{WaitKind::kExited, 7, st->raw}));
}

TEST(ForkGated, ExitsZeroAfterItsFunctionReturns) {
  auto child = fork_gated(do_nothing);
  ASSERT_TRUE(child) << child.error().to_string();
  ASSERT_TRUE(start_gated(*child));
  auto st = wait_exit(child->pid);
  ASSERT_TRUE(st) << st.error().to_string();
  EXPECT_EQ(st->kind, WaitKind::kExited);
  EXPECT_EQ(st->value, 0);
}

TEST(ForkGated, AClosedGoPipeEndsTheChildUnstarted) {
  auto child = fork_gated(exit_seven);
  ASSERT_TRUE(child) << child.error().to_string();
  child->go.reset();
  auto st = wait_exit(child->pid);
  ASSERT_TRUE(st) << st.error().to_string();
  EXPECT_EQ(st->kind, WaitKind::kExited);
  EXPECT_EQ(st->value, kGatedNotStarted);
  // The go pipe is closed: there is nothing to write the byte to (EBADF).
  expect_error(start_gated(*child), ErrorCode::kIo, "pipe");
}

// run_as_user's child: 0 when every id is 65534 and the only group is 65534, else which is not
// (1 uids, 2 gids, 4 groups).
int ids_dropped(const void*) {
  uid_t r = 0, e = 0, s = 0;
  gid_t gr = 0, ge = 0, gs = 0;
  gid_t groups[4] = {};
  const int n = ::getgroups(4, groups);
  int bad = 0;
  if (::getresuid(&r, &e, &s) != 0 || r != 65534 || e != 65534 || s != 65534) bad |= 1;
  if (::getresgid(&gr, &ge, &gs) != 0 || gr != 65534 || ge != 65534 || gs != 65534) bad |= 2;
  if (n != 1 || groups[0] != 65534) bad |= 4;
  return bad;
}

// run_as_user's child: the errno with which it may not set perf_event_paranoid (0: it could).
int paranoid_refused(const void* value) {
  auto r = set_perf_event_paranoid(*static_cast<const int*>(value));
  return r ? 0 : static_cast<int>(r.error().code());
}

TEST(RunAsUser, TheChildRunsWithEveryIdDroppedAndItsAnswerComesBack) {
  auto as_nobody = run_as_user(65534, 65534, ids_dropped, nullptr);
  if (!as_nobody) {
    // Only root may drop to another user: anyone else gets EPERM naming uid.
    expect_error(as_nobody, ErrorCode::kPerm, "uid");
    GTEST_SKIP() << "needs root: " << as_nobody.error().to_string();
  }
  EXPECT_EQ(*as_nobody, 0);
  // No privilege is left: root's sysctl is refused, and the value stays.
  const std::optional<int> before = perf_event_paranoid();
  ASSERT_TRUE(before);
  const int other = *before == 1 ? 2 : 1;
  auto refused_errno = run_as_user(65534, 65534, paranoid_refused, &other);
  ASSERT_TRUE(refused_errno) << refused_errno.error().to_string();
  EXPECT_EQ(*refused_errno, EACCES);
  EXPECT_EQ(perf_event_paranoid(), before);
}

TEST(PerfEventParanoid, RootSetsItAndReadsItBack) {
  const std::optional<int> before = perf_event_paranoid();
  ASSERT_TRUE(before);
  auto same = set_perf_event_paranoid(*before);
  if (!same) {
    expect_error(same, same.error().code(), "perf_event_paranoid");
    GTEST_SKIP() << "needs root: " << same.error().to_string();
  }
  EXPECT_EQ(perf_event_paranoid(), before);
  const int other = *before == 1 ? 2 : 1;
  ASSERT_TRUE(set_perf_event_paranoid(other));
  EXPECT_EQ(perf_event_paranoid(), other);
  ASSERT_TRUE(set_perf_event_paranoid(*before));
  EXPECT_EQ(perf_event_paranoid(), before);
}

}  // namespace
}  // namespace hwarb::native
