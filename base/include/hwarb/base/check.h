// hwarb/base/check.h — internal invariants.
//
// HWARB_CHECK(cond, msg) aborts with file, line and message when an internal invariant is broken.
// It is for bugs in hwarb itself, never for bad input: bad input returns an Error.
#pragma once

namespace hwarb::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* cond, const char* msg);
}  // namespace hwarb::detail

#define HWARB_CHECK(cond, msg)                                                  \
  do {                                                                          \
    if (!(cond)) ::hwarb::detail::check_failed(__FILE__, __LINE__, #cond, msg); \
  } while (false)
