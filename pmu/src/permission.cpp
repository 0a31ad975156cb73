#include "hwarb/pmu/permission.h"

#include <string>

namespace hwarb::pmu {

Result<void> check_open_permission(const EventAttr& attr, Credentials who, int paranoid) {
  if (!attr.exclude_kernel && paranoid > 1 && !who.perfmon) {
    return make_error(ErrorCode::kAcces,
                      "exclude_kernel: not set, and perf_event_paranoid " +
                          std::to_string(paranoid) +
                          " (> 1) forbids kernel events to a caller without CAP_PERFMON");
  }
  return {};
}

Result<void> check_context_permission(const EventOwner& owner, Credentials who, int paranoid) {
  if (!owner.task && paranoid > 0 && !who.perfmon) {
    return make_error(ErrorCode::kAcces, "cpu: a CPU event, and perf_event_paranoid " +
                                             std::to_string(paranoid) +
                                             " (> 0) forbids them to a caller without CAP_PERFMON");
  }
  return {};
}

bool perf_tool_retries_user_only(const EventAttr& attr, const Error& error, int paranoid) {
  return error.code() == ErrorCode::kAcces && !attr.exclude_kernel && !attr.exclude_user &&
         paranoid > 1;
}

}  // namespace hwarb::pmu
