// hwarb/base/bp_type.h — what a breakpoint watches, as perf's attr.bp_type spells it.
//
// The values are Linux's HW_BREAKPOINT_* (<linux/hw_breakpoint.h>), so that the perf-event core,
// the breakpoint PMU and the system-call layer's perf_event_open pass one type with no
// translation; linux/sys checks the values against the kernel header.
#pragma once

#include <cstdint>
#include <string_view>

namespace hwarb {

enum class BpType : std::uint8_t { kEmpty = 0, kR = 1, kW = 2, kRw = 3, kX = 4 };

// "empty", "r", "w", "rw", "x"; "?" for a value outside the enumeration.
constexpr std::string_view to_string(BpType type) {
  switch (type) {
    case BpType::kEmpty:
      return "empty";
    case BpType::kR:
      return "r";
    case BpType::kW:
      return "w";
    case BpType::kRw:
      return "rw";
    case BpType::kX:
      return "x";
  }
  return "?";
}

}  // namespace hwarb
