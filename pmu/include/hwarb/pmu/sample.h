// hwarb/pmu/sample.h — what a PMU driver reports when its hardware fires.
//
// Plain values; no behaviour.
#pragma once

#include <cstdint>
#include <optional>

#include "hwarb/base/ids.h"

namespace hwarb::pmu {

// Nanoseconds on the caller's clock (see Clock in pmu.h).
using Time = std::uint64_t;

enum class AccessKind : std::uint8_t { kNone, kRead, kWrite, kExecute, kBranch };

struct Sample {
  std::uint64_t ip = 0;    // instruction pointer of the access (or of the faulting instruction)
  std::uint64_t addr = 0;  // data address (breakpoints) or branch target
  std::optional<TaskId> task;
  CpuId cpu{};
  Time time = 0;
  AccessKind access = AccessKind::kNone;

  friend bool operator==(const Sample&, const Sample&) = default;
};

}  // namespace hwarb::pmu
