#include <gtest/gtest.h>

#include "hwarb/sim/machine.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::sim {
namespace {

using x86::DrLen;
using x86::DrType;

struct Counter final : DebugExceptionHandler {
  int n = 0;
  void on_debug_exception(const DebugException&) override { ++n; }
};

struct Fixture {
  std::unique_ptr<Machine> m = std::move(*Machine::create(2));
  TaskId t = *m->create_task();
  CpuId cpu{0};
  Counter host;
  Fixture() {
    EXPECT_TRUE(m->set_debug_handler(&host));
    EXPECT_TRUE(m->switch_to(cpu, t));
    // The host's write breakpoint at 0x1000 in DR0.
    EXPECT_TRUE(m->set_debug_address(cpu, 0, 0x1000));
    EXPECT_TRUE(m->set_dr7(cpu, x86::dr7::install(0, 0, DrType::kWrite, DrLen::k4)));
  }
};

DebugRegisters guest_regs() {
  DebugRegisters g;
  g.dr[1] = 0x2000;
  g.dr[2] = 0x3000;
  g.dr7 = x86::dr7::install(x86::dr7::install(0, 1, DrType::kReadWrite, DrLen::k8), 2,
                            DrType::kExecute, DrLen::k1);
  return g;
}

TEST(MachineGuest, EnterLoadsTheGuestRegistersAndGuestAccessesHitOnlyThem) {
  Fixture f;
  ASSERT_TRUE(f.m->enter_guest(f.cpu, guest_regs()));
  EXPECT_TRUE(*f.m->in_guest(f.cpu));
  EXPECT_EQ(*f.m->debug_registers(f.cpu), guest_regs());
  // The host's address: no guest slot there.
  EXPECT_EQ(*f.m->guest_access(f.cpu, AccessKind::kWrite, 0x1000, 4), 0u);
  EXPECT_EQ(*f.m->guest_access(f.cpu, AccessKind::kRead, 0x2007, 1), x86::dr6::trap_bit(1));
  EXPECT_EQ(*f.m->guest_access(f.cpu, AccessKind::kExec, 0x3000, 0), x86::dr6::trap_bit(2));
  EXPECT_EQ(*f.m->guest_access(f.cpu, AccessKind::kRead, 0x3000, 4), 0u);  // exec slot
  EXPECT_EQ(*f.m->dr6(f.cpu), x86::dr6::trap_bit(1) | x86::dr6::trap_bit(2));
  EXPECT_EQ(f.host.n, 0);
  EXPECT_EQ(f.m->now(), 0u);
}

TEST(MachineGuest, ExitReturnsTheGuestStateAndLeavesDr7DisabledAsVmx) {
  Fixture f;
  ASSERT_TRUE(f.m->enter_guest(f.cpu, guest_regs()));
  ASSERT_TRUE(f.m->guest_access(f.cpu, AccessKind::kWrite, 0x2000, 2));
  auto left = f.m->exit_guest(f.cpu);
  ASSERT_TRUE(left);
  DebugRegisters expected = guest_regs();
  expected.dr6 = x86::dr6::trap_bit(1);
  EXPECT_EQ(*left, expected);
  EXPECT_FALSE(*f.m->in_guest(f.cpu));
  EXPECT_EQ(*f.m->dr7(f.cpu), kVmExitDr7);
  EXPECT_EQ(*f.m->debug_address(f.cpu, 1), 0x2000u);
  // Nothing hits until the host restores: neither its breakpoint nor the guest's.
  ASSERT_TRUE(f.m->access(f.cpu, f.t, AccessKind::kWrite, 0x1000, 4, 1));
  ASSERT_TRUE(f.m->access(f.cpu, f.t, AccessKind::kWrite, 0x2000, 4, 1));
  EXPECT_EQ(f.host.n, 0);
}

TEST(MachineGuest, EnterErrorsChangeNothing) {
  Fixture f;
  const DebugRegisters host = *f.m->debug_registers(f.cpu);
  DebugRegisters bad = guest_regs();
  bad.dr7 |= std::uint64_t{1} << 40;
  auto r = f.m->enter_guest(f.cpu, bad);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_NE(r.error().message().find("dr7"), std::string::npos);
  r = f.m->enter_guest(CpuId(1), guest_regs());  // idle
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_NE(r.error().message().find("cpu: 1 is idle"), std::string::npos);
  r = f.m->enter_guest(CpuId(2), guest_regs());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_EQ(*f.m->debug_registers(f.cpu), host);
  EXPECT_FALSE(*f.m->in_guest(f.cpu));
  ASSERT_TRUE(f.m->enter_guest(f.cpu, guest_regs()));
  r = f.m->enter_guest(f.cpu, DebugRegisters{});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kBusy);
  EXPECT_EQ(*f.m->debug_registers(f.cpu), guest_regs());
}

TEST(MachineGuest, ExitAndAccessOutsideAGuestAreEinval) {
  Fixture f;
  auto e = f.m->exit_guest(f.cpu);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code(), ErrorCode::kInval);
  EXPECT_NE(e.error().message().find("not in a guest"), std::string::npos);
  auto a = f.m->guest_access(f.cpu, AccessKind::kRead, 0x1000, 4);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code(), ErrorCode::kInval);
  ASSERT_TRUE(f.m->enter_guest(f.cpu, guest_regs()));
  a = f.m->guest_access(f.cpu, AccessKind::kRead, 0x1000, 3);
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message().find("size"), std::string::npos);
  a = f.m->guest_access(f.cpu, AccessKind::kRead, ~std::uint64_t{0}, 2);
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message().find("wraps"), std::string::npos);
  EXPECT_EQ(*f.m->dr6(f.cpu), 0u);
}

TEST(MachineGuest, HostWorkOnTheGuestCpuIsBusyOtherCpusRun) {
  Fixture f;
  TaskId u = *f.m->create_task();
  ASSERT_TRUE(f.m->switch_to(CpuId(1), u));
  ASSERT_TRUE(f.m->enter_guest(f.cpu, guest_regs()));
  const auto busy = [](const Result<void>& r) {
    return !r && r.error().code() == ErrorCode::kBusy &&
           r.error().message().find("cpu: 0 is running a guest") != std::string::npos;
  };
  EXPECT_TRUE(busy(f.m->switch_to_idle(f.cpu)));
  EXPECT_TRUE(busy(f.m->switch_to(f.cpu, *f.m->create_task())));
  EXPECT_TRUE(busy(f.m->exit(f.t)));
  auto a = f.m->access(f.cpu, f.t, AccessKind::kWrite, 0x1000, 4, 1);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code(), ErrorCode::kBusy);
  auto x = f.m->exec(f.cpu, f.t, 0x4000);
  ASSERT_FALSE(x);
  EXPECT_EQ(x.error().code(), ErrorCode::kBusy);
  EXPECT_FALSE(f.m->branch(f.cpu, f.t, 0x1, 0x2));
  EXPECT_TRUE(f.m->tick(f.cpu));
  EXPECT_EQ(*f.m->current(f.cpu), f.t);
  // CPU 1 runs its host task as usual.
  ASSERT_TRUE(f.m->set_debug_address(CpuId(1), 0, 0x5000));
  ASSERT_TRUE(f.m->set_dr7(CpuId(1), x86::dr7::install(0, 0, DrType::kWrite, DrLen::k1)));
  ASSERT_TRUE(f.m->access(CpuId(1), u, AccessKind::kWrite, 0x5000, 1, 1));
  EXPECT_EQ(f.host.n, 1);
  ASSERT_TRUE(f.m->exit_guest(f.cpu));
  EXPECT_TRUE(f.m->switch_to_idle(f.cpu));
  EXPECT_TRUE(f.m->exit(f.t));
}

}  // namespace
}  // namespace hwarb::sim
