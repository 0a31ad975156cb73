#include "hwarb/breakpoints/watchpoint.h"

#include <gtest/gtest.h>

namespace hwarb::breakpoints {
namespace {

TEST(SplitRange, FewestAlignedPieces) {
  EXPECT_EQ(split_range(0x1001, 7), (std::vector<Piece>{{0x1001, 1}, {0x1002, 2}, {0x1004, 4}}));
  EXPECT_EQ(split_range(0x1000, 16), (std::vector<Piece>{{0x1000, 8}, {0x1008, 8}}));
  EXPECT_EQ(split_range(0x1003, 2), (std::vector<Piece>{{0x1003, 1}, {0x1004, 1}}));
}

}  // namespace
}  // namespace hwarb::breakpoints
