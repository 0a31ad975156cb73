#include <gtest/gtest.h>

#include <vector>

#include "hwarb/sim/system.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::sim {
namespace {

using breakpoints::breakpoint_attr;
using pmu::BpType;
using x86::DrLen;
using x86::DrType;

std::unique_ptr<System> make(breakpoints::Arch arch = breakpoints::Arch::kX86_64) {
  auto s = System::create({2, arch, arbiter::FlexiblePolicy::kMultiplexed});
  EXPECT_TRUE(s.has_value());
  return std::move(*s);
}

// One host breakpoint of each kind on CPU 0 while task t runs there: ptrace (DR7 of t written
// through the emulation, so t has TIF_DEBUG) at 0x1000, perf task at 0x2000, perf CPU at 0x3000,
// wide at 0x4000; all 4-byte write breakpoints.
struct Host {
  std::unique_ptr<System> s = make();
  Machine& m = s->machine();
  TaskId t = *m.create_task();
  CpuId cpu{0};
  std::vector<std::uint64_t> perf_hits;  // addresses
  breakpoints::BreakpointHandle task_bp, cpu_bp;
  breakpoints::WideBreakpointHandle wide_bp;

  pmu::OverflowHandler record() {
    return [this](pmu::Event&, const pmu::Sample& x) { perf_hits.push_back(x.addr); };
  }
  void add_perf() {
    task_bp = *s->breakpoints().register_user_hw_breakpoint(breakpoint_attr(0x2000, 4, BpType::kW),
                                                            record(), t);
    cpu_bp = *s->breakpoints().register_cpu_hw_breakpoint(breakpoint_attr(0x3000, 4, BpType::kW),
                                                          record(), cpu);
    wide_bp = *s->breakpoints().register_wide_hw_breakpoint(breakpoint_attr(0x4000, 4, BpType::kW),
                                                            record());
  }
  void add_ptrace() {
    ASSERT_TRUE(s->ptrace().set_debugreg(t, 0, 0x1000));
    ASSERT_TRUE(s->ptrace().set_debugreg(t, 7, x86::dr7::install(0, 0, DrType::kWrite, DrLen::k4)));
  }
  // The trap bits a host write to addr raises.
  std::uint64_t write(std::uint64_t addr) {
    auto o = m.access(cpu, t, AccessKind::kWrite, addr, 4, 1);
    EXPECT_TRUE(o);
    return o ? o->dr6 : 0;
  }
};

DebugRegisters guest_regs() {
  DebugRegisters g;
  g.dr[0] = 0x1000;  // the host's ptrace address, watched by the guest for reads and writes
  g.dr[3] = 0x9000;
  g.dr7 = x86::dr7::install(x86::dr7::install(0, 0, DrType::kReadWrite, DrLen::k4), 3,
                            DrType::kWrite, DrLen::k1);
  return g;
}

TEST(SystemGuest, ExitRestoresEveryHostKindAndTheVirtualDr6) {
  Host h;
  ASSERT_TRUE(h.m.switch_to(h.cpu, h.t));
  h.add_ptrace();
  h.add_perf();
  const DebugRegisters host = *h.m.debug_registers(h.cpu);
  EXPECT_EQ(*h.s->host_debug_registers(h.cpu), host);
  ASSERT_NE(h.write(0x1000), 0u);  // the ptrace hit sets t's virtual DR6 (B0)
  const std::uint64_t virtual_dr6 = h.s->breakpoints().find_ptrace_thread(h.t)->virtual_dr6;
  EXPECT_EQ(virtual_dr6, x86::dr6::trap_bit(0));

  ASSERT_TRUE(h.s->guest_enter(h.cpu, guest_regs()));
  EXPECT_EQ(h.m.debug_registers(h.cpu)->dr7, guest_regs().dr7);
  EXPECT_EQ(*h.m.guest_access(h.cpu, AccessKind::kRead, 0x1000, 4), x86::dr6::trap_bit(0));
  EXPECT_EQ(*h.m.guest_access(h.cpu, AccessKind::kWrite, 0x2000, 4), 0u);
  EXPECT_EQ(*h.m.guest_access(h.cpu, AccessKind::kWrite, 0x9000, 1), x86::dr6::trap_bit(3));
  EXPECT_TRUE(h.perf_hits.empty());

  auto left = h.s->guest_exit(h.cpu);
  ASSERT_TRUE(left);
  EXPECT_EQ(left->dr6, x86::dr6::trap_bit(0) | x86::dr6::trap_bit(3));
  DebugRegisters restored = host;
  restored.dr6 = virtual_dr6;
  EXPECT_EQ(*h.m.debug_registers(h.cpu), restored);
  for (std::uint64_t a : {0x2000, 0x3000, 0x4000}) EXPECT_NE(h.write(a), 0u) << a;
  EXPECT_EQ(h.perf_hits, (std::vector<std::uint64_t>{0x2000, 0x3000, 0x4000}));
  EXPECT_NE(h.write(0x1000), 0u);
  EXPECT_EQ(h.write(0x9000), 0u);  // the guest's breakpoint is gone
}

// The review of the v3 patch: TIF_DEBUG is set only for ptrace breakpoints, so a perf or wide
// breakpoint is dead after a guest that used no breakpoints of its own.
TEST(SystemGuest, TifDebugOnlyRestoreLeavesPerfAndWideBreakpointsDead) {
  Host h;
  ASSERT_TRUE(h.m.switch_to(h.cpu, h.t));
  h.add_perf();
  ASSERT_FALSE(h.s->tif_debug(h.t));
  ASSERT_TRUE(h.s->guest_enter(h.cpu, DebugRegisters{}));
  ASSERT_TRUE(h.s->guest_exit(h.cpu, GuestRestore::kTifDebugOnly));
  EXPECT_EQ(*h.m.dr7(h.cpu), kVmExitDr7);
  for (std::uint64_t a : {0x2000, 0x3000, 0x4000}) EXPECT_EQ(h.write(a), 0u) << a;
  EXPECT_TRUE(h.perf_hits.empty());
  // The same run with the full restore.
  ASSERT_TRUE(h.s->guest_enter(h.cpu, DebugRegisters{}));
  ASSERT_TRUE(h.s->guest_exit(h.cpu, GuestRestore::kAll));
  for (std::uint64_t a : {0x2000, 0x3000, 0x4000}) EXPECT_NE(h.write(a), 0u) << a;
  EXPECT_EQ(h.perf_hits.size(), 3u);
}

TEST(SystemGuest, TifDebugOnlyRestoresForPtraceTasksAndGuestsWithBreakpoints) {
  Host h;
  ASSERT_TRUE(h.m.switch_to(h.cpu, h.t));
  h.add_perf();
  // A guest with enabled breakpoints: KVM's switch_db_regs restores.
  ASSERT_TRUE(h.s->guest_enter(h.cpu, guest_regs()));
  ASSERT_TRUE(h.s->guest_exit(h.cpu, GuestRestore::kTifDebugOnly));
  EXPECT_EQ(*h.m.dr7(h.cpu), h.s->host_debug_registers(h.cpu)->dr7);
  // A ptrace breakpoint gives t TIF_DEBUG.
  h.add_ptrace();
  ASSERT_TRUE(h.s->tif_debug(h.t));
  ASSERT_TRUE(h.s->guest_enter(h.cpu, DebugRegisters{}));
  ASSERT_TRUE(h.s->guest_exit(h.cpu, GuestRestore::kTifDebugOnly));
  for (std::uint64_t a : {0x1000, 0x2000, 0x3000, 0x4000}) EXPECT_NE(h.write(a), 0u) << a;
  EXPECT_EQ(h.perf_hits.size(), 3u);
}

TEST(SystemGuest, HostChangesWhileInTheGuestTakeEffectAtExit) {
  Host h;
  ASSERT_TRUE(h.m.switch_to(h.cpu, h.t));
  h.task_bp = *h.s->breakpoints().register_user_hw_breakpoint(
      breakpoint_attr(0x2000, 4, BpType::kW), h.record(), h.t);
  ASSERT_TRUE(h.s->guest_enter(h.cpu, guest_regs()));
  h.cpu_bp = *h.s->breakpoints().register_cpu_hw_breakpoint(breakpoint_attr(0x3000, 4, BpType::kW),
                                                            h.record(), h.cpu);
  EXPECT_TRUE(h.task_bp.close());
  // The hardware still holds the guest's registers; the image has the change.
  EXPECT_EQ(*h.m.dr7(h.cpu), guest_regs().dr7);
  EXPECT_EQ(*h.m.guest_access(h.cpu, AccessKind::kWrite, 0x3000, 4), 0u);
  EXPECT_NE(h.s->host_debug_registers(h.cpu)->dr7, guest_regs().dr7);
  ASSERT_TRUE(h.s->guest_exit(h.cpu));
  EXPECT_EQ(h.write(0x2000), 0u);
  EXPECT_NE(h.write(0x3000), 0u);
  EXPECT_EQ(h.perf_hits, (std::vector<std::uint64_t>{0x3000}));
}

TEST(SystemGuest, BadGuestFieldsAreEinvalNamingTheFieldAndChangeNothing) {
  Host h;
  ASSERT_TRUE(h.m.switch_to(h.cpu, h.t));
  h.add_perf();
  const DebugRegisters host = *h.m.debug_registers(h.cpu);
  struct Case {
    std::uint64_t dr7;
    const char* field;
  };
  const Case cases[] = {
      {x86::dr7::local_bit(1) | x86::dr7::encode_slot(1, DrType::kIo, DrLen::k4), "dr7: RW1"},
      {x86::dr7::global_bit(2) | x86::dr7::encode_slot(2, DrType::kExecute, DrLen::k2),
       "dr7: LEN2"},
      {std::uint64_t{1} << 32, "dr7: 0x100000000 sets reserved bits"},
  };
  for (const Case& c : cases) {
    DebugRegisters g;
    g.dr7 = c.dr7;
    auto r = h.s->guest_enter(h.cpu, g);
    ASSERT_FALSE(r) << c.field;
    EXPECT_EQ(r.error().code(), ErrorCode::kInval);
    EXPECT_NE(r.error().message().find(c.field), std::string::npos) << r.error().message();
    EXPECT_FALSE(*h.m.in_guest(h.cpu));
    EXPECT_EQ(*h.m.debug_registers(h.cpu), host);
  }
  // A disabled slot is not decoded (the hardware ignores it).
  DebugRegisters g;
  g.dr7 = x86::dr7::encode_slot(1, DrType::kIo, DrLen::k4) & ~x86::dr7::enable_bits(1);
  EXPECT_TRUE(h.s->guest_enter(h.cpu, g));
  auto twice = h.s->guest_enter(h.cpu, g);
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().code(), ErrorCode::kBusy);
  ASSERT_TRUE(h.s->guest_exit(h.cpu));
  auto again = h.s->guest_exit(h.cpu);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code(), ErrorCode::kInval);
  EXPECT_EQ(*h.m.debug_registers(h.cpu), host);
}

TEST(SystemGuest, ArchChecks) {
  auto i386 = make(breakpoints::Arch::kI386);
  TaskId t = *i386->machine().create_task();
  ASSERT_TRUE(i386->machine().switch_to(CpuId(0), t));
  DebugRegisters g;
  g.dr[2] = 0x100000000;
  auto r = i386->guest_enter(CpuId(0), g);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("dr2: 0x100000000"), std::string::npos);
  g.dr[2] = 0;
  g.dr7 = x86::dr7::install(0, 0, DrType::kWrite, DrLen::k8);
  r = i386->guest_enter(CpuId(0), g);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("dr7: LEN0"), std::string::npos);
  auto arm = make(breakpoints::Arch::kArm64);
  TaskId u = *arm->machine().create_task();
  ASSERT_TRUE(arm->machine().switch_to(CpuId(0), u));
  r = arm->guest_enter(CpuId(0), DebugRegisters{});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kOpNotSupp);
}

}  // namespace
}  // namespace hwarb::sim
