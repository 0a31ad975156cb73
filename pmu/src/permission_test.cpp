#include "hwarb/pmu/permission.h"

#include <gtest/gtest.h>

namespace hwarb::pmu {
namespace {

EventAttr bp(bool exclude_kernel) {
  EventAttr a;
  a.type = EventType::kBreakpoint;
  a.bp_type = BpType::kRw;
  a.bp_len = 4;
  a.exclude_kernel = exclude_kernel;
  return a;
}

const EventOwner kTask{TaskId(1), std::nullopt};
const EventOwner kCpu{std::nullopt, CpuId(0)};

TEST(Permission, KernelEventsNeedParanoidAtMostOneOrPerfmon) {
  for (int paranoid : {-1, 0, 1, 2, 3}) {
    SCOPED_TRACE(paranoid);
    EXPECT_TRUE(check_open_permission(bp(false), Credentials::root(), paranoid));
    EXPECT_TRUE(check_open_permission(bp(true), Credentials::user(), paranoid));
    auto r = check_open_permission(bp(false), Credentials::user(), paranoid);
    EXPECT_EQ(r.has_value(), paranoid <= 1);
    if (!r) {
      EXPECT_EQ(r.error().code(), ErrorCode::kAcces);
      EXPECT_TRUE(r.error().message().starts_with("exclude_kernel: ")) << r.error().message();
    }
  }
  // CAP_PERFMON alone is enough (perfmon_capable), CAP_SYS_ADMIN is not needed.
  EXPECT_TRUE(check_open_permission(bp(false), Credentials{.perfmon = true}, 2));
}

TEST(Permission, CpuEventsNeedParanoidAtMostZeroOrPerfmon) {
  for (int paranoid : {-1, 0, 1, 2, 3}) {
    SCOPED_TRACE(paranoid);
    EXPECT_TRUE(check_context_permission(kTask, Credentials::user(), paranoid));
    EXPECT_TRUE(check_context_permission(kCpu, Credentials::root(), paranoid));
    auto r = check_context_permission(kCpu, Credentials::user(), paranoid);
    EXPECT_EQ(r.has_value(), paranoid <= 0);
    if (!r) {
      EXPECT_EQ(r.error().code(), ErrorCode::kAcces);
      EXPECT_TRUE(r.error().message().starts_with("cpu: ")) << r.error().message();
    }
  }
  // A task event bound to one CPU is a task event.
  EXPECT_TRUE(check_context_permission({TaskId(1), CpuId(0)}, Credentials::user(), 2));
}

TEST(Permission, PerfToolFallsBackToUserOnlyOnEaccesAboveOne) {
  const Error eacces(ErrorCode::kAcces, "x");
  const Error eperm(ErrorCode::kPerm, "x");
  EXPECT_TRUE(perf_tool_retries_user_only(bp(false), eacces, 2));
  EXPECT_TRUE(perf_tool_retries_user_only(bp(false), eacces, 3));
  EXPECT_FALSE(perf_tool_retries_user_only(bp(false), eacces, 1));  // a CPU event's EACCES
  EXPECT_FALSE(perf_tool_retries_user_only(bp(true), eacces, 2));   // excluded already
  EXPECT_FALSE(perf_tool_retries_user_only(bp(false), eperm, 2));
  EventAttr user_excluded = bp(false);
  user_excluded.exclude_user = true;
  EXPECT_FALSE(perf_tool_retries_user_only(user_excluded, eacces, 2));
}

}  // namespace
}  // namespace hwarb::pmu
