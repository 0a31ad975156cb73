#include "hwarb/linux/breakpoint_requests.h"

#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

#include "hwarb/linux/syscalls.h"

namespace hwarb::native {
namespace {

TEST(RequestFilterImage, IsASockFprogFollowedByItsInstructions) {
  constexpr std::uint64_t kAt = 0x7ffc0000;
  const std::vector<std::uint8_t> image = request_filter_image(kAt);
  ASSERT_GT(image.size(), 16U);
  ASSERT_EQ((image.size() - 16) % 8, 0U);
  std::uint16_t count = 0;
  std::uint64_t instructions = 0;
  std::memcpy(&count, image.data(), sizeof count);
  std::memcpy(&instructions, image.data() + 8, sizeof instructions);
  EXPECT_EQ(count, (image.size() - 16) / 8);
  EXPECT_EQ(instructions, kAt + 16);
}

TEST(DebugRegisterOffset, IsStructUserUDebugreg) {
  EXPECT_EQ(debug_register_offset(0), 848U);
  EXPECT_EQ(debug_register_offset(7), 848U + 7 * 8);
}

// What the child makes of each call once the filter is on: the errno (0: success), written to
// the pipe — never ENOSYS while a listener answers.
struct ChildCalls {
  int perf = 0;  // perf_event_open of a write breakpoint on itself
  int poke = 0;  // ptrace(PTRACE_POKEUSER) of DR7 on a process it does not trace (ESRCH)
  int peek = 0;  // ptrace(PTRACE_PEEKUSER): not held by the filter
};

volatile long watched_by_child;

// Forks a child that installs the request filter on itself (no_new_privs first: an unprivileged
// test process may), sends the listener's number, waits for a byte, makes the three calls and
// sends their errnos. The child's pid; `to_child`/`from_child` the pipes' ends kept here.
pid_t fork_filtered_child(int& to_child, int& from_child, int& listener_number) {
  int down[2], up[2];
  if (::pipe(down) != 0 || ::pipe(up) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(down[1]);
    ::close(up[0]);
    // The image names its own address: built for the buffer it is copied into.
    std::vector<std::uint8_t> buffer(request_filter_image(0).size());
    const std::vector<std::uint8_t> image =
        request_filter_image(reinterpret_cast<std::uint64_t>(buffer.data()));
    std::memcpy(buffer.data(), image.data(), image.size());
    ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    const long fd =
        ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, request_filter_flags(), buffer.data());
    const int number = fd < 0 ? -errno : static_cast<int>(fd);
    if (::write(up[1], &number, sizeof number) != sizeof number) ::_exit(2);
    char go = 0;
    if (::read(down[0], &go, 1) != 1) ::_exit(3);
    ChildCalls calls;
    perf_event_attr attr;
    std::memset(&attr, 0, sizeof attr);
    attr.type = PERF_TYPE_BREAKPOINT;
    attr.size = sizeof attr;
    attr.bp_type = HW_BREAKPOINT_W;
    attr.bp_addr = reinterpret_cast<std::uint64_t>(&watched_by_child);
    attr.bp_len = HW_BREAKPOINT_LEN_8;
    attr.exclude_kernel = 1;
    errno = 0;
    calls.perf = ::syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0) < 0 ? errno : 0;
    errno = 0;
    calls.poke = ::ptrace(PTRACE_POKEUSER, 1, debug_register_offset(7), 1) < 0 ? errno : 0;
    errno = 0;
    ::ptrace(PTRACE_PEEKUSER, 1, debug_register_offset(7), 0);
    calls.peek = errno;
    if (::write(up[1], &calls, sizeof calls) != sizeof calls) ::_exit(4);
    ::_exit(0);
  }
  ::close(down[0]);
  ::close(up[1]);
  to_child = down[1];
  from_child = up[0];
  if (::read(from_child, &listener_number, sizeof listener_number) != sizeof listener_number) {
    return -1;
  }
  return pid;
}

bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN) != 0;
}

// A filtered child and the listener taken from it; the child is reaped (exit 0 expected) and the
// pipes closed at the end.
struct FilteredChild {
  pid_t pid = -1;
  int to_child = -1;
  int from_child = -1;
  Fd listener;

  void start() {
    int number = -1;
    pid = fork_filtered_child(to_child, from_child, number);
    ASSERT_GT(pid, 0);
    ASSERT_GE(number, 0) << "seccomp refused the filter: errno " << -number;
    auto taken = take_descriptor(pid, number);
    ASSERT_TRUE(taken) << taken.error().to_string();
    listener = std::move(*taken);
  }
  ChildCalls calls() const {
    ChildCalls c;
    EXPECT_EQ(::read(from_child, &c, sizeof c), static_cast<ssize_t>(sizeof c));
    return c;
  }
  ~FilteredChild() {
    // Closed first: a child still waiting for its go byte ends (status 3) instead of hanging.
    if (to_child >= 0) ::close(to_child);
    listener.reset();
    if (pid > 0) {
      int status = 0;
      EXPECT_EQ(::waitpid(pid, &status, 0), pid);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    }
    if (from_child >= 0) ::close(from_child);
  }
};

TEST(BreakpointRequests, TheListenerSeesPerfAndDebugRegisterCallsAndLetsThemRun) {
  FilteredChild child;
  ASSERT_NO_FATAL_FAILURE(child.start());
  const pid_t pid = child.pid;
  Fd& listener = child.listener;
  ASSERT_EQ(::write(child.to_child, "g", 1), 1);

  // 1. perf_event_open: held, seen as such, let run.
  ASSERT_TRUE(readable(listener.get(), 10000));
  auto perf = receive_request(listener.get());
  ASSERT_TRUE(perf) << perf.error().to_string();
  EXPECT_EQ(perf->kind, RequestKind::kPerfEvent);
  EXPECT_EQ(perf->tid, pid);
  EXPECT_EQ(perf->args[1], 0U);
  EXPECT_TRUE(request_valid(listener.get(), perf->id));
  ASSERT_TRUE(continue_request(listener.get(), perf->id));
  // 2. ptrace(POKEUSER, DR7): held too.
  ASSERT_TRUE(readable(listener.get(), 10000));
  auto poke = receive_request(listener.get());
  ASSERT_TRUE(poke) << poke.error().to_string();
  EXPECT_EQ(poke->kind, RequestKind::kPokeDebugReg);
  EXPECT_EQ(poke->args[2], debug_register_offset(7));
  ASSERT_TRUE(continue_request(listener.get(), poke->id));
  // 3. PEEKUSER passes the filter: nothing more is held.
  const ChildCalls calls = child.calls();
  EXPECT_FALSE(readable(listener.get(), 0));
  EXPECT_NE(calls.perf, ENOSYS);
  EXPECT_EQ(calls.poke, ESRCH);  // the kernel's own answer: pid 1 is not the child's tracee
  EXPECT_EQ(calls.peek, ESRCH);
}

TEST(BreakpointRequests, TheContinuerServesOnceTheGateCloses) {
  FilteredChild child;
  ASSERT_NO_FATAL_FAILURE(child.start());
  auto gate = start_continuer(child.listener.get());
  ASSERT_TRUE(gate) << gate.error().to_string();
  // The continuer does not answer while the gate is open: the call waits.
  ASSERT_EQ(::write(child.to_child, "g", 1), 1);
  ASSERT_TRUE(readable(child.listener.get(), 10000));
  EXPECT_FALSE(readable(child.from_child, 200));
  // Closed (as hwarb's end or death closes it): every held call runs as the kernel answers it.
  gate->reset();
  child.listener.reset();
  ASSERT_TRUE(readable(child.from_child, 10000));
  const ChildCalls calls = child.calls();
  EXPECT_NE(calls.perf, ENOSYS);
  EXPECT_EQ(calls.poke, ESRCH);
}

TEST(BreakpointRequests, TakeDescriptorNamesTheField) {
  auto r = take_descriptor(::getpid(), 1 << 20);
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().message().starts_with("fd")) << r.error().to_string();
}

}  // namespace
}  // namespace hwarb::native
