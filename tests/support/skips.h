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
#include <set>
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

// The tests that rely on breakpoint hits being delivered (HITS_OR_SKIP marks the running one).
// Some KVM guests deliver them yet now and then lose one, or stop delivering on one CPU for a
// while: test_main.cpp runs a failed test of this set once more, alone in a fresh process, and
// when that run passes it says and counts the first failure as a skip. Any other failure stands.
inline std::set<std::string>& hardware_tests() {
  static std::set<std::string> names;
  return names;
}
inline void mark_hardware_test() {
  if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info()) {
    hardware_tests().insert(std::string(info->test_suite_name()) + "." + info->name());
  }
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
