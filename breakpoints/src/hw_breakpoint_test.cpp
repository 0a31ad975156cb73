#include "hwarb/breakpoints/hw_breakpoint.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hwarb/sim/system.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::breakpoints {
namespace {

using pmu::BpType;
using sim::AccessKind;
using x86::DrLen;
using x86::DrType;

std::unique_ptr<sim::System> make(int cpus = 2, Arch arch = Arch::kX86_64) {
  auto s = sim::System::create({cpus, arch, arbiter::FlexiblePolicy::kMultiplexed});
  EXPECT_TRUE(s.has_value());
  return std::move(*s);
}

struct Hits {
  std::vector<pmu::Sample> samples;
  pmu::OverflowHandler handler() {
    return [this](pmu::Event&, const pmu::Sample& s) { samples.push_back(s); };
  }
  std::size_t size() const { return samples.size(); }
};

sim::DebugRegisters regs(sim::System& s, int cpu) {
  return *s.machine().debug_registers(CpuId(cpu));
}

// Every CPU's DR0-DR3/DR6/DR7.
std::vector<sim::DebugRegisters> all_regs(sim::System& s) {
  std::vector<sim::DebugRegisters> out;
  for (int c = 0; c < s.machine().possible_cpus(); ++c) out.push_back(regs(s, c));
  return out;
}

bool write(sim::System& s, int cpu, TaskId t, std::uint64_t addr, int size, std::uint64_t v = 1) {
  auto o = s.machine().access(CpuId(cpu), t, AccessKind::kWrite, addr, size, v);
  EXPECT_TRUE(o.has_value());
  return o && o->exceptions > 0;
}
bool read(sim::System& s, int cpu, TaskId t, std::uint64_t addr, int size) {
  auto o = s.machine().access(CpuId(cpu), t, AccessKind::kRead, addr, size);
  EXPECT_TRUE(o.has_value());
  return o && o->exceptions > 0;
}

// The arbiter's and the core's whole state, to compare before and after a failed call.
struct State {
  std::string dump;
  int live;
  std::vector<pmu::EventId> events;
  std::vector<sim::DebugRegisters> regs;
  friend bool operator==(const State&, const State&) = default;
};
State state(sim::System& s) {
  return {s.arbiter().dump(), s.arbiter().snapshot().live, s.core().events(), all_regs(s)};
}

TEST(HwBreakpoint, BreakpointAttrIsLinuxsHwBreakpointInit) {
  pmu::EventAttr a = breakpoint_attr(0x1234, 2, BpType::kRw);
  EXPECT_EQ(a.type, pmu::EventType::kBreakpoint);
  EXPECT_TRUE(a.pinned);
  EXPECT_EQ(a.sample_period, 1u);
  EXPECT_EQ(a.bp_addr, 0x1234u);
  EXPECT_EQ(a.bp_len, 2u);
  EXPECT_EQ(a.bp_type, BpType::kRw);
  EXPECT_FALSE(a.disabled);
  EXPECT_FALSE(a.privileged);
}

TEST(HwBreakpoint, UserBreakpointFollowsItsTaskOnAnyCpu) {
  auto s = make();
  sim::Machine& m = s->machine();
  TaskId a = *m.create_task(), b = *m.create_task();
  Hits hits;
  auto bp = s->breakpoints().register_user_hw_breakpoint(breakpoint_attr(0x1000, 4, BpType::kW),
                                                         hits.handler(), a);
  ASSERT_TRUE(bp) << bp.error().to_string();
  EXPECT_EQ(bp->event()->task(), a);
  EXPECT_FALSE(bp->event()->cpu().has_value());
  EXPECT_FALSE(bp->event()->attr().privileged);
  EXPECT_EQ(regs(*s, 0).dr7, 0u);  // the task does not run
  EXPECT_EQ(regs(*s, 1).dr7, 0u);
  ASSERT_TRUE(m.switch_to(CpuId(1), a));
  ASSERT_TRUE(m.switch_to(CpuId(0), b));
  EXPECT_EQ(regs(*s, 1).dr[0], 0x1000u);
  EXPECT_EQ(regs(*s, 1).dr7, x86::dr7::install(0, 0, DrType::kWrite, DrLen::k4));
  EXPECT_EQ(regs(*s, 0).dr7, 0u);
  EXPECT_TRUE(write(*s, 1, a, 0x1003, 1));
  EXPECT_FALSE(write(*s, 0, b, 0x1000, 4));
  EXPECT_FALSE(read(*s, 1, a, 0x1000, 4));  // w does not see reads
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits.samples[0].task, a);
  EXPECT_EQ(hits.samples[0].cpu, CpuId(1));
  EXPECT_EQ(hits.samples[0].addr, 0x1003u);
  EXPECT_EQ(bp->read()->count, 1u);
  // The task moves to cpu 0: the breakpoint moves with it.
  ASSERT_TRUE(m.switch_to_idle(CpuId(1)));
  ASSERT_TRUE(m.switch_to_idle(CpuId(0)));
  ASSERT_TRUE(m.switch_to(CpuId(0), a));
  EXPECT_EQ(regs(*s, 1).dr7, 0u);
  EXPECT_EQ(regs(*s, 0).dr[0], 0x1000u);
  EXPECT_TRUE(write(*s, 0, a, 0x1000, 8));
  EXPECT_EQ(hits.size(), 2u);
  EXPECT_TRUE(bp->close());
  EXPECT_EQ(regs(*s, 0).dr7, 0u);
  EXPECT_FALSE(s->arbiter().is_used());
}

TEST(HwBreakpoint, UserBreakpointBoundToOneCpu) {
  auto s = make();
  sim::Machine& m = s->machine();
  TaskId a = *m.create_task();
  Hits hits;
  auto bp = s->breakpoints().register_user_hw_breakpoint(breakpoint_attr(0x1000, 4, BpType::kRw),
                                                         hits.handler(), a, CpuId(1));
  ASSERT_TRUE(bp);
  EXPECT_EQ(bp->event()->cpu(), CpuId(1));
  ASSERT_TRUE(m.switch_to(CpuId(0), a));
  EXPECT_EQ(regs(*s, 0).dr7, 0u);
  EXPECT_FALSE(read(*s, 0, a, 0x1000, 4));
  ASSERT_TRUE(m.switch_to_idle(CpuId(0)));
  ASSERT_TRUE(m.switch_to(CpuId(1), a));
  EXPECT_TRUE(read(*s, 1, a, 0x1000, 4));
  EXPECT_EQ(hits.size(), 1u);
}

TEST(HwBreakpoint, UserBreakpointsAreUnprivileged) {
  auto s = make();
  TaskId a = *s->machine().create_task();
  const std::uint64_t kernel = task_size_max(Arch::kX86_64);
  const State before = state(*s);
  auto bp =
      s->breakpoints().register_user_hw_breakpoint(breakpoint_attr(kernel, 4, BpType::kW), {}, a);
  ASSERT_FALSE(bp);
  EXPECT_EQ(bp.error().code(), ErrorCode::kPerm);
  EXPECT_TRUE(bp.error().message().starts_with("addr"));
  EXPECT_EQ(state(*s), before);
  // The privileged attribute of the caller is not theirs to set.
  pmu::EventAttr forged = breakpoint_attr(kernel, 4, BpType::kW);
  forged.privileged = true;
  bp = s->breakpoints().register_user_hw_breakpoint(forged, {}, a);
  ASSERT_FALSE(bp);
  EXPECT_EQ(bp.error().code(), ErrorCode::kPerm);
  // CPU breakpoints are kernel users: allowed.
  auto cpu_bp = s->breakpoints().register_cpu_hw_breakpoint(breakpoint_attr(kernel, 4, BpType::kW),
                                                            {}, CpuId(0));
  ASSERT_TRUE(cpu_bp) << cpu_bp.error().to_string();
  EXPECT_TRUE(cpu_bp->event()->attr().privileged);
  // ... unless they exclude the kernel.
  pmu::EventAttr ek = breakpoint_attr(kernel, 4, BpType::kW);
  ek.exclude_kernel = true;
  auto bad = s->breakpoints().register_cpu_hw_breakpoint(ek, {}, CpuId(1));
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(cpu_bp->close());
  EXPECT_FALSE(s->arbiter().is_used());
}

// perf_event_open's answers, as measured on this project's kernel (6.18, x86_64, no kprobes;
// tests/property/perf_permission_differential_test.cpp compares them with the kernel each run).
TEST(HwBreakpoint, PerfEventOpenAnswersAsTheKernelInItsOrder) {
  const std::uint64_t kernel = task_size_max(Arch::kX86_64);
  const pmu::Credentials root = pmu::Credentials::root();
  const pmu::Credentials user = pmu::Credentials::user();
  struct Case {
    pmu::Credentials who;
    int paranoid;
    bool cpu_event;
    BpType type;
    bool exclude_kernel;
    std::uint64_t addr;
    std::optional<ErrorCode> want;
    const char* field;
  };
  const std::optional<ErrorCode> ok;
  const Case cases[] = {
      // root: only the breakpoint checks; no execute breakpoint in kernel space.
      {root, 2, false, BpType::kRw, false, kernel, ok, ""},
      {root, 2, true, BpType::kRw, false, kernel, ok, ""},
      {root, 2, false, BpType::kRw, true, kernel, ErrorCode::kInval, "addr"},
      {root, -1, true, BpType::kX, false, kernel, ErrorCode::kInval, "addr"},
      // user, paranoid 2: a kernel-including event is EACCES before anything else.
      {user, 2, false, BpType::kRw, false, 0x1000, ErrorCode::kAcces, "exclude_kernel"},
      {user, 2, false, BpType::kX, false, kernel, ErrorCode::kAcces, "exclude_kernel"},
      {user, 2, false, BpType::kRw, true, 0x1000, ok, ""},
      {user, 2, false, BpType::kRw, true, kernel, ErrorCode::kInval, "addr"},
      {user, 3, true, BpType::kRw, true, 0x1000, ErrorCode::kAcces, "cpu"},
      // user, paranoid 1: kernel space is EPERM (no CAP_SYS_ADMIN), before the CPU's EACCES.
      {user, 1, false, BpType::kRw, false, kernel, ErrorCode::kPerm, "addr"},
      {user, 1, true, BpType::kRw, false, kernel, ErrorCode::kPerm, "addr"},
      {user, 1, true, BpType::kRw, false, 0x1000, ErrorCode::kAcces, "cpu"},
      {user, 1, true, BpType::kX, true, kernel, ErrorCode::kInval, "addr"},
      // user, paranoid 0 and -1: CPU events too.
      {user, 0, true, BpType::kRw, false, 0x1000, ok, ""},
      {user, -1, true, BpType::kX, true, 0x1000, ok, ""},
      {user, 0, true, BpType::kRw, false, kernel, ErrorCode::kPerm, "addr"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.who.sys_admin ? "root" : "user") + " paranoid " +
                 std::to_string(c.paranoid) + (c.cpu_event ? " cpu " : " task ") +
                 std::string(to_string(c.type)) + " ek " + std::to_string(c.exclude_kernel) +
                 " addr " + std::to_string(c.addr));
    auto s = make();
    TaskId t = *s->machine().create_task();
    pmu::EventAttr a = breakpoint_attr(c.addr, c.type == BpType::kX ? 8 : 4, c.type);
    a.exclude_kernel = c.exclude_kernel;
    const pmu::EventOwner owner =
        c.cpu_event ? pmu::EventOwner{std::nullopt, CpuId(0)} : pmu::EventOwner{t, std::nullopt};
    const State before = state(*s);
    auto h = s->breakpoints().perf_event_open(a, {}, owner, c.who, c.paranoid);
    if (!c.want) {
      ASSERT_TRUE(h) << h.error().to_string();
      EXPECT_EQ(h->event()->attr().privileged, c.who.sys_admin);
      continue;
    }
    ASSERT_FALSE(h);
    EXPECT_EQ(h.error().code(), *c.want) << h.error().to_string();
    EXPECT_TRUE(h.error().message().starts_with(c.field)) << h.error().to_string();
    EXPECT_EQ(state(*s), before);  // nothing held, not even the slots of step 3
  }
}

TEST(HwBreakpoint, PerfEventOpenSlotsComeBetweenTheTwoPermissionChecks) {
  // Measured: on a full CPU, a kernel-including event at paranoid 2 is EACCES (checked before
  // the event exists), a CPU event at paranoid 1 is ENOSPC (checked after).
  auto s = make();
  std::vector<BreakpointHandle> fill;
  for (int i = 0; i < 4; ++i) {
    auto h = s->breakpoints().register_cpu_hw_breakpoint(
        breakpoint_attr(0x1000 + 8 * i, 4, BpType::kRw), {}, CpuId(0));
    ASSERT_TRUE(h);
    fill.push_back(std::move(*h));
  }
  const pmu::EventOwner cpu0{std::nullopt, CpuId(0)};
  const pmu::Credentials user = pmu::Credentials::user();
  pmu::EventAttr a = breakpoint_attr(0x2000, 4, BpType::kRw);
  EXPECT_EQ(s->breakpoints().perf_event_open(a, {}, cpu0, user, 2).error().code(),
            ErrorCode::kAcces);
  EXPECT_EQ(s->breakpoints().perf_event_open(a, {}, cpu0, user, 1).error().code(),
            ErrorCode::kNoSpc);
  a.exclude_kernel = true;
  EXPECT_EQ(s->breakpoints().perf_event_open(a, {}, cpu0, user, 2).error().code(),
            ErrorCode::kNoSpc);
  // And a task of its own that no longer exists: ESRCH, after perf_allow_kernel.
  s->breakpoints().set_task_lookup([](TaskId) { return false; });
  a.exclude_kernel = false;
  const pmu::EventOwner gone{TaskId(9), std::nullopt};
  EXPECT_EQ(s->breakpoints().perf_event_open(a, {}, gone, user, 2).error().code(),
            ErrorCode::kAcces);
  EXPECT_EQ(s->breakpoints().perf_event_open(a, {}, gone, user, 1).error().code(),
            ErrorCode::kSrch);
}

TEST(HwBreakpoint, CpuBreakpointIsInstalledAtOnceAndSeesEveryTaskOnItsCpu) {
  auto s = make();
  sim::Machine& m = s->machine();
  TaskId a = *m.create_task(), b = *m.create_task();
  Hits hits;
  auto bp = s->breakpoints().register_cpu_hw_breakpoint(breakpoint_attr(0x3000, 8, BpType::kRw),
                                                        hits.handler(), CpuId(1));
  ASSERT_TRUE(bp);
  EXPECT_FALSE(bp->event()->task().has_value());
  EXPECT_EQ(bp->event()->cpu(), CpuId(1));
  EXPECT_EQ(bp->event()->state(), pmu::EventState::kActive);
  EXPECT_EQ(regs(*s, 1).dr[0], 0x3000u);
  EXPECT_EQ(regs(*s, 1).dr7, x86::dr7::install(0, 0, DrType::kReadWrite, DrLen::k8));
  EXPECT_EQ(regs(*s, 0).dr7, 0u);
  ASSERT_TRUE(m.switch_to(CpuId(1), a));
  ASSERT_TRUE(m.switch_to(CpuId(0), b));
  EXPECT_TRUE(read(*s, 1, a, 0x3007, 1));
  EXPECT_FALSE(read(*s, 0, b, 0x3000, 8));
  EXPECT_FALSE(m.switch_to(CpuId(1), b));  // b runs on cpu 0
  ASSERT_TRUE(m.switch_to_idle(CpuId(0)));
  ASSERT_TRUE(m.switch_to(CpuId(1), b));
  EXPECT_EQ(regs(*s, 1).dr7, x86::dr7::install(0, 0, DrType::kReadWrite, DrLen::k8));
  EXPECT_TRUE(write(*s, 1, b, 0x3004, 4));
  ASSERT_EQ(hits.size(), 2u);
  EXPECT_EQ(hits.samples[0].task, a);
  EXPECT_EQ(hits.samples[1].task, b);
  // CPU out of range, offline CPU.
  auto r = s->breakpoints().register_cpu_hw_breakpoint(breakpoint_attr(0x3000, 8, BpType::kRw), {},
                                                       CpuId(2));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  ASSERT_TRUE(m.switch_to_idle(CpuId(1)));
  ASSERT_TRUE(m.set_online(CpuId(0), false));
  r = s->breakpoints().register_cpu_hw_breakpoint(breakpoint_attr(0x3000, 8, BpType::kRw), {},
                                                  CpuId(0));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoDev);
  EXPECT_TRUE(bp->close());
  EXPECT_FALSE(s->arbiter().is_used());
}

TEST(HwBreakpoint, WideBreakpointIsOnePerOnlineCpu) {
  auto s = make(4);
  sim::Machine& m = s->machine();
  ASSERT_TRUE(m.set_online(CpuId(2), false));
  Hits hits;
  auto wide = s->breakpoints().register_wide_hw_breakpoint(breakpoint_attr(0x5000, 4, BpType::kW),
                                                           hits.handler());
  ASSERT_TRUE(wide) << wide.error().to_string();
  ASSERT_TRUE(wide->valid());
  ASSERT_EQ(wide->per_cpu.size(), 3u);
  const int online[] = {0, 1, 3};
  for (std::size_t i = 0; i < 3; ++i) {
    const pmu::Event* e = wide->per_cpu[i].event();
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->cpu(), CpuId(online[i]));
    EXPECT_FALSE(e->task().has_value());
    EXPECT_TRUE(e->attr().privileged);
    EXPECT_EQ(regs(*s, online[i]).dr[0], 0x5000u);
    EXPECT_EQ(regs(*s, online[i]).dr7, x86::dr7::install(0, 0, DrType::kWrite, DrLen::k4));
  }
  EXPECT_EQ(regs(*s, 2), sim::DebugRegisters{});
  // Any task on any online CPU.
  std::vector<TaskId> tasks;
  for (int i = 0; i < 3; ++i) {
    tasks.push_back(*m.create_task());
    ASSERT_TRUE(m.switch_to(CpuId(online[i]), tasks.back()));
  }
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(write(*s, online[i], tasks[i], 0x5002, 2));
  ASSERT_EQ(hits.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(hits.samples[i].cpu, CpuId(online[i]));
    EXPECT_EQ(hits.samples[i].task, tasks[i]);
  }
  s->breakpoints().unregister_wide_hw_breakpoint(*wide);
  EXPECT_FALSE(wide->valid());
  for (int c = 0; c < 4; ++c) EXPECT_EQ(regs(*s, c).dr7, 0u);
  EXPECT_FALSE(s->arbiter().is_used());
  EXPECT_TRUE(s->core().events().empty());
}

TEST(HwBreakpoint, WideIsAllOrNothingWhenOneCpuIsFull) {
  auto s = make(4);
  std::vector<BreakpointHandle> fill;
  for (int i = 0; i < 4; ++i) {
    auto h = s->breakpoints().register_cpu_hw_breakpoint(
        breakpoint_attr(0x100 + 8 * static_cast<std::uint64_t>(i), 8, BpType::kRw), {}, CpuId(2));
    ASSERT_TRUE(h);
    fill.push_back(std::move(*h));
  }
  const State before = state(*s);
  auto wide =
      s->breakpoints().register_wide_hw_breakpoint(breakpoint_attr(0x5000, 4, BpType::kW), {});
  ASSERT_FALSE(wide);
  EXPECT_EQ(wide.error().code(), ErrorCode::kNoSpc);
  EXPECT_EQ(state(*s), before);
  for (int c : {0, 1, 3}) EXPECT_EQ(regs(*s, c), sim::DebugRegisters{});
  // A task holding 4 pinned breakpoints on all CPUs blocks a wide one as well.
  fill.clear();
  EXPECT_FALSE(s->arbiter().is_used());
  TaskId t = *s->machine().create_task();
  for (int i = 0; i < 4; ++i) {
    auto h = s->breakpoints().register_user_hw_breakpoint(
        breakpoint_attr(0x100 + 8 * static_cast<std::uint64_t>(i), 8, BpType::kRw), {}, t);
    ASSERT_TRUE(h);
    fill.push_back(std::move(*h));
  }
  const State before2 = state(*s);
  wide = s->breakpoints().register_wide_hw_breakpoint(breakpoint_attr(0x5000, 4, BpType::kW), {});
  ASSERT_FALSE(wide);
  EXPECT_EQ(wide.error().code(), ErrorCode::kNoSpc);
  EXPECT_EQ(state(*s), before2);
  // Room again: it succeeds.
  fill.pop_back();
  wide = s->breakpoints().register_wide_hw_breakpoint(breakpoint_attr(0x5000, 4, BpType::kW), {});
  ASSERT_TRUE(wide);
  EXPECT_EQ(wide->per_cpu.size(), 4u);
  fill.clear();
  wide->per_cpu.clear();
  EXPECT_FALSE(s->arbiter().is_used());
}

TEST(HwBreakpoint, SlotCheckComesBeforeFieldCheck) {
  auto s = make(3);  // cpu 1: CPU-bound full; cpu 0: a task's full; cpu 2: free
  std::vector<BreakpointHandle> fill;
  for (int i = 0; i < 4; ++i) {
    auto h = s->breakpoints().register_cpu_hw_breakpoint(
        breakpoint_attr(0x100 + 8 * static_cast<std::uint64_t>(i), 8, BpType::kRw), {}, CpuId(1));
    ASSERT_TRUE(h);
    fill.push_back(std::move(*h));
  }
  const pmu::EventAttr bad_attrs[] = {
      breakpoint_attr(0x1000, 3, BpType::kW),   // len
      breakpoint_attr(0x1001, 4, BpType::kW),   // addr alignment
      breakpoint_attr(0x1000, 4, BpType::kR),   // type
      breakpoint_attr(0x1000, 16, BpType::kW),  // len: a range breakpoint, EOPNOTSUPP
  };
  const char* fields[] = {"len", "addr", "type", "len"};
  const ErrorCode codes[] = {ErrorCode::kInval, ErrorCode::kInval, ErrorCode::kInval,
                             ErrorCode::kOpNotSupp};
  TaskId t = *s->machine().create_task();
  TaskId full = *s->machine().create_task();
  for (int i = 0; i < 4; ++i) {
    auto h = s->breakpoints().register_user_hw_breakpoint(
        breakpoint_attr(0x200 + 8 * static_cast<std::uint64_t>(i), 8, BpType::kRw), {}, full,
        CpuId(0));
    ASSERT_TRUE(h);
    fill.push_back(std::move(*h));
  }
  const State before = state(*s);
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(fields[i]);
    const pmu::EventAttr& bad = bad_attrs[i];
    auto r = s->breakpoints().register_cpu_hw_breakpoint(bad, {}, CpuId(1));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), ErrorCode::kNoSpc);
    auto w = s->breakpoints().register_wide_hw_breakpoint(bad, {});
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error().code(), ErrorCode::kNoSpc);
    r = s->breakpoints().register_user_hw_breakpoint(bad, {}, full, CpuId(0));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), ErrorCode::kNoSpc);
    // A free CPU / task: the field error.
    r = s->breakpoints().register_cpu_hw_breakpoint(bad, {}, CpuId(2));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), codes[i]);
    EXPECT_TRUE(r.error().message().starts_with(fields[i])) << r.error().message();
    r = s->breakpoints().register_user_hw_breakpoint(bad, {}, t, CpuId(2));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), codes[i]);
    EXPECT_TRUE(r.error().message().starts_with(fields[i])) << r.error().message();
    EXPECT_EQ(state(*s), before);
  }
  // The empty type (and RW|X) is refused before the slots are counted, as Linux's
  // __reserve_bp_slot: EINVAL even where the slots are full.
  for (unsigned type : {0u, 7u}) {
    SCOPED_TRACE(type);
    const pmu::EventAttr bad = breakpoint_attr(0x1000, 4, static_cast<BpType>(type));
    auto c = s->breakpoints().register_cpu_hw_breakpoint(bad, {}, CpuId(1));
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().code(), ErrorCode::kInval);
    EXPECT_TRUE(c.error().message().starts_with("type")) << c.error().message();
    auto w = s->breakpoints().register_wide_hw_breakpoint(bad, {});
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error().code(), ErrorCode::kInval);
    c = s->breakpoints().register_user_hw_breakpoint(bad, {}, full, CpuId(0));
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error().code(), ErrorCode::kInval);
    EXPECT_EQ(state(*s), before);
  }
  // On a full CPU the task-wide one is refused for its slots as well.
  auto r = s->breakpoints().register_user_hw_breakpoint(bad_attrs[0], {}, t);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoSpc);
  // With every CPU free again, the wide one fails on its fields.
  fill.clear();
  auto w = s->breakpoints().register_wide_hw_breakpoint(bad_attrs[0], {});
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().code(), ErrorCode::kInval);
  fill.clear();
  EXPECT_FALSE(s->arbiter().is_used());
}

// A breakpoint of task `a` running on cpu 0.
struct Armed {
  std::unique_ptr<sim::System> s = make();
  TaskId a;
  Hits hits;
  BreakpointHandle bp;
  Armed() {
    a = *s->machine().create_task();
    auto h = s->breakpoints().register_user_hw_breakpoint(breakpoint_attr(0x1000, 4, BpType::kW),
                                                          hits.handler(), a);
    EXPECT_TRUE(h);
    bp = std::move(*h);
    EXPECT_TRUE(s->machine().switch_to(CpuId(0), a));
  }
  Result<void> modify(const pmu::EventAttr& attr) {
    return s->breakpoints().modify_user_hw_breakpoint(bp, attr);
  }
};

TEST(HwBreakpoint, ModifyReinstallsAnInstalledBreakpointAtOnce) {
  Armed f;
  sim::System& s = *f.s;
  EXPECT_EQ(regs(s, 0).dr[0], 0x1000u);
  const pmu::EventId id = f.bp.id();
  // addr + len + type
  ASSERT_TRUE(f.modify(breakpoint_attr(0x2008, 8, BpType::kRw)));
  EXPECT_EQ(f.bp.id(), id);
  EXPECT_EQ(f.bp.event()->state(), pmu::EventState::kActive);
  EXPECT_EQ(f.bp.event()->attr().bp_addr, 0x2008u);
  EXPECT_EQ(f.bp.event()->attr().bp_len, 8u);
  EXPECT_EQ(f.bp.event()->attr().bp_type, BpType::kRw);
  EXPECT_EQ(regs(s, 0).dr[0], 0x2008u);
  EXPECT_EQ(regs(s, 0).dr7, x86::dr7::install(0, 0, DrType::kReadWrite, DrLen::k8));
  EXPECT_FALSE(write(s, 0, f.a, 0x1000, 4));
  EXPECT_TRUE(read(s, 0, f.a, 0x200c, 2));
  EXPECT_EQ(f.hits.size(), 1u);
  // len only
  ASSERT_TRUE(f.modify(breakpoint_attr(0x2008, 2, BpType::kRw)));
  EXPECT_EQ(regs(s, 0).dr7, x86::dr7::install(0, 0, DrType::kReadWrite, DrLen::k2));
  EXPECT_FALSE(read(s, 0, f.a, 0x200c, 2));
  // type to execute, at an odd address
  ASSERT_TRUE(f.modify(breakpoint_attr(0x400001, 8, BpType::kX)));
  EXPECT_EQ(regs(s, 0).dr[0], 0x400001u);
  EXPECT_EQ(regs(s, 0).dr7, x86::dr7::install(0, 0, DrType::kExecute, DrLen::k1));
  auto o = s.machine().exec(CpuId(0), f.a, 0x400001);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->exceptions, 1);
  ASSERT_EQ(f.hits.size(), 2u);
  EXPECT_EQ(f.hits.samples[1].ip, 0x400001u);
  // Still one reservation.
  EXPECT_EQ(s.arbiter().snapshot().live, 1);
  // A breakpoint whose task does not run: changed, installed with the new values later.
  ASSERT_TRUE(s.machine().switch_to_idle(CpuId(0)));
  EXPECT_EQ(regs(s, 0).dr7, 0u);
  ASSERT_TRUE(f.modify(breakpoint_attr(0x3000, 1, BpType::kW)));
  EXPECT_EQ(regs(s, 0).dr7, 0u);
  ASSERT_TRUE(s.machine().switch_to(CpuId(1), f.a));
  EXPECT_EQ(regs(s, 1).dr[0], 0x3000u);
  EXPECT_EQ(regs(s, 1).dr7, x86::dr7::install(0, 0, DrType::kWrite, DrLen::k1));
  EXPECT_TRUE(write(s, 1, f.a, 0x3000, 1));
  EXPECT_TRUE(f.bp.close());
  EXPECT_FALSE(s.arbiter().is_used());
}

TEST(HwBreakpoint, ModifyAnInstalledCpuBreakpoint) {
  auto s = make();
  Hits hits;
  auto a = s->breakpoints().register_cpu_hw_breakpoint(breakpoint_attr(0x10, 8, BpType::kRw), {},
                                                       CpuId(1));
  auto b = s->breakpoints().register_cpu_hw_breakpoint(breakpoint_attr(0x1000, 4, BpType::kW),
                                                       hits.handler(), CpuId(1));
  ASSERT_TRUE(a && b);
  ASSERT_EQ(b->event()->hw_index, 1);
  const std::uint64_t slot0 = regs(*s, 1).dr7 & (x86::dr7::control_mask(0) | 0x3);
  pmu::EventAttr next = breakpoint_attr(0x2002, 2, BpType::kRw);
  ASSERT_TRUE(s->breakpoints().modify_user_hw_breakpoint(*b, next));
  EXPECT_EQ(regs(*s, 1).dr[1], 0x2002u);
  EXPECT_EQ(regs(*s, 1).dr[0], 0x10u);
  EXPECT_EQ(regs(*s, 1).dr7 & (x86::dr7::control_mask(0) | 0x3), slot0);
  EXPECT_EQ(x86::dr7::type(regs(*s, 1).dr7, b->event()->hw_index), DrType::kReadWrite);
  EXPECT_EQ(x86::dr7::len(regs(*s, 1).dr7, b->event()->hw_index), DrLen::k2);
  TaskId t = *s->machine().create_task();
  ASSERT_TRUE(s->machine().switch_to(CpuId(1), t));
  EXPECT_TRUE(read(*s, 1, t, 0x2003, 1));
  EXPECT_EQ(hits.size(), 1u);
}

TEST(HwBreakpoint, ModifyOfAnyOtherFieldIsEinvalNamingItAndChangesNothing) {
  struct Change {
    const char* field;
    std::function<void(pmu::EventAttr&)> apply;
  };
  const Change changes[] = {
      {"config", [](pmu::EventAttr& a) { a.config = 1; }},
      {"pinned", [](pmu::EventAttr& a) { a.pinned = false; }},
      {"exclusive", [](pmu::EventAttr& a) { a.exclusive = true; }},
      {"inherit", [](pmu::EventAttr& a) { a.inherit = true; }},
      {"sample_period", [](pmu::EventAttr& a) { a.sample_period = 2; }},
      {"exclude_user", [](pmu::EventAttr& a) { a.exclude_user = true; }},
      {"exclude_kernel", [](pmu::EventAttr& a) { a.exclude_kernel = true; }},
      {"weight", [](pmu::EventAttr& a) { a.weight = 2; }},
      {"ring_capacity", [](pmu::EventAttr& a) { a.ring_capacity = 4; }},
      {"ring_mode", [](pmu::EventAttr& a) { a.ring_mode = pmu::RingMode::kOverwrite; }},
  };
  for (const Change& c : changes) {
    SCOPED_TRACE(c.field);
    Armed f;
    const State before = state(*f.s);
    const pmu::EventAttr old = f.bp.event()->attr();
    // Together with a legal change of the address: nothing of it happens either.
    pmu::EventAttr next = breakpoint_attr(0x2000, 4, BpType::kW);
    c.apply(next);
    auto r = f.modify(next);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), ErrorCode::kInval);
    EXPECT_TRUE(r.error().message().starts_with(c.field)) << r.error().message();
    EXPECT_EQ(state(*f.s), before);
    EXPECT_EQ(f.bp.event()->attr().bp_addr, old.bp_addr);
    EXPECT_EQ(f.bp.event()->state(), pmu::EventState::kActive);
    // Still armed at the old address.
    EXPECT_TRUE(write(*f.s, 0, f.a, 0x1000, 4));
    EXPECT_FALSE(write(*f.s, 0, f.a, 0x2000, 4));
    EXPECT_EQ(f.hits.size(), 1u);
  }
}

TEST(HwBreakpoint, ModifyWithBadFieldsLeavesTheBreakpointArmed) {
  struct Bad {
    pmu::EventAttr attr;
    ErrorCode code;
    const char* field;
  };
  pmu::EventAttr with_config = breakpoint_attr(0x2000, 3, BpType::kW);
  with_config.config = 5;  // the field error comes first (Linux's order)
  const Bad bads[] = {
      {breakpoint_attr(0x2000, 3, BpType::kW), ErrorCode::kInval, "len"},
      {breakpoint_attr(0x2002, 4, BpType::kW), ErrorCode::kInval, "addr"},
      {breakpoint_attr(0x2000, 4, BpType::kR), ErrorCode::kInval, "type"},
      {breakpoint_attr(0x2000, 4, BpType::kEmpty), ErrorCode::kInval, "type"},
      {breakpoint_attr(0x400000, 4, BpType::kX), ErrorCode::kInval, "len"},
      {breakpoint_attr(task_size_max(Arch::kX86_64), 4, BpType::kW), ErrorCode::kPerm, "addr"},
      {with_config, ErrorCode::kInval, "len"},
  };
  for (const Bad& b : bads) {
    SCOPED_TRACE(b.field);
    Armed f;
    const State before = state(*f.s);
    auto r = f.modify(b.attr);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), b.code) << r.error().to_string();
    EXPECT_TRUE(r.error().message().starts_with(b.field)) << r.error().message();
    EXPECT_EQ(state(*f.s), before);
    EXPECT_EQ(f.bp.event()->attr().bp_addr, 0x1000u);
    EXPECT_EQ(f.bp.event()->attr().bp_len, 4u);
    EXPECT_EQ(f.bp.event()->attr().bp_type, BpType::kW);
    EXPECT_EQ(regs(*f.s, 0).dr[0], 0x1000u);
    EXPECT_EQ(regs(*f.s, 0).dr7, x86::dr7::install(0, 0, DrType::kWrite, DrLen::k4));
    EXPECT_TRUE(write(*f.s, 0, f.a, 0x1001, 1));
    EXPECT_EQ(f.hits.size(), 1u);
  }
}

TEST(HwBreakpoint, ModifyErrorsOnHandlesAndIds) {
  Armed f;
  BreakpointHandle empty;
  auto r = f.s->breakpoints().modify_user_hw_breakpoint(empty, breakpoint_attr(0, 1, BpType::kW));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(r.error().message().starts_with("bp"));
  r = f.s->breakpoints().modify_user_hw_breakpoint(pmu::EventId{999},
                                                   breakpoint_attr(0, 1, BpType::kW));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoEnt);
  // By id: the same as by handle.
  ASSERT_TRUE(f.s->breakpoints().modify_user_hw_breakpoint(f.bp.id(),
                                                           breakpoint_attr(0x88, 8, BpType::kW)));
  EXPECT_EQ(regs(*f.s, 0).dr[0], 0x88u);
}

TEST(HwBreakpoint, DisabledBreakpointIsNotInstalledButHoldsItsSlot) {
  Armed f;
  sim::System& s = *f.s;
  pmu::EventAttr off = breakpoint_attr(0x1000, 4, BpType::kW);
  off.disabled = true;
  ASSERT_TRUE(f.modify(off));
  EXPECT_EQ(f.bp.event()->state(), pmu::EventState::kOff);
  EXPECT_EQ(regs(s, 0).dr7, 0u);
  EXPECT_EQ(regs(s, 0).dr[0], 0u);
  for (const pmu::Event* e : s.bp_pmu().installed(CpuId(0))) EXPECT_EQ(e, nullptr);
  EXPECT_FALSE(write(s, 0, f.a, 0x1000, 4));
  EXPECT_TRUE(s.arbiter().is_used());
  // It holds its slot: the task gets 3 more, not 4.
  std::vector<BreakpointHandle> more;
  for (int i = 0; i < 3; ++i) {
    auto h = s.breakpoints().register_user_hw_breakpoint(
        breakpoint_attr(0x100 + 8 * static_cast<std::uint64_t>(i), 8, BpType::kRw), {}, f.a);
    ASSERT_TRUE(h);
    more.push_back(std::move(*h));
  }
  auto h =
      s.breakpoints().register_user_hw_breakpoint(breakpoint_attr(0x200, 8, BpType::kRw), {}, f.a);
  ASSERT_FALSE(h);
  EXPECT_EQ(h.error().code(), ErrorCode::kNoSpc);
  // The three are installed in DR0..DR2; DR3 stays free for the disabled one.
  EXPECT_EQ(x86::dr7::enable_bits(3) & regs(s, 0).dr7, 0u);
  // Enabled again (with a new address): installed at once, into the free register.
  pmu::EventAttr on = breakpoint_attr(0x1800, 4, BpType::kW);
  ASSERT_TRUE(f.modify(on));
  EXPECT_EQ(f.bp.event()->state(), pmu::EventState::kActive);
  EXPECT_EQ(f.bp.event()->hw_index, 3);
  EXPECT_EQ(regs(s, 0).dr[3], 0x1800u);
  EXPECT_TRUE(write(s, 0, f.a, 0x1800, 4));
  EXPECT_EQ(f.hits.size(), 1u);
  more.clear();
  EXPECT_TRUE(f.bp.close());
  EXPECT_FALSE(s.arbiter().is_used());
}

TEST(HwBreakpoint, RegisteredDisabledHoldsItsSlot) {
  auto s = make();
  std::vector<BreakpointHandle> hs;
  pmu::EventAttr off = breakpoint_attr(0x1000, 4, BpType::kW);
  off.disabled = true;
  auto d = s->breakpoints().register_cpu_hw_breakpoint(off, {}, CpuId(0));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->event()->state(), pmu::EventState::kOff);
  EXPECT_EQ(regs(*s, 0).dr7, 0u);
  for (int i = 0; i < 3; ++i) {
    auto h = s->breakpoints().register_cpu_hw_breakpoint(
        breakpoint_attr(0x100 + 8 * static_cast<std::uint64_t>(i), 8, BpType::kW), {}, CpuId(0));
    ASSERT_TRUE(h);
    hs.push_back(std::move(*h));
  }
  auto h = s->breakpoints().register_cpu_hw_breakpoint(breakpoint_attr(0x200, 8, BpType::kW), {},
                                                       CpuId(0));
  ASSERT_FALSE(h);
  EXPECT_EQ(h.error().code(), ErrorCode::kNoSpc);
  ASSERT_TRUE(d->enable());
  EXPECT_EQ(d->event()->state(), pmu::EventState::kActive);
  EXPECT_EQ(regs(*s, 0).dr[3], 0x1000u);
  hs.clear();
  EXPECT_TRUE(d->close());
  EXPECT_FALSE(s->arbiter().is_used());
}

TEST(HwBreakpoint, ModifyToAFullPoolFailsAndKeepsTheBreakpoint) {
  // arm64 keeps separate pools (6 instruction, 4 data registers): a data -> execute change
  // needs an instruction slot.
  auto s = make(2, Arch::kArm64);
  TaskId t = *s->machine().create_task();
  std::vector<BreakpointHandle> hs;
  for (int i = 0; i < 6; ++i) {
    auto h = s->breakpoints().register_user_hw_breakpoint(
        breakpoint_attr(0x400000 + 4 * static_cast<std::uint64_t>(i), 4, BpType::kX), {}, t);
    ASSERT_TRUE(h) << h.error().to_string();
    hs.push_back(std::move(*h));
  }
  auto data =
      s->breakpoints().register_user_hw_breakpoint(breakpoint_attr(0x1000, 4, BpType::kR), {}, t);
  ASSERT_TRUE(data) << data.error().to_string();
  ASSERT_TRUE(s->machine().switch_to(CpuId(0), t));
  EXPECT_EQ(s->bp_pmu().installed(CpuId(0))[6], data->event());
  const State before = state(*s);
  auto r =
      s->breakpoints().modify_user_hw_breakpoint(*data, breakpoint_attr(0x500000, 4, BpType::kX));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoSpc);
  EXPECT_EQ(state(*s), before);
  EXPECT_EQ(data->event()->attr().bp_type, BpType::kR);
  EXPECT_EQ(data->event()->state(), pmu::EventState::kActive);
  EXPECT_EQ(s->bp_pmu().installed(CpuId(0))[6], data->event());
  // A data change within its pool is fine; an instruction slot freed makes the move possible.
  ASSERT_TRUE(
      s->breakpoints().modify_user_hw_breakpoint(*data, breakpoint_attr(0x2000, 8, BpType::kRw)));
  hs.pop_back();
  ASSERT_TRUE(
      s->breakpoints().modify_user_hw_breakpoint(*data, breakpoint_attr(0x500000, 4, BpType::kX)));
  EXPECT_EQ(data->event()->hw_index, 5);
  hs.clear();
  EXPECT_TRUE(data->close());
  EXPECT_FALSE(s->arbiter().is_used());
}

TEST(HwBreakpoint, PtraceBreakpointsAreFlushed) {
  auto s = make();
  sim::Machine& m = s->machine();
  TaskId a = *m.create_task(), b = *m.create_task();
  Hits hits;
  auto id1 = s->breakpoints().register_ptrace_hw_breakpoint(breakpoint_attr(0x1000, 4, BpType::kW),
                                                            hits.handler(), a, 2);
  auto id2 = s->breakpoints().register_ptrace_hw_breakpoint(breakpoint_attr(0x2000, 8, BpType::kRw),
                                                            hits.handler(), a, 0);
  auto id3 = s->breakpoints().register_ptrace_hw_breakpoint(breakpoint_attr(0x3000, 1, BpType::kW),
                                                            hits.handler(), b, 0);
  ASSERT_TRUE(id1 && id2 && id3);
  // Slot order, not registration order.
  EXPECT_EQ(s->breakpoints().ptrace_breakpoints(a), (std::vector<pmu::EventId>{*id2, *id1}));
  EXPECT_EQ(s->breakpoints().ptrace_breakpoints(b), (std::vector<pmu::EventId>{*id3}));
  // A refused one is not recorded; an occupied slot or one outside 0..3 is refused first.
  auto bad = s->breakpoints().register_ptrace_hw_breakpoint(breakpoint_attr(0x1001, 4, BpType::kW),
                                                            {}, a, 1);
  ASSERT_FALSE(bad);
  auto busy = s->breakpoints().register_ptrace_hw_breakpoint(breakpoint_attr(0x1000, 4, BpType::kW),
                                                             {}, a, 2);
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code(), ErrorCode::kBusy);
  EXPECT_TRUE(busy.error().message().starts_with("slot"));
  for (int slot : {-1, 4}) {
    auto out = s->breakpoints().register_ptrace_hw_breakpoint(
        breakpoint_attr(0x1000, 4, BpType::kW), {}, a, slot);
    ASSERT_FALSE(out);
    EXPECT_EQ(out.error().code(), ErrorCode::kInval);
  }
  EXPECT_EQ(s->breakpoints().ptrace_breakpoints(a).size(), 2u);
  s->breakpoints().ptrace_thread(a).dr7 = 0x401;
  s->breakpoints().ptrace_thread(a).virtual_dr6 = 0x4001;
  ASSERT_TRUE(m.switch_to(CpuId(0), a));
  EXPECT_TRUE(write(*s, 0, a, 0x1000, 4));
  EXPECT_TRUE(read(*s, 0, a, 0x2000, 4));
  EXPECT_EQ(hits.size(), 2u);
  // The API owns them; modify works by id.
  ASSERT_TRUE(
      s->breakpoints().modify_user_hw_breakpoint(*id1, breakpoint_attr(0x1100, 4, BpType::kW)));
  EXPECT_EQ(regs(*s, 0).dr[0], 0x1100u);
  s->breakpoints().flush_ptrace_hw_breakpoint(a);
  EXPECT_TRUE(s->breakpoints().ptrace_breakpoints(a).empty());
  // Flush zeroes dr7 and the virtual DR6 too (the state is gone; a new one starts empty).
  EXPECT_EQ(s->breakpoints().find_ptrace_thread(a), nullptr);
  EXPECT_EQ(s->breakpoints().ptrace_thread(a).dr7, 0u);
  EXPECT_EQ(s->breakpoints().ptrace_thread(a).virtual_dr6, 0u);
  EXPECT_EQ(s->core().find(*id1), nullptr);
  EXPECT_EQ(s->core().find(*id2), nullptr);
  EXPECT_EQ(regs(*s, 0).dr7, 0u);
  EXPECT_FALSE(write(*s, 0, a, 0x1100, 4));
  EXPECT_EQ(hits.size(), 2u);
  EXPECT_NE(s->core().find(*id3), nullptr);
  s->breakpoints().flush_ptrace_hw_breakpoint(a);  // nothing left: fine
  // The task's exit flushes too (the System calls flush).
  ASSERT_TRUE(m.exit(b));
  EXPECT_TRUE(s->breakpoints().ptrace_breakpoints(b).empty());
  EXPECT_EQ(s->core().find(*id3), nullptr);
  EXPECT_FALSE(s->arbiter().is_used());
  EXPECT_FALSE(s->breakpoints().is_used());
}

TEST(HwBreakpoint, HandlesReleaseOnDestruction) {
  auto s = make();
  TaskId a = *s->machine().create_task();
  ASSERT_TRUE(s->machine().switch_to(CpuId(0), a));
  {
    auto bp =
        s->breakpoints().register_user_hw_breakpoint(breakpoint_attr(0x1000, 4, BpType::kW), {}, a);
    auto wide =
        s->breakpoints().register_wide_hw_breakpoint(breakpoint_attr(0x2000, 4, BpType::kW), {});
    ASSERT_TRUE(bp && wide);
    EXPECT_EQ(s->core().events().size(), 3u);
    EXPECT_TRUE(x86::dr7::enabled(regs(*s, 0).dr7, 1));
  }
  EXPECT_TRUE(s->core().events().empty());
  EXPECT_FALSE(s->arbiter().is_used());
  EXPECT_EQ(regs(*s, 0).dr7, 0u);
  EXPECT_EQ(regs(*s, 1).dr7, 0u);
  // Move assignment releases the old one; unregister empties the handle.
  auto x =
      s->breakpoints().register_user_hw_breakpoint(breakpoint_attr(0x1000, 4, BpType::kW), {}, a);
  auto y =
      s->breakpoints().register_user_hw_breakpoint(breakpoint_attr(0x2000, 4, BpType::kW), {}, a);
  ASSERT_TRUE(x && y);
  const pmu::EventId xid = x->id(), yid = y->id();
  *x = std::move(*y);
  EXPECT_EQ(s->core().find(xid), nullptr);
  EXPECT_NE(s->core().find(yid), nullptr);
  EXPECT_EQ(x->id(), yid);
  EXPECT_FALSE(y->valid());
  EXPECT_EQ(regs(*s, 0).dr[1], 0x2000u);
  EXPECT_FALSE(x86::dr7::enabled(regs(*s, 0).dr7, 0));
  s->breakpoints().unregister_hw_breakpoint(*x);
  EXPECT_FALSE(x->valid());
  EXPECT_TRUE(s->core().events().empty());
  EXPECT_FALSE(s->arbiter().is_used());
  EXPECT_EQ(regs(*s, 0).dr7, 0u);
}

TEST(HwBreakpoint, ConsumedTrapBitsAreClearedFromDr6OthersStay) {
  auto s = make();
  sim::Machine& m = s->machine();
  TaskId a = *m.create_task();
  Hits hits;
  auto bp = s->breakpoints().register_user_hw_breakpoint(breakpoint_attr(0x1000, 4, BpType::kW),
                                                         hits.handler(), a);
  ASSERT_TRUE(bp);
  ASSERT_TRUE(m.switch_to(CpuId(0), a));
  // A foreign user of DR3, programmed behind the driver's back.
  ASSERT_TRUE(m.set_debug_address(CpuId(0), 3, 0x1000));
  ASSERT_TRUE(
      m.set_dr7(CpuId(0), x86::dr7::install(*m.dr7(CpuId(0)), 3, DrType::kReadWrite, DrLen::k4)));
  ASSERT_TRUE(m.set_single_step(a, true));
  auto o = m.access(CpuId(0), a, AccessKind::kWrite, 0x1000, 4, 1);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->dr6, x86::dr6::trap_bit(0) | x86::dr6::trap_bit(3) | x86::dr6::kSingleStep);
  EXPECT_EQ(hits.size(), 1u);
  // B0 was the driver's and is gone; B3 and BS belong to others and stay.
  EXPECT_EQ(*m.dr6(CpuId(0)), x86::dr6::trap_bit(3) | x86::dr6::kSingleStep);
}

}  // namespace
}  // namespace hwarb::breakpoints
