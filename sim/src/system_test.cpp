#include "hwarb/sim/system.h"

#include <gtest/gtest.h>

#include <vector>

#include "hwarb/x86/debugreg.h"

namespace hwarb::sim {
namespace {

using breakpoints::breakpoint_attr;
using pmu::BpType;

std::unique_ptr<System> make(int cpus = 2) {
  auto s =
      System::create({cpus, breakpoints::Arch::kX86_64, arbiter::FlexiblePolicy::kMultiplexed});
  EXPECT_TRUE(s.has_value());
  return std::move(*s);
}

TEST(System, TaskBreakpointFiresOnlyWhileItsTaskRuns) {
  auto s = make();
  Machine& m = s->machine();
  TaskId a = *m.create_task(), b = *m.create_task();
  std::vector<pmu::Sample> hits;
  auto bp = s->breakpoints().register_user_hw_breakpoint(
      breakpoint_attr(0x1000, 4, BpType::kW),
      [&](pmu::Event&, const pmu::Sample& x) { hits.push_back(x); }, a);
  ASSERT_TRUE(bp.has_value());
  ASSERT_TRUE(m.switch_to(CpuId(0), a).has_value());
  EXPECT_EQ(*m.dr7(CpuId(0)), x86::dr7::install(0, 0, x86::DrType::kWrite, x86::DrLen::k4));
  ASSERT_TRUE(m.access(CpuId(0), a, AccessKind::kWrite, 0x1002, 1, 7).has_value());
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].addr, 0x1002u);
  EXPECT_EQ(hits[0].access, pmu::AccessKind::kWrite);
  EXPECT_EQ(*m.dr6(CpuId(0)), 0u);
  ASSERT_TRUE(m.switch_to(CpuId(0), b).has_value());
  EXPECT_EQ(*m.dr7(CpuId(0)), 0u);
  ASSERT_TRUE(m.access(CpuId(0), b, AccessKind::kWrite, 0x1000, 4, 7).has_value());
  EXPECT_EQ(hits.size(), 1u);
  EXPECT_TRUE(bp->close());
  EXPECT_FALSE(s->arbiter().is_used());
}

TEST(System, ForkInheritsAndExitCleansUp) {
  auto s = make();
  Machine& m = s->machine();
  TaskId a = *m.create_task();
  std::vector<pmu::Sample> hits;
  pmu::EventAttr attr = breakpoint_attr(0x2000, 8, BpType::kRw);
  attr.inherit = true;
  auto bp = s->breakpoints().register_user_hw_breakpoint(
      attr, [&](pmu::Event&, const pmu::Sample& x) { hits.push_back(x); }, a);
  ASSERT_TRUE(bp.has_value());
  TaskId c = *m.fork(a);
  ASSERT_TRUE(m.switch_to(CpuId(1), c).has_value());
  ASSERT_TRUE(m.access(CpuId(1), c, AccessKind::kRead, 0x2007, 1).has_value());
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].task, c);
  ASSERT_TRUE(m.exit(c).has_value());
  EXPECT_EQ(bp->read()->count, 1u);
  ASSERT_TRUE(m.exit(a).has_value());
  EXPECT_TRUE(bp->close());
  EXPECT_FALSE(s->arbiter().is_used());
}

TEST(System, BreakpointOnAnUnknownTaskIsEsrch) {
  auto s = make();
  auto bp = s->breakpoints().register_user_hw_breakpoint(breakpoint_attr(0x1000, 4, BpType::kW), {},
                                                         TaskId(42));
  ASSERT_FALSE(bp.has_value());
  EXPECT_EQ(bp.error().code(), ErrorCode::kSrch);
  EXPECT_TRUE(bp.error().message().starts_with("task"));
  EXPECT_FALSE(s->arbiter().is_used());
}

}  // namespace
}  // namespace hwarb::sim
