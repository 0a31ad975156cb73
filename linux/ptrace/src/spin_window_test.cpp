#include "hwarb/linux/spin_window.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>

namespace hwarb::native {
namespace {

using std::chrono::microseconds;
using std::chrono::nanoseconds;

TEST(SpinWindow, StartsAtMaxAndKeepsItWhileStopsComeWhilePolling) {
  SpinWindow spin(microseconds(100));
  EXPECT_EQ(spin.window(), microseconds(100));
  spin.record(microseconds(13));
  spin.record(microseconds(100));
  EXPECT_EQ(spin.window(), microseconds(100));
}

TEST(SpinWindow, HalvesToZeroWhenStopsComeLate) {
  SpinWindow spin(microseconds(100));
  spin.record(microseconds(5000));
  EXPECT_EQ(spin.window(), microseconds(50));
  for (int i = 0; i < 6; ++i) spin.record(std::chrono::milliseconds(1));
  EXPECT_EQ(spin.window(), microseconds(0)) << "100 us / 2^7 is below 1 us";
}

TEST(SpinWindow, GrowsBackWhenAStopCameSoonAfterSleeping) {
  SpinWindow spin(microseconds(100));
  for (int i = 0; i < 10; ++i) spin.record(std::chrono::milliseconds(1));
  ASSERT_EQ(spin.window(), microseconds(0));
  spin.record(microseconds(20));
  EXPECT_EQ(spin.window(), microseconds(30));
  spin.record(microseconds(90));
  EXPECT_EQ(spin.window(), microseconds(100)) << "1.5 x 90 us, capped at max";
}

TEST(SpinWindow, ZeroMaxNeverPolls) {
  SpinWindow spin(nanoseconds(0));
  EXPECT_EQ(spin.window(), nanoseconds(0));
  spin.record(microseconds(1));
  EXPECT_EQ(spin.window(), nanoseconds(0));
}

// Against the three cases written out separately, on random sequences of waits: the window
// never exceeds max and follows the model exactly.
TEST(SpinWindow, FollowsTheModelOnRandomWaits) {
  std::mt19937_64 rng(7);
  for (int run = 0; run < 200; ++run) {
    const nanoseconds max(rng() % 200000);
    SpinWindow spin(max);
    std::int64_t model = max.count();
    for (int i = 0; i < 100; ++i) {
      const nanoseconds waited(rng() % 400000);
      spin.record(waited);
      if (waited.count() > model && waited <= max) {
        model = std::min<std::int64_t>(max.count(), waited.count() * 3 / 2);
      } else if (waited > max) {
        model /= 2;
        if (model < 1000) model = 0;
      }
      ASSERT_EQ(spin.window().count(), model) << "run " << run << " wait " << i;
      ASSERT_LE(spin.window(), max);
    }
  }
}

}  // namespace
}  // namespace hwarb::native
