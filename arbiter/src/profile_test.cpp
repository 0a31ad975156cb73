#include "hwarb/arbiter/profile.h"

#include <gtest/gtest.h>

namespace hwarb::arbiter {
namespace {

TEST(ProfileTest, X86SharesOnePoolOfFour) {
  ArchProfile p = ArchProfile::x86_64();
  EXPECT_TRUE(p.shared());
  EXPECT_EQ(p.pool_count(), 1);
  EXPECT_EQ(p.pool_of(SlotType::kInst), p.pool_of(SlotType::kData));
  EXPECT_EQ(p.slots(SlotType::kInst), 4);
  EXPECT_EQ(p.max_data_len(), 8);
  EXPECT_EQ(p.pool_name(0), "shared");
}

TEST(ProfileTest, I386HasNoEightByteLength) {
  ArchProfile p = ArchProfile::i386();
  EXPECT_TRUE(p.shared());
  EXPECT_EQ(p.slots(SlotType::kData), 4);
  EXPECT_EQ(p.max_data_len(), 4);
}

TEST(ProfileTest, Arm64HasSeparatePools) {
  ArchProfile p = ArchProfile::arm64();
  EXPECT_FALSE(p.shared());
  EXPECT_EQ(p.pool_count(), 2);
  EXPECT_EQ(p.slots(SlotType::kInst), 6);
  EXPECT_EQ(p.slots(SlotType::kData), 4);
  EXPECT_NE(p.pool_of(SlotType::kInst), p.pool_of(SlotType::kData));
  EXPECT_EQ(p.pool_name(p.pool_of(SlotType::kData)), "data");
}

TEST(ProfileTest, CustomValidatesEachField) {
  auto ok = ArchProfile::custom(2, 3, false);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->slots(SlotType::kInst), 2);
  EXPECT_EQ(ok->slots(SlotType::kData), 3);

  auto zero = ArchProfile::custom(0, 3, false);
  ASSERT_FALSE(zero.has_value());
  EXPECT_EQ(zero.error().code(), ErrorCode::kInval);
  EXPECT_NE(zero.error().message().find("inst_slots"), std::string::npos);

  auto big = ArchProfile::custom(2, kMaxSlots + 1, false);
  ASSERT_FALSE(big.has_value());
  EXPECT_NE(big.error().message().find("data_slots"), std::string::npos);

  auto mismatch = ArchProfile::custom(2, 3, true);
  ASSERT_FALSE(mismatch.has_value());
  EXPECT_EQ(mismatch.error().code(), ErrorCode::kInval);

  auto shared = ArchProfile::custom(5, 5, true);
  ASSERT_TRUE(shared.has_value());
  EXPECT_EQ(shared->pool_count(), 1);
}

TEST(ProfileTest, ByName) {
  EXPECT_EQ(ArchProfile::by_name("arm64")->name(), "arm64");
  auto bad = ArchProfile::by_name("riscv");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message().find("arch"), std::string::npos);
}

}  // namespace
}  // namespace hwarb::arbiter
