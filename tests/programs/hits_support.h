// hits_support.h (tests that need breakpoint hits delivered) — whether this machine delivers
// them, decided by the probe once per test program; HITS_OR_SKIP() skips a test where it does
// not, printing the probe's numbers (never silently).
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <string>

#include "hwarb/linux/probe.h"
#include "skips.h"

namespace hwarb::native::testing {

inline std::optional<std::string> no_hits_reason() {
  static const std::optional<std::string> reason = []() -> std::optional<std::string> {
    auto report = probe();
    if (!report) return "the probe failed: " + report.error().to_string();
    if (report->hits_delivered) return std::nullopt;
    return "this machine does not deliver breakpoint hits (" + std::to_string(report->canary_hits) +
           " of " + std::to_string(report->canary_writes) + " canary writes counted)";
  }();
  return reason;
}

}  // namespace hwarb::native::testing

#define HITS_OR_SKIP()                                             \
  ::hwarb::testing::mark_hardware_test();                          \
  if (auto reason_ = ::hwarb::native::testing::no_hits_reason()) { \
    HWARB_SKIP_UNLESS_REQUIRED("hits", *reason_);                  \
  }

// After a test's own probe, whose report decides its session's hardware mode: some KVM guests
// deliver every canary hit in one probe and lose some in the next, so the test's probe may refuse
// what the program's first one allowed; the test then skips, saying so (never a false failure).
#define HITS_STILL_OR_SKIP(report)                                                         \
  ::hwarb::testing::mark_hardware_test();                                                  \
  if (!(report).hits_delivered) {                                                          \
    HWARB_SKIP_UNLESS_REQUIRED("hits", "this test's probe counted " +                      \
                                           std::to_string((report).canary_hits) + " of " + \
                                           std::to_string((report).canary_writes) +        \
                                           " canary writes (delivery flickers here)");     \
  }
