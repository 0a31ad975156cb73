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
  // Data accesses (breakpoints): the access's size in bytes and the memory value before and after
  // it (for reads both are the value read). 0 where the hardware cannot tell.
  int size = 0;
  std::uint64_t old_value = 0;
  std::uint64_t new_value = 0;

  friend bool operator==(const Sample&, const Sample&) = default;
};

}  // namespace hwarb::pmu
