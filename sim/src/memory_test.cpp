#include "hwarb/sim/memory.h"

#include <gtest/gtest.h>

namespace hwarb::sim {
namespace {

TEST(SparseMemory, UnsetBytesReadZeroWithoutAllocating) {
  SparseMemory m;
  EXPECT_EQ(m.read(0, 8), 0u);
  EXPECT_EQ(m.read(0xffff'ffff'ffff'fff8, 8), 0u);
  EXPECT_EQ(m.read_byte(12345), 0u);
  EXPECT_EQ(m.pages(), 0u);
}

TEST(SparseMemory, LittleEndianAllSizes) {
  SparseMemory m;
  m.write(0x1000, 8, 0x0807060504030201);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(m.read_byte(0x1000 + i), i + 1);
  EXPECT_EQ(m.read(0x1000, 1), 0x01u);
  EXPECT_EQ(m.read(0x1000, 2), 0x0201u);
  EXPECT_EQ(m.read(0x1000, 4), 0x04030201u);
  EXPECT_EQ(m.read(0x1001, 4), 0x05040302u);  // unaligned
  EXPECT_EQ(m.read(0x1006, 4), 0x0807u);      // tail beyond the write reads zero bytes
  m.write(0x1002, 2, 0xbeefcafe);             // only the low 2 bytes are stored
  EXPECT_EQ(m.read(0x1000, 8), 0x08070605cafe0201u);
}

TEST(SparseMemory, StraddlesPagesAndTopOfAddressSpace) {
  SparseMemory m;
  m.write(SparseMemory::kPageSize - 3, 8, 0x1122334455667788);
  EXPECT_EQ(m.pages(), 2u);
  EXPECT_EQ(m.read(SparseMemory::kPageSize - 3, 8), 0x1122334455667788u);
  m.write(0xffff'ffff'ffff'fff8, 8, 0xa1a2a3a4a5a6a7a8);
  EXPECT_EQ(m.read(0xffff'ffff'ffff'ffff, 1), 0xa1u);
}

TEST(SparseMemory, CopyIsDeep) {
  SparseMemory a;
  a.write(10, 4, 0xdeadbeef);
  SparseMemory b = a;
  b.write(10, 4, 1);
  EXPECT_EQ(a.read(10, 4), 0xdeadbeefu);
  EXPECT_EQ(b.read(10, 4), 1u);
}

TEST(SparseMemory, RangeValidation) {
  EXPECT_TRUE(SparseMemory::valid_size(1));
  EXPECT_TRUE(SparseMemory::valid_size(8));
  EXPECT_FALSE(SparseMemory::valid_size(3));
  EXPECT_FALSE(SparseMemory::valid_size(0));
  EXPECT_FALSE(SparseMemory::valid_size(16));
  EXPECT_TRUE(SparseMemory::valid_range(0xffff'ffff'ffff'fff8, 8));
  EXPECT_FALSE(SparseMemory::valid_range(0xffff'ffff'ffff'fff9, 8));
  EXPECT_TRUE(SparseMemory::valid_range(0xffff'ffff'ffff'ffff, 1));
}

// Pages whose numbers share a page-cache entry (64 apart), read and written in turn, and the
// cache after copy, copy-assignment and move: every value is where it was written.
TEST(SparseMemory, PageCacheCollisionsCopiesAndMoves) {
  SparseMemory m;
  const std::uint64_t stride = 64 * SparseMemory::kPageSize;
  for (std::uint64_t i = 0; i < 8; ++i) m.write(0x10 + i * stride, 8, 0x1000 + i);
  for (int round = 0; round < 2; ++round) {
    for (std::uint64_t i = 0; i < 8; ++i) EXPECT_EQ(m.read(0x10 + i * stride, 8), 0x1000 + i);
  }
  EXPECT_EQ(m.pages(), 8u);
  SparseMemory copy(m);
  copy.write(0x10, 4, 7);
  EXPECT_EQ(m.read(0x10, 8), 0x1000u);
  EXPECT_EQ(copy.read(0x10, 8), 7u);
  SparseMemory assigned;
  assigned.write(0x10 + stride, 1, 0xff);  // fills the cache entry that the copy must forget
  assigned = copy;
  EXPECT_EQ(assigned.read(0x10 + stride, 8), 0x1001u);
  assigned.write(0x10 + stride, 1, 0x22);
  EXPECT_EQ(copy.read(0x10 + stride, 8), 0x1001u);
  SparseMemory moved(std::move(assigned));
  EXPECT_EQ(moved.read(0x10 + stride, 8), 0x1022u);
  EXPECT_EQ(moved.read(0x10, 8), 7u);
  SparseMemory target;
  target = std::move(moved);
  EXPECT_EQ(target.read(0x10 + 7 * stride, 8), 0x1007u);
  SparseMemory empty_copy(SparseMemory{});
  EXPECT_EQ(empty_copy.read(0x10, 8), 0u);
  EXPECT_EQ(empty_copy.pages(), 0u);
}

}  // namespace
}  // namespace hwarb::sim
