#include "hwarb/bts/snapshot_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace hwarb::bts {
namespace {

constexpr std::size_t kR = kDefaultRecordSize;

std::vector<std::byte> records(std::uint64_t first, std::size_t n) {
  std::vector<std::byte> out(n * kR);
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t seq = first + i;
    const std::uint64_t words[3] = {seq, ~seq, seq * 3};
    std::memcpy(out.data() + i * kR, words, kR);
  }
  return out;
}

std::vector<std::uint64_t> seqs(const std::vector<std::byte>& bytes) {
  EXPECT_EQ(bytes.size() % kR, 0u);
  std::vector<std::uint64_t> out;
  for (std::size_t off = 0; off + kR <= bytes.size(); off += kR) {
    std::uint64_t words[3];
    std::memcpy(words, bytes.data() + off, kR);
    EXPECT_EQ(words[1], ~words[0]);
    out.push_back(words[0]);
  }
  return out;
}

std::vector<std::uint64_t> range(std::uint64_t first, std::uint64_t end) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t i = first; i < end; ++i) out.push_back(i);
  return out;
}

TEST(SnapshotBufferTest, CreateValidates) {
  EXPECT_EQ(SnapshotBuffer::create(100).error().message(),
            "size: must be a whole number of 24-byte records");
  EXPECT_EQ(SnapshotBuffer::create(0).error().code(), ErrorCode::kInval);
  EXPECT_EQ(SnapshotBuffer::create(48, 0).error().message(), "record_size: must be positive");
  auto failing = [](std::size_t) -> Result<ByteBuffer> {
    return make_error(ErrorCode::kNoMem, "buffer: injected failure");
  };
  EXPECT_EQ(SnapshotBuffer::create(48, kR, failing).error().code(), ErrorCode::kNoMem);
}

TEST(SnapshotBufferTest, BelowCapacityNothingIsOverwritten) {
  auto b = SnapshotBuffer::create(5 * kR);
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(b->snapshot().empty());
  ASSERT_TRUE(b->write(records(0, 3)).has_value());
  EXPECT_EQ(seqs(b->snapshot()), range(0, 3));
  EXPECT_EQ(b->size(), 3u);
  EXPECT_EQ(b->overwritten(), 0u);
  ASSERT_TRUE(b->write(records(3, 2)).has_value());  // exactly full
  EXPECT_EQ(seqs(b->snapshot()), range(0, 5));
  EXPECT_EQ(b->overwritten(), 0u);
  ASSERT_TRUE(b->write(records(5, 1)).has_value());  // one past
  EXPECT_EQ(seqs(b->snapshot()), range(1, 6));
  EXPECT_EQ(b->overwritten(), 1u);
}

TEST(SnapshotBufferTest, WriteRejectsPartialRecords) {
  auto b = SnapshotBuffer::create(2 * kR);
  ASSERT_TRUE(b.has_value());
  std::vector<std::byte> odd(30);
  EXPECT_EQ(b->write(odd).error().code(), ErrorCode::kInval);
  EXPECT_EQ(b->write({}).error().code(), ErrorCode::kInval);
  EXPECT_EQ(b->written(), 0u);
}

TEST(SnapshotBufferTest, NewestRecordsOldestFirstAfterManyWraps) {
  for (std::size_t cap : {1u, 2u, 7u, 16u}) {
    auto b = SnapshotBuffer::create(cap * kR);
    ASSERT_TRUE(b.has_value());
    std::mt19937_64 rng(cap);
    std::uint64_t next = 0;
    while (next < 1000) {
      const std::size_t n = 1 + rng() % (2 * cap + 1);  // some batches longer than the buffer
      ASSERT_TRUE(b->write(records(next, n)).has_value());
      next += n;
      const std::uint64_t held = std::min<std::uint64_t>(next, cap);
      ASSERT_EQ(seqs(b->snapshot()), range(next - held, next)) << "capacity " << cap;
      ASSERT_EQ(b->overwritten(), next - held);
      ASSERT_EQ(b->written(), next);
    }
  }
}

TEST(SnapshotBufferTest, SnapshotIntoCopiesTheNewestWholeRecordsThatFit) {
  auto b = SnapshotBuffer::create(4 * kR);
  ASSERT_TRUE(b.has_value());
  ASSERT_TRUE(b->write(records(0, 6)).has_value());
  std::vector<std::byte> out(2 * kR + 10);
  EXPECT_EQ(b->snapshot_into(out), 2 * kR);
  out.resize(2 * kR);
  EXPECT_EQ(seqs(out), range(4, 6));
  b->clear();
  EXPECT_EQ(b->size(), 0u);
  EXPECT_EQ(b->written(), 0u);
  EXPECT_TRUE(b->snapshot().empty());
  ASSERT_TRUE(b->write(records(9, 1)).has_value());
  EXPECT_EQ(seqs(b->snapshot()), range(9, 10));
}

TEST(SnapshotBufferTest, MoveTransfersTheBuffer) {
  auto b = SnapshotBuffer::create(2 * kR);
  ASSERT_TRUE(b.has_value());
  ASSERT_TRUE(b->write(records(0, 2)).has_value());
  SnapshotBuffer moved = std::move(*b);
  EXPECT_EQ(seqs(moved.snapshot()), range(0, 2));
}

}  // namespace
}  // namespace hwarb::bts
