// skips.h (tests only) — which missing facilities must fail a test instead of skipping it.
//
// HWARB_REQUIRE is a comma-separated list of facilities a runner promises to have:
//   hits   breakpoint hits are delivered (perf_event_open(PERF_TYPE_BREAKPOINT) fires)
//   bts    the intel_bts PMU exists
// A test that would skip for want of a listed facility fails instead, with the same reason. An
// unknown name in HWARB_REQUIRE fails every test binary at start (test_main.cpp), so a misspelt
// requirement is never a silent pass.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace hwarb::testing {

// The facilities HWARB_REQUIRE may name.
inline constexpr std::string_view kFacilities[] = {"hits", "bts"};

// Calls f(name) for each comma-separated name of HWARB_REQUIRE (empty names ignored).
template <typename F>
void for_each_required(F&& f) {
  const char* env = std::getenv("HWARB_REQUIRE");
  std::string_view list = env ? env : "";
  while (!list.empty()) {
    auto comma = list.find(',');
    std::string_view name = list.substr(0, comma);
    if (!name.empty()) f(name);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

// Whether HWARB_REQUIRE names `facility`.
inline bool required(std::string_view facility) {
  bool found = false;
  for_each_required([&](std::string_view name) { found = found || name == facility; });
  return found;
}

}  // namespace hwarb::testing

// Skips the current test for want of FACILITY ("hits", "bts") with REASON (a std::string), or
// fails it when HWARB_REQUIRE names the facility.
#define HWARB_SKIP_UNLESS_REQUIRED(facility, reason)                         \
  do {                                                                       \
    if (::hwarb::testing::required(facility)) {                              \
      GTEST_FAIL() << "HWARB_REQUIRE=" << (facility) << " but " << (reason); \
    }                                                                        \
    GTEST_SKIP() << (reason);                                                \
  } while (0)
