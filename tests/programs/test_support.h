// test_support.h (the real-process tests only) — the probes that decide whether this machine lets
// the tests trace a child and open breakpoint events. A refusal skips the test with the kernel's
// reason printed (never silently); any other failure is a test failure.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "hwarb/base/error.h"
#include "skips.h"

namespace hwarb::native::testing {

// EPERM/EACCES: the environment forbids it (seccomp, Yama, a container, perf_event_paranoid);
// ENOENT/ENODEV/EOPNOTSUPP from perf_event_open: no breakpoint PMU.
inline bool refused(const Error& e) {
  switch (e.code()) {
    case ErrorCode::kPerm:
    case ErrorCode::kAcces:
    case ErrorCode::kNoEnt:
    case ErrorCode::kNoDev:
    case ErrorCode::kOpNotSupp:
      return true;
    default:
      return false;
  }
}

inline std::string skip_reason(const char* what, const Error& e) {
  return std::string(what) + " refused on this machine: " + e.to_string();
}

}  // namespace hwarb::native::testing

// Spawns an Inferior of `argv` with its stdout into Capture `out` as `inf`; a refusal to trace
// skips the test with the reason, any other failure fails it. (Needs hwarb/linux/inferior.h.)
#define SPAWN_OR_SKIP(inf, argv, out)                                                      \
  auto inf = ::hwarb::native::Inferior::spawn(argv, {.stdout_fd = (out).fd()});            \
  if (!inf && ::hwarb::native::testing::refused(inf.error())) {                            \
    GTEST_SKIP() << ::hwarb::native::testing::skip_reason("tracing a child", inf.error()); \
  }                                                                                        \
  ASSERT_TRUE(inf) << inf.error().to_string()
