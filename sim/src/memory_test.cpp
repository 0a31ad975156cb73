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

}  // namespace
}  // namespace hwarb::sim
