// Tests of the signal actions of a traced process set from outside and of the parachute, on a
// real program (tests/programs/ticker).
#include "hwarb/linux/signal_action.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "test_programs.h"

namespace hwarb::native {
namespace {

using testing::Capture;
using testing::program;

// The ticker spawned and run to its first nanosleep (its C library loaded), stopped there.
Result<Inferior> ticker_in_its_loop(int stdout_fd) {
  auto inf = Inferior::spawn({program("ticker"), "/dev/null", "20"}, {.stdout_fd = stdout_fd});
  if (!inf) return inf;
  if (auto r = inf->resume(inf->pid(), Resume::kSyscall); !r) return std::unexpected(r.error());
  for (;;) {
    auto ev = inf->wait();
    if (!ev) return std::unexpected(ev.error());
    if (ev->kind == EventKind::kSyscallEnter && ev->syscall == SYS_clock_nanosleep) return inf;
    if (auto r = inf->resume(ev->tid, Resume::kSyscall); !r) return std::unexpected(r.error());
  }
}

TEST(SignalAction, ActionsAreReadAndSetFromOutside) {
  auto inf = ticker_in_its_loop(::open("/dev/null", O_WRONLY));
  ASSERT_TRUE(inf) << inf.error().to_string();
  const pid_t tid = inf->pid();
  auto before = inject_sigaction(*inf, tid, SIGUSR1, nullptr);
  ASSERT_TRUE(before) << before.error().to_string();
  EXPECT_EQ(before->handler, kSigDflHandler);
  KernelSigaction ignore;
  ignore.handler = kSigIgnHandler;
  auto old = inject_sigaction(*inf, tid, SIGUSR1, &ignore);
  ASSERT_TRUE(old) << old.error().to_string();
  EXPECT_EQ(*old, *before);
  auto now = inject_sigaction(*inf, tid, SIGUSR1, nullptr);
  ASSERT_TRUE(now) << now.error().to_string();
  EXPECT_EQ(now->handler, kSigIgnHandler);
  // SIGKILL's action cannot be set: the kernel's EINVAL, named after the signal.
  auto refused = inject_sigaction(*inf, tid, SIGKILL, &ignore);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code(), ErrorCode::kInval);
  EXPECT_NE(refused.error().message().find("rt_sigaction(9)"), std::string::npos)
      << refused.error().to_string();
  EXPECT_TRUE(inf->kill());
}

TEST(SignalAction, TheParachuteIsARetAndTheLibrarysSigreturn) {
  auto inf = ticker_in_its_loop(::open("/dev/null", O_WRONLY));
  ASSERT_TRUE(inf) << inf.error().to_string();
  auto act = parachute_action(*inf, inf->pid());
  ASSERT_TRUE(act) << act.error().to_string();
  std::array<std::uint8_t, 1> ret{};
  ASSERT_TRUE(inf->read_memory(act->handler, ret));
  EXPECT_EQ(ret[0], 0xc3);
  std::array<std::uint8_t, 9> restorer{};
  ASSERT_TRUE(inf->read_memory(act->restorer, restorer));
  const std::array<std::uint8_t, 9> glibc = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};
  EXPECT_EQ(restorer, glibc);
  EXPECT_NE(act->flags & SA_NODEFER, 0u);
  EXPECT_TRUE(inf->kill());
}

// A SIGTRAP delivered to the parachute returns at once: the program runs on to its normal end;
// without it, the default action kills it.
TEST(SignalAction, ASignalToTheParachuteIsSurvived) {
  for (bool parachute : {true, false}) {
    Capture out;
    auto inf = ticker_in_its_loop(out.fd());
    ASSERT_TRUE(inf) << inf.error().to_string();
    const pid_t tid = inf->pid();
    if (parachute) {
      auto act = parachute_action(*inf, tid);
      ASSERT_TRUE(act) << act.error().to_string();
      ASSERT_TRUE(inject_sigaction(*inf, tid, SIGTRAP, &*act));
    }
    ASSERT_TRUE(inf->resume(tid, Resume::kCont, SIGTRAP));
    Event end;
    for (;;) {
      auto ev = inf->wait();
      ASSERT_TRUE(ev) << ev.error().to_string();
      if (ev->kind == EventKind::kExited || ev->kind == EventKind::kKilled) {
        end = *ev;
        break;
      }
      const int sig = ev->kind == EventKind::kSignal ? ev->signal : 0;
      ASSERT_TRUE(inf->resume(ev->tid, Resume::kCont, sig));
    }
    if (parachute) {
      EXPECT_EQ(end.kind, EventKind::kExited);
      EXPECT_EQ(end.status, 0);
      EXPECT_EQ(out.text(), "ticks=20\n");
    } else {
      EXPECT_EQ(end.kind, EventKind::kKilled);
      EXPECT_EQ(end.signal, SIGTRAP);
    }
  }
}

}  // namespace
}  // namespace hwarb::native
