#include "hwarb/breakpoints/ksym_tracer.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "hwarb/sim/system.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::breakpoints {
namespace {

using pmu::BpType;
using sim::AccessKind;

constexpr std::uint64_t kJiffies = 0xffffffff82a0b000;
constexpr std::uint64_t kNrFiles = 0xffffffff82a0b040;
constexpr std::uint64_t kIp = 0xffffffff81001234;

KernelSymbol sym(std::string name, std::uint64_t addr, std::uint64_t size) {
  KernelSymbol s;
  s.name = std::move(name);
  s.addr = addr;
  s.size = size;
  s.type = 'D';
  return s;
}

std::unique_ptr<sim::System> make(int cpus) {
  auto s = sim::System::create({cpus, Arch::kX86_64, arbiter::FlexiblePolicy::kMultiplexed});
  EXPECT_TRUE(s.has_value());
  auto& syms = (*s)->kernel_symbols();
  EXPECT_TRUE(syms.add(sym("jiffies", kJiffies, 8)));
  EXPECT_TRUE(syms.add(sym("nr_files", kNrFiles, 8)));
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(syms.add(sym("v" + std::to_string(i), kNrFiles + 0x40 * (i + 1), 0)));
  }
  return std::move(*s);
}

struct Hits {
  std::vector<KsymHit> hits;
  KsymTracer::HitSink sink() {
    return [this](const KsymHit& h) { hits.push_back(h); };
  }
};

// Every CPU's DR0-DR3/DR6/DR7, the arbiter's and the core's state: what a failed call must leave.
struct State {
  std::string dump;
  std::vector<pmu::EventId> events;
  std::vector<sim::DebugRegisters> regs;
  friend bool operator==(const State&, const State&) = default;
};
State state(sim::System& s) {
  State st{s.arbiter().dump(), s.core().events(), {}};
  for (int c = 0; c < s.machine().possible_cpus(); ++c) {
    st.regs.push_back(*s.machine().debug_registers(CpuId(c)));
  }
  return st;
}

bool kwrite(sim::System& s, int cpu, std::uint64_t addr, std::uint64_t ip = kIp) {
  auto o = s.machine().kernel_access(CpuId(cpu), AccessKind::kWrite, addr, 4, 1, ip);
  EXPECT_TRUE(o.has_value()) << o.error().message();
  return o && o->exceptions > 0;
}
bool kread(sim::System& s, int cpu, std::uint64_t addr) {
  auto o = s.machine().kernel_access(CpuId(cpu), AccessKind::kRead, addr, 4, 0, kIp);
  EXPECT_TRUE(o.has_value()) << o.error().message();
  return o && o->exceptions > 0;
}

TEST(KsymTracer, TracesASymbolOnEveryCpuWithAKernelBreakpoint) {
  auto s = make(4);
  KsymTracer& t = s->ksym_tracer();
  Hits h;
  t.set_hit_sink(h.sink());
  ASSERT_TRUE(t.trace("jiffies", BpType::kRw));
  const std::vector<pmu::EventId> events = s->core().events();
  ASSERT_EQ(events.size(), 4u);
  for (pmu::EventId id : events) {
    const pmu::EventAttr& a = s->core().find(id)->attr();
    EXPECT_TRUE(a.privileged);
    EXPECT_FALSE(a.exclude_kernel);
    EXPECT_EQ(a.bp_addr, kJiffies);
    EXPECT_EQ(a.bp_len, 4u);
  }
  TaskId task = *s->machine().create_task();
  ASSERT_TRUE(s->machine().switch_to(CpuId(2), task));
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(s->machine().debug_registers(CpuId(c))->dr[0], kJiffies) << c;
    EXPECT_TRUE(kwrite(*s, c, kJiffies, kIp + c)) << c;
  }
  EXPECT_TRUE(kread(*s, 1, kJiffies + 2));
  EXPECT_FALSE(kwrite(*s, 0, kJiffies + 4));  // len 4: the upper half of jiffies is not traced
  ASSERT_EQ(h.hits.size(), 5u);
  for (int c = 0; c < 4; ++c) {
    const KsymHit& hit = h.hits[static_cast<std::size_t>(c)];
    EXPECT_EQ(hit.symbol, "jiffies+0x0");
    EXPECT_EQ(hit.cpu, CpuId(c));
    EXPECT_EQ(hit.ip, kIp + static_cast<std::uint64_t>(c));
    EXPECT_EQ(hit.access, pmu::AccessKind::kWrite);
    EXPECT_EQ(hit.count, static_cast<std::uint64_t>(c + 1));
    EXPECT_EQ(hit.task, c == 2 ? std::optional<TaskId>(task) : std::nullopt);
  }
  EXPECT_EQ(h.hits[4].access, pmu::AccessKind::kRead);
  EXPECT_EQ(h.hits[4].access_addr, kJiffies + 2);
  ASSERT_EQ(t.entries().size(), 1u);
  EXPECT_EQ(t.entries()[0].count, 5u);
  EXPECT_EQ(t.entries()[0].type, BpType::kRw);
}

// The 2009 ksym tracer's startup selftest (trace_selftest_startup_ksym): trace ksym_selftest_dummy
// rw, touch it, and the tracer has recorded the access.
TEST(KsymTracer, TheStartupSelftestOf2009Passes) {
  auto s = make(2);
  constexpr std::uint64_t kDummy = 0xffffffff83000100;
  ASSERT_TRUE(s->kernel_symbols().add(sym("ksym_selftest_dummy", kDummy, 4)));
  ASSERT_TRUE(s->ksym_tracer().trace("ksym_selftest_dummy", BpType::kRw));
  EXPECT_TRUE(kwrite(*s, 0, kDummy));  // ksym_selftest_dummy = 0
  ASSERT_EQ(s->ksym_tracer().entries().size(), 1u);
  EXPECT_EQ(s->ksym_tracer().entries()[0].count, 1u);
  s->ksym_tracer().reset();
  EXPECT_TRUE(s->ksym_tracer().entries().empty());
  EXPECT_FALSE(s->arbiter().is_used());
}

// The 2009 ksym tracer's defect: process_new_ksym_entry set the handle to NULL before
// PTR_ERR(handle), so a failed register_wide_hw_breakpoint returned 0 (success) with no entry. The
// error must come back, and nothing may be left: no entry, no event, no slot, no register on any
// CPU.
TEST(KsymTracer, AFailedWideRegistrationReturnsItsErrorAndLeavesNothing) {
  auto s = make(4);
  std::vector<BreakpointHandle> full;
  for (int i = 0; i < 4; ++i) {  // cpu 2 has no free slot
    auto h = s->breakpoints().register_cpu_hw_breakpoint(
        breakpoint_attr(0x1000 + 8 * i, 4, BpType::kW), nullptr, CpuId(2));
    ASSERT_TRUE(h) << h.error().message();
    full.push_back(std::move(*h));
  }
  const State before = state(*s);
  auto r = s->ksym_tracer().trace("jiffies", BpType::kW);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoSpc) << r.error().message();
  EXPECT_TRUE(s->ksym_tracer().entries().empty());
  EXPECT_EQ(state(*s), before);
  for (int c : {0, 1, 3}) {
    EXPECT_EQ(s->machine().debug_registers(CpuId(c))->dr7, 0u) << c;
    EXPECT_FALSE(kwrite(*s, c, kJiffies)) << c;
  }
  // Once cpu 2 has room the same request is admitted everywhere.
  full.pop_back();
  ASSERT_TRUE(s->ksym_tracer().trace("jiffies", BpType::kW));
  EXPECT_EQ(s->ksym_tracer().entries().size(), 1u);
  EXPECT_TRUE(kwrite(*s, 2, kJiffies));
}

TEST(KsymTracer, RefusesReadAndExecuteUnknownSymbolsAndDuplicates) {
  auto s = make(2);
  KsymTracer& t = s->ksym_tracer();
  const State before = state(*s);
  for (BpType type : {BpType::kR, BpType::kX}) {
    auto r = t.trace("jiffies", type);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), ErrorCode::kInval);
    EXPECT_EQ(r.error().message().rfind("type: ", 0), 0u) << r.error().message();
  }
  auto unknown = t.trace("no_such_symbol", BpType::kW);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code(), ErrorCode::kNoEnt);
  auto unaligned = t.trace("jiffies+2", BpType::kW);  // len 4 needs a 4-aligned address
  ASSERT_FALSE(unaligned);
  EXPECT_EQ(unaligned.error().code(), ErrorCode::kInval);
  EXPECT_EQ(state(*s), before);
  EXPECT_TRUE(t.entries().empty());

  ASSERT_TRUE(t.trace("jiffies", BpType::kW));
  auto dup = t.trace("jiffies+0", BpType::kW);  // the same address, the same type
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code(), ErrorCode::kInval);
  EXPECT_EQ(dup.error().message(), "symbol: jiffies+0x0 is traced already with w");
  EXPECT_EQ(t.entries().size(), 1u);
  EXPECT_EQ(s->core().events().size(), 2u);
}

TEST(KsymTracer, AtMostHbpNumSymbols) {
  auto s = make(2);
  KsymTracer& t = s->ksym_tracer();
  for (int i = 0; i < KsymTracer::kMaxEntries; ++i) {
    ASSERT_TRUE(t.trace("v" + std::to_string(i), BpType::kW));
  }
  const State before = state(*s);
  auto r = t.trace("jiffies", BpType::kW);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoSpc);
  EXPECT_EQ(r.error().message(), "symbol: the ksym tracer traces at most 4 symbols");
  EXPECT_EQ(state(*s), before);
}

TEST(KsymTracer, ChangesTheTypeKeepingTheCount) {
  auto s = make(2);
  KsymTracer& t = s->ksym_tracer();
  Hits h;
  t.set_hit_sink(h.sink());
  ASSERT_TRUE(t.trace("nr_files", BpType::kW));
  EXPECT_TRUE(kwrite(*s, 0, kNrFiles));
  EXPECT_FALSE(kread(*s, 0, kNrFiles));
  ASSERT_TRUE(t.trace("nr_files", BpType::kRw));
  EXPECT_TRUE(kread(*s, 1, kNrFiles));
  ASSERT_EQ(t.entries().size(), 1u);
  EXPECT_EQ(t.entries()[0].type, BpType::kRw);
  EXPECT_EQ(t.entries()[0].count, 2u);
  ASSERT_EQ(h.hits.size(), 2u);
  EXPECT_EQ(h.hits[1].type, BpType::kRw);
  EXPECT_EQ(h.hits[1].count, 2u);
  EXPECT_EQ(s->core().events().size(), 2u);  // the old events are gone
  EXPECT_EQ(s->machine().debug_registers(CpuId(0))->dr7,
            x86::dr7::install(0, 0, x86::DrType::kReadWrite, x86::DrLen::k4));
}

// A type change whose new registration fails puts the old breakpoint back: the entry, its type
// and its count are as before, and it still traces.
TEST(KsymTracer, AFailedTypeChangeKeepsTheOldEntry) {
  auto s = make(2);
  KsymTracer& t = s->ksym_tracer();
  ASSERT_TRUE(t.trace("nr_files", BpType::kW));
  EXPECT_TRUE(kwrite(*s, 1, kNrFiles));
  std::vector<sim::DebugRegisters> regs;
  for (int c = 0; c < 2; ++c) regs.push_back(*s->machine().debug_registers(CpuId(c)));
  s->arbiter().inject_fault_at(1);
  auto r = t.trace("nr_files", BpType::kRw);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoMem) << r.error().message();
  ASSERT_EQ(t.entries().size(), 1u);
  EXPECT_EQ(t.entries()[0].type, BpType::kW);
  EXPECT_EQ(t.entries()[0].count, 1u);
  for (int c = 0; c < 2; ++c) {
    const sim::DebugRegisters now = *s->machine().debug_registers(CpuId(c));
    EXPECT_EQ(now.dr[0], regs[static_cast<std::size_t>(c)].dr[0]);
    EXPECT_EQ(now.dr7, regs[static_cast<std::size_t>(c)].dr7);
  }
  EXPECT_FALSE(kread(*s, 0, kNrFiles));
  EXPECT_TRUE(kwrite(*s, 0, kNrFiles));
  EXPECT_EQ(t.entries()[0].count, 2u);
}

TEST(KsymTracer, UntraceReleasesEveryCpu) {
  auto s = make(3);
  KsymTracer& t = s->ksym_tracer();
  const State before = state(*s);
  ASSERT_TRUE(t.trace("jiffies", BpType::kW));
  ASSERT_TRUE(t.untrace("jiffies+0x0"));
  EXPECT_TRUE(t.entries().empty());
  EXPECT_EQ(s->core().events().size(), 0u);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(s->machine().debug_registers(CpuId(c))->dr7, 0u);
  EXPECT_FALSE(kwrite(*s, 0, kJiffies));
  auto again = t.untrace("jiffies");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code(), ErrorCode::kNoEnt);
  EXPECT_EQ(t.untrace("nope").error().code(), ErrorCode::kNoEnt);
  EXPECT_FALSE(s->arbiter().is_used());
  EXPECT_EQ(state(*s).regs, before.regs);
}

// Kernel-mode traps: an event that excludes user mode still sees kernel accesses, and a kernel
// access on an idle CPU has no task.
TEST(KernelAccess, ExcludeUserSeesKernelAccessesOnly) {
  auto s = make(1);
  std::vector<pmu::Sample> samples;
  pmu::EventAttr a = breakpoint_attr(kJiffies, 4, BpType::kW);
  a.exclude_user = true;
  auto bp = s->breakpoints().register_wide_hw_breakpoint(
      a, [&](pmu::Event&, const pmu::Sample& x) { samples.push_back(x); });
  ASSERT_TRUE(bp) << bp.error().message();
  EXPECT_TRUE(kwrite(*s, 0, kJiffies));
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_FALSE(samples[0].task.has_value());
  EXPECT_EQ(samples[0].ip, kIp);
  EXPECT_EQ(*s->machine().dr6(CpuId(0)) & x86::dr6::trap_bit(0), 0u);  // consumed
  TaskId task = *s->machine().create_task();
  ASSERT_TRUE(s->machine().switch_to(CpuId(0), task));
  ASSERT_TRUE(s->machine().access(CpuId(0), task, AccessKind::kWrite, kJiffies, 4, 1));
  EXPECT_EQ(samples.size(), 1u);  // the user-mode access is eaten
}

TEST(KernelAccess, RefusesUserSpaceAddresses) {
  auto s = make(1);
  auto r = s->machine().kernel_access(CpuId(0), AccessKind::kWrite, 0x1000, 4, 1, kIp);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_EQ(r.error().message().rfind("addr: 0x1000 is a user-space address", 0), 0u)
      << r.error().message();
  EXPECT_EQ(s->machine().kernel_access(CpuId(1), AccessKind::kWrite, kJiffies, 4).error().code(),
            ErrorCode::kInval);  // no cpu 1
}

}  // namespace
}  // namespace hwarb::breakpoints
