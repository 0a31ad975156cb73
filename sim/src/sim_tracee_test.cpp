#include "hwarb/sim/sim_tracee.h"

#include <gtest/gtest.h>

#include <csignal>
#include <memory>

#include "hwarb/x86/debugreg.h"

namespace hwarb::sim {
namespace {

using ptrace_compat::Stop;
using ptrace_compat::UserLayout;
using ptrace_compat::WaitMode;

constexpr std::uint64_t kDr6Fresh = 0xffff0ff0;
const CpuId kCpu0(0);

struct Fixture {
  std::unique_ptr<System> sys;
  TaskId task;
  explicit Fixture(breakpoints::Arch arch = breakpoints::Arch::kX86_64) {
    SystemConfig c;
    c.arch = arch;
    sys = std::move(*System::create(c));
    task = *sys->machine().create_task();
    EXPECT_TRUE(sys->machine().switch_to(kCpu0, task));
  }
  Result<Outcome> write(std::uint64_t addr, int size = 4, std::uint64_t value = 1) {
    return sys->machine().access(kCpu0, task, AccessKind::kWrite, addr, size, value);
  }
};

std::optional<Stop> stop_of(SimTracee& t) {
  auto w = t.wait();
  EXPECT_TRUE(w) << w.error().to_string();
  return w ? *w : std::nullopt;
}

// DR0 at addr, slot 0 enabled as w/len 4 through the tracee.
void watch_write(SimTracee& t, std::uint64_t addr) {
  ASSERT_TRUE(t.poke_debugreg(0, addr));
  ASSERT_TRUE(t.poke_debugreg(7, x86::dr7::local_bit(0) | (std::uint64_t{0b1101} << 16)));
}

TEST(SimTracee, AttachStopsWithSigstopAndPokesNeedAStop) {
  Fixture f;
  auto t = SimTracee::attach(*f.sys, f.task);
  ASSERT_TRUE(t);
  EXPECT_EQ(stop_of(*t), (Stop{SIGSTOP, kDr6Fresh}));
  // A stopped task does no work.
  auto busy = f.write(0x1000);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code(), ErrorCode::kBusy);
  ASSERT_TRUE(t->poke_debugreg(0, 0x1000));
  ASSERT_TRUE(t->cont());
  EXPECT_EQ(stop_of(*t), std::nullopt);
  // Running: PEEKUSER/POKEUSER are ESRCH, as Linux; a blocking wait cannot succeed here.
  auto peek = t->peek_debugreg(0);
  ASSERT_FALSE(peek);
  EXPECT_EQ(peek.error().code(), ErrorCode::kSrch);
  EXPECT_EQ(t->poke_debugreg(0, 0x2000).error().code(), ErrorCode::kSrch);
  EXPECT_EQ(t->wait(WaitMode::kBlock).error().code(), ErrorCode::kAgain);
  EXPECT_EQ(t->cont().error().code(), ErrorCode::kSrch);
  EXPECT_TRUE(f.write(0x1000));  // the placeholder is disabled: no stop
  EXPECT_EQ(stop_of(*t), std::nullopt);
  // A second tracer is EPERM.
  auto again = SimTracee::attach(*f.sys, f.task);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code(), ErrorCode::kPerm);
}

TEST(SimTracee, HitStopsWithTheSlotsTrapBit) {
  Fixture f;
  auto t = SimTracee::attach(*f.sys, f.task);
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->poke_debugreg(2, 0x2000));
  ASSERT_TRUE(t->poke_debugreg(7, x86::dr7::local_bit(2) | (std::uint64_t{0b1111} << 24)));
  ASSERT_TRUE(t->cont());
  EXPECT_TRUE(f.write(0x3000));
  EXPECT_EQ(stop_of(*t), std::nullopt);
  auto out = f.write(0x2002, 2);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->new_value, 1u);  // a trap: the write happened
  EXPECT_EQ(stop_of(*t), (Stop{SIGTRAP, kDr6Fresh | x86::dr6::trap_bit(2)}));
  EXPECT_EQ(*t->peek_debugreg(6), kDr6Fresh | 0x4);
  EXPECT_EQ(f.write(0x2000).error().code(), ErrorCode::kBusy);
  // The debugger clears DR6 and continues; the next hit sets the bit again.
  ASSERT_TRUE(t->poke_debugreg(6, kDr6Fresh));
  ASSERT_TRUE(t->cont());
  ASSERT_TRUE(f.sys->machine().access(kCpu0, f.task, AccessKind::kRead, 0x2000, 8));
  EXPECT_EQ(stop_of(*t), (Stop{SIGTRAP, kDr6Fresh | 0x4}));
}

TEST(SimTracee, StepStopsAfterOneInstructionWithBs) {
  Fixture f;
  auto t = SimTracee::attach(*f.sys, f.task);
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->step());
  EXPECT_TRUE(f.write(0x5000));
  EXPECT_EQ(stop_of(*t), (Stop{SIGTRAP, kDr6Fresh | x86::dr6::kSingleStep}));
  ASSERT_TRUE(t->step());
  EXPECT_TRUE(f.sys->machine().exec(kCpu0, f.task, 0x401000));
  EXPECT_EQ(stop_of(*t), (Stop{SIGTRAP, kDr6Fresh | x86::dr6::kSingleStep}));
  // cont stops single-stepping.
  ASSERT_TRUE(t->cont());
  EXPECT_TRUE(f.write(0x5000));
  EXPECT_EQ(stop_of(*t), std::nullopt);
}

TEST(SimTracee, StepAndWatchpointInOneAccessReportBothBits) {
  Fixture f;
  auto t = SimTracee::attach(*f.sys, f.task);
  ASSERT_TRUE(t);
  watch_write(*t, 0x1000);
  ASSERT_TRUE(t->step());
  EXPECT_TRUE(f.write(0x1000));
  EXPECT_EQ(stop_of(*t), (Stop{SIGTRAP, kDr6Fresh | x86::dr6::kSingleStep | 0x1}));
}

TEST(SimTracee, ExecuteFaultThenStepTrapAreTwoStops) {
  Fixture f;
  auto t = SimTracee::attach(*f.sys, f.task);
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->poke_debugreg(1, 0x401000));
  ASSERT_TRUE(t->poke_debugreg(7, x86::dr7::local_bit(1)));  // execute, LEN 00
  ASSERT_TRUE(t->step());
  ASSERT_TRUE(f.sys->machine().exec(kCpu0, f.task, 0x401000));
  // First the fault (before the instruction), with B1 only...
  EXPECT_EQ(stop_of(*t), (Stop{SIGTRAP, kDr6Fresh | 0x2}));
  ASSERT_TRUE(t->step());
  // ... then, once resumed, the single-step trap after it, with BS only.
  EXPECT_EQ(stop_of(*t), (Stop{SIGTRAP, kDr6Fresh | x86::dr6::kSingleStep}));
  ASSERT_TRUE(t->cont());
  EXPECT_EQ(stop_of(*t), std::nullopt);
  // cont from the fault's stop turns single-stepping off before the instruction runs: no
  // single-step trap follows.
  ASSERT_TRUE(f.sys->machine().exec(kCpu0, f.task, 0x401000));
  EXPECT_EQ(stop_of(*t), (Stop{SIGTRAP, kDr6Fresh | 0x2}));  // not stepping: the fault alone
  ASSERT_TRUE(t->step());
  ASSERT_TRUE(f.sys->machine().exec(kCpu0, f.task, 0x401000));
  EXPECT_EQ(stop_of(*t), (Stop{SIGTRAP, kDr6Fresh | 0x2}));
  ASSERT_TRUE(t->cont());
  EXPECT_EQ(stop_of(*t), std::nullopt);
}

TEST(SimTracee, PerfOnlyHitDoesNotStopButResetsVirtualDr6) {
  Fixture f;
  auto t = SimTracee::attach(*f.sys, f.task);
  ASSERT_TRUE(t);
  int perf_hits = 0;
  auto perf = f.sys->breakpoints().register_user_hw_breakpoint(
      breakpoints::breakpoint_attr(0x7000, 4, pmu::BpType::kW),
      [&](pmu::Event&, const pmu::Sample&) { ++perf_hits; }, f.task);
  ASSERT_TRUE(perf);
  ASSERT_TRUE(t->poke_debugreg(6, 0x1234));
  ASSERT_TRUE(t->cont());
  ASSERT_TRUE(f.write(0x7000));
  EXPECT_EQ(perf_hits, 1);
  EXPECT_EQ(stop_of(*t), std::nullopt);
  ASSERT_TRUE(f.sys->ptrace_wait(f.task, WaitMode::kNoHang));
  // Linux's exc_debug_user restarts the virtual DR6 on every user-mode #DB.
  EXPECT_EQ(*f.sys->ptrace().get_debugreg(f.task, 6), kDr6Fresh);
}

TEST(SimTracee, ExitEndsTracingAndFlushes) {
  Fixture f;
  auto t = SimTracee::attach(*f.sys, f.task);
  ASSERT_TRUE(t);
  watch_write(*t, 0x1000);
  EXPECT_TRUE(f.sys->breakpoints().is_used());
  ASSERT_TRUE(f.sys->machine().exit(f.task));
  EXPECT_FALSE(f.sys->breakpoints().is_used());
  // The exit is wait's normal outcome (the machine has no exit codes: status 0), reported once;
  // then the task is no such task.
  EXPECT_EQ(t->peek_debugreg(0).error().code(), ErrorCode::kSrch);
  EXPECT_EQ(stop_of(*t), Stop::exited(0));
  EXPECT_EQ(t->wait().error().code(), ErrorCode::kSrch);
  EXPECT_EQ(t->wait(WaitMode::kBlock).error().code(), ErrorCode::kSrch);
  EXPECT_EQ(t->cont().error().code(), ErrorCode::kSrch);
}

TEST(SimTracee, ARunningTraceeThatExitsIsReportedByABlockingWait) {
  Fixture f;
  auto t = SimTracee::attach(*f.sys, f.task);
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->cont());
  ASSERT_TRUE(f.sys->machine().exit(f.task));
  auto w = t->wait(WaitMode::kBlock);
  ASSERT_TRUE(w) << w.error().to_string();
  EXPECT_EQ(*w, Stop::exited(0));
  EXPECT_TRUE((*w)->ended());
  EXPECT_EQ((*w)->kind, ptrace_compat::StopKind::kExited);
  // A tracer that goes without waiting forgets the exit: a new tracer of another task is clean.
  auto other = *f.sys->machine().create_task();
  {
    auto u = SimTracee::attach(*f.sys, other);
    ASSERT_TRUE(u);
    ASSERT_TRUE(u->cont());
    ASSERT_TRUE(f.sys->machine().exit(other));
  }
  EXPECT_EQ(f.sys->ptrace_wait(other, WaitMode::kNoHang).error().code(), ErrorCode::kSrch);
}

TEST(SimTracee, DetachKeepsBreakpointsButNoLongerStops) {
  Fixture f;
  auto t = SimTracee::attach(*f.sys, f.task);
  ASSERT_TRUE(t);
  watch_write(*t, 0x1000);
  ASSERT_TRUE(t->step());
  // Detach needs a stop.
  EXPECT_EQ(t->detach().error().code(), ErrorCode::kSrch);
  ASSERT_TRUE(f.write(0x2000));  // the step stop
  ASSERT_TRUE(t->detach());
  EXPECT_EQ(t->wait().error().code(), ErrorCode::kSrch);
  EXPECT_TRUE(f.sys->breakpoints().is_used());
  EXPECT_TRUE(f.write(0x1000));  // hits, but nobody stops it; single-step is off
  EXPECT_TRUE(f.write(0x2000));
  EXPECT_EQ(*f.sys->ptrace().get_debugreg(f.task, 6), kDr6Fresh | 0x1);
}

TEST(SimTracee, DestroyingTheTracerReleasesARunningTracee) {
  Fixture f;
  {
    auto t = SimTracee::attach(*f.sys, f.task);
    ASSERT_TRUE(t);
    watch_write(*t, 0x1000);
    ASSERT_TRUE(t->cont());
    SimTracee moved = std::move(*t);
    EXPECT_EQ(t->wait().error().code(), ErrorCode::kSrch);  // moved from
    EXPECT_TRUE(f.write(0x1000));
    EXPECT_EQ(stop_of(moved)->signal, SIGTRAP);
  }
  EXPECT_FALSE(f.sys->ptrace_traced(f.task));
  EXPECT_TRUE(f.write(0x1000));
  EXPECT_TRUE(SimTracee::attach(*f.sys, f.task));
}

TEST(SimTracee, LayoutMustFitTheMachine) {
  Fixture f(breakpoints::Arch::kI386);
  auto bad = SimTracee::attach(*f.sys, f.task, UserLayout::kX86_64);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(bad.error().message().starts_with("layout"));
  EXPECT_FALSE(f.sys->ptrace_traced(f.task));
  auto t = SimTracee::attach(*f.sys, f.task, UserLayout::kI386);
  ASSERT_TRUE(t);
  ASSERT_TRUE(t->poke_debugreg(0, 0x1000));
  // i386: LEN 10 (8 bytes) does not exist.
  auto r = t->poke_debugreg(7, x86::dr7::local_bit(0) | (std::uint64_t{0b1001} << 16));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  ASSERT_TRUE(t->poke_debugreg(7, x86::dr7::local_bit(0) | (std::uint64_t{0b1101} << 16)));
  ASSERT_TRUE(t->cont());
  ASSERT_TRUE(f.write(0x1000));
  EXPECT_EQ(stop_of(*t), (Stop{SIGTRAP, kDr6Fresh | 0x1}));
}

TEST(SimTracee, UnknownTask) {
  Fixture f;
  auto t = SimTracee::attach(*f.sys, TaskId(42));
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().code(), ErrorCode::kSrch);
}

}  // namespace
}  // namespace hwarb::sim
