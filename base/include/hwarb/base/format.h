// hwarb/base/format.h — the one way numbers are printed in messages and reports.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace hwarb {

// "0x1f" (lowercase, no padding); 0 prints as "0".
inline std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%#llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace hwarb
