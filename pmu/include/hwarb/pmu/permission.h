// hwarb/pmu/permission.h — who may open a perf event: Linux's perf_event_open permission checks
// on the caller's credentials and the sysctl kernel.perf_event_paranoid, and perf's tool fallback.
//
// Pure functions; no state. perf_event_open(2) answers in this order (kernel/events/core.c; the
// order and every errno measured on this project's 6.18 kernel, docs/scenarios.md):
//   1. perf_allow_kernel, before the event exists: exclude_kernel clear, paranoid > 1 and a
//      caller that is not perfmon_capable (CAP_PERFMON or CAP_SYS_ADMIN): EACCES naming
//      exclude_kernel (check_open_permission). It wins over every PMU error (ENOSPC included).
//   2. the PMU creates the event: its own checks (for breakpoints the slots, then validate.h,
//      whose kernel-space check asks the caller's CAP_SYS_ADMIN, Credentials::sys_admin).
//   3. perf_allow_cpu (find_get_context), after the event exists: a CPU event (no task),
//      paranoid > 0 and a caller that is not perfmon_capable: EACCES naming cpu
//      (check_context_permission). So on a full CPU it is ENOSPC, a bad field EINVAL or EPERM.
// Values of paranoid below -1 act as -1 and above 2 as 2 (mainline compares with > 0 and > 1
// only; this kernel answers 3 as 2: it has no Debian-style paranoid=3 restriction).
#pragma once

#include "hwarb/base/error.h"
#include "hwarb/pmu/event.h"

namespace hwarb::pmu {

// Linux's default kernel.perf_event_paranoid.
inline constexpr int kDefaultParanoid = 2;

// What the perf checks look at in the opener's credentials.
struct Credentials {
  bool perfmon = false;    // perfmon_capable(): CAP_PERFMON or CAP_SYS_ADMIN
  bool sys_admin = false;  // capable(CAP_SYS_ADMIN): breakpoints in kernel space
  static constexpr Credentials root() { return {.perfmon = true, .sys_admin = true}; }
  static constexpr Credentials user() { return {}; }
  friend bool operator==(const Credentials&, const Credentials&) = default;
};

// Case 1 above: EACCES naming exclude_kernel, else ok.
Result<void> check_open_permission(const EventAttr& attr, Credentials who, int paranoid);
// Case 3 above: EACCES naming cpu for an owner without a task, else ok.
Result<void> check_context_permission(const EventOwner& owner, Credentials who, int paranoid);

// perf's tool (evsel__fallback): when an open of an event that does not exclude the kernel (nor
// the user) fails with EACCES while paranoid > 1, perf retries it once with exclude_kernel set
// (and exclude_hv, which breakpoints ignore). True when that retry happens.
bool perf_tool_retries_user_only(const EventAttr& attr, const Error& error, int paranoid);

}  // namespace hwarb::pmu
