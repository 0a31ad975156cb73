#include "hwarb/breakpoints/validate.h"

#include <gtest/gtest.h>

namespace hwarb::breakpoints {
namespace {

pmu::EventAttr bp(std::uint64_t addr, std::uint64_t len, pmu::BpType type) {
  pmu::EventAttr a;
  a.bp_addr = addr;
  a.bp_len = len;
  a.bp_type = type;
  return a;
}

TEST(Validate, X86RefusesReadOnly) {
  auto r = validate_breakpoint(Arch::kX86_64, bp(0x1000, 4, pmu::BpType::kR));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(r.error().message().starts_with("type"));
}

}  // namespace
}  // namespace hwarb::breakpoints
