#include "hwarb/pmu/ring.h"

#include <gtest/gtest.h>

namespace hwarb::pmu {
namespace {

Sample s(std::uint64_t ip) {
  Sample x;
  x.ip = ip;
  return x;
}

TEST(SampleRingTest, StopWhenFullDropsNewAndCountsLost) {
  SampleRing r(3, RingMode::kStopWhenFull);
  for (int i = 1; i <= 5; ++i) r.push(s(i));
  EXPECT_EQ(r.size(), 3u);
  EXPECT_EQ(r.lost(), 2u);
  EXPECT_EQ(r.at(0).ip, 1u);
  EXPECT_EQ(r.at(2).ip, 3u);
  auto all = r.drain();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].ip, 1u);
  EXPECT_TRUE(r.empty());
  EXPECT_TRUE(r.push(s(9)));
}

TEST(SampleRingTest, OverwriteDropsOldestAndCountsLost) {
  SampleRing r(3, RingMode::kOverwrite);
  for (int i = 1; i <= 7; ++i) r.push(s(i));
  EXPECT_EQ(r.size(), 3u);
  EXPECT_EQ(r.lost(), 4u);
  EXPECT_EQ(r.pop()->ip, 5u);
  EXPECT_EQ(r.pop()->ip, 6u);
  EXPECT_EQ(r.pop()->ip, 7u);
  EXPECT_FALSE(r.pop().has_value());
}

TEST(SampleRingTest, ZeroCapacityIsOneAndClearResets) {
  SampleRing r(0, RingMode::kStopWhenFull);
  EXPECT_EQ(r.capacity(), 1u);
  r.push(s(1));
  r.push(s(2));
  EXPECT_EQ(r.lost(), 1u);
  r.clear();
  EXPECT_EQ(r.lost(), 0u);
  EXPECT_TRUE(r.empty());
}

}  // namespace
}  // namespace hwarb::pmu
