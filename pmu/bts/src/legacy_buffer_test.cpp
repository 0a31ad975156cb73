#include "hwarb/bts/legacy_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace hwarb::bts {
namespace {

constexpr std::size_t kR = kDefaultRecordSize;

std::vector<std::byte> record(std::uint64_t seq) {
  std::vector<std::byte> out(kR);
  const std::uint64_t words[3] = {seq, ~seq, seq * 3};
  std::memcpy(out.data(), words, kR);
  return out;
}

std::uint64_t seq_of(std::span<const std::byte> r) {
  std::uint64_t words[3];
  std::memcpy(words, r.data(), kR);
  EXPECT_EQ(words[1], ~words[0]);
  return words[0];
}

std::vector<std::uint64_t> seqs(const std::vector<std::byte>& bytes) {
  std::vector<std::uint64_t> out;
  for (std::size_t off = 0; off + kR <= bytes.size(); off += kR) {
    out.push_back(seq_of(std::span(bytes).subspan(off, kR)));
  }
  return out;
}

// An allocator that counts its calls and fails while `fail` is set.
struct TestAllocator {
  int calls = 0;
  bool fail = false;
  Allocator get() {
    return [this](std::size_t bytes) -> Result<ByteBuffer> {
      ++calls;
      if (fail) return make_error(ErrorCode::kNoMem, "buffer: injected failure");
      return ByteBuffer::allocate(bytes);
    };
  }
};

LegacyBuffer make(std::size_t bytes, OverflowMode mode, TestAllocator* alloc = nullptr) {
  auto b = LegacyBuffer::create(bytes, mode, kR, alloc ? alloc->get() : default_allocator());
  EXPECT_TRUE(b.has_value());
  return std::move(*b);
}

void fill(LegacyBuffer& b, std::uint64_t first, std::uint64_t end) {
  for (std::uint64_t i = first; i < end; ++i) ASSERT_TRUE(b.write(record(i)).has_value());
}

TEST(LegacyBufferTest, SizesRoundDownToWholeRecords) {
  EXPECT_EQ(LegacyBuffer::round_size(100, kR), 96u);
  EXPECT_EQ(LegacyBuffer::round_size(23, kR), 0u);
  LegacyBuffer b = make(100, OverflowMode::kWrapAround);
  EXPECT_EQ(b.capacity(), 4u);
  EXPECT_EQ(b.capacity_bytes(), 96u);
  EXPECT_EQ(LegacyBuffer::create(48, OverflowMode::kSignal, 0).error().message(),
            "record_size: must be positive");
  EXPECT_EQ(LegacyBuffer::create(kMaxBufferBytes + kR, OverflowMode::kSignal).error().code(),
            ErrorCode::kInval);
}

TEST(LegacyBufferTest, WrapAroundOverwritesTheOldest) {
  LegacyBuffer b = make(3 * kR, OverflowMode::kWrapAround);
  std::vector<LegacyWrite> results;
  for (std::uint64_t i = 0; i < 5; ++i) results.push_back(*b.write(record(i)));
  EXPECT_EQ(results, (std::vector<LegacyWrite>{LegacyWrite::kWritten, LegacyWrite::kWritten,
                                               LegacyWrite::kWritten, LegacyWrite::kOverwrote,
                                               LegacyWrite::kOverwrote}));
  EXPECT_EQ(b.size(), 3u);
  EXPECT_EQ(seq_of(*b.get(0)), 4u);  // newest
  EXPECT_EQ(seq_of(*b.get(1)), 3u);
  EXPECT_EQ(seq_of(*b.get(2)), 2u);  // oldest
  EXPECT_EQ(b.get(3).error().message(), "index: 3 is not below 3 records");
  EXPECT_EQ(b.overwritten(), 2u);
  EXPECT_EQ(b.dropped(), 0u);
}

TEST(LegacyBufferTest, SignalModeStopsWhenFullAndOverwritesNothing) {
  LegacyBuffer b = make(3 * kR, OverflowMode::kSignal);
  fill(b, 0, 2);
  EXPECT_FALSE(b.full());
  EXPECT_EQ(*b.write(record(2)), LegacyWrite::kWritten);  // exactly full
  EXPECT_TRUE(b.full());
  EXPECT_EQ(*b.write(record(3)), LegacyWrite::kFull);  // one past: not stored
  EXPECT_EQ(*b.write(record(4)), LegacyWrite::kFull);
  EXPECT_EQ(b.dropped(), 2u);
  EXPECT_EQ(b.overwritten(), 0u);
  EXPECT_EQ(seq_of(*b.get(0)), 2u);
  EXPECT_EQ(seq_of(*b.get(2)), 0u);
  b.set_mode(OverflowMode::kWrapAround);
  EXPECT_EQ(*b.write(record(5)), LegacyWrite::kOverwrote);
  EXPECT_EQ(seqs(b.drain()), (std::vector<std::uint64_t>{1, 2, 5}));
}

TEST(LegacyBufferTest, CapacityOfOneRecord) {
  LegacyBuffer b = make(kR, OverflowMode::kWrapAround);
  fill(b, 0, 3);
  EXPECT_EQ(b.size(), 1u);
  EXPECT_EQ(seq_of(*b.get(0)), 2u);
  EXPECT_EQ(b.get(1).error().code(), ErrorCode::kInval);
}

TEST(LegacyBufferTest, DrainIsOldestFirstThenEmptyAndClearForgets) {
  LegacyBuffer b = make(4 * kR, OverflowMode::kWrapAround);
  fill(b, 0, 6);
  EXPECT_EQ(seqs(b.drain()), (std::vector<std::uint64_t>{2, 3, 4, 5}));
  EXPECT_EQ(b.size(), 0u);
  EXPECT_TRUE(b.drain().empty());
  EXPECT_EQ(b.get(0).error().code(), ErrorCode::kInval);
  fill(b, 10, 12);
  EXPECT_EQ(seq_of(*b.get(0)), 11u);
  b.clear();
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.capacity(), 4u);
  fill(b, 20, 21);
  EXPECT_EQ(seqs(b.drain()), (std::vector<std::uint64_t>{20}));
}

TEST(LegacyBufferTest, WriteNeedsExactlyOneRecordAndABuffer) {
  LegacyBuffer b = make(2 * kR, OverflowMode::kWrapAround);
  std::vector<std::byte> two(2 * kR);
  EXPECT_EQ(b.write(two).error().message(), "record: must be exactly 24 bytes");
  LegacyBuffer none = make(20, OverflowMode::kWrapAround);  // below one record: no buffer
  EXPECT_EQ(none.capacity(), 0u);
  EXPECT_EQ(none.write(record(0)).error().code(), ErrorCode::kNxio);
}

TEST(LegacyBufferTest, SameSizeAgainDoesNotReallocateOrLoseTheTrace) {
  TestAllocator alloc;
  LegacyBuffer b = make(100, OverflowMode::kWrapAround, &alloc);
  fill(b, 0, 3);
  EXPECT_EQ(alloc.calls, 1);
  ASSERT_TRUE(b.resize(100).has_value());
  ASSERT_TRUE(b.resize(96).has_value());
  ASSERT_TRUE(b.resize(119).has_value());  // still rounds to 96
  EXPECT_EQ(alloc.calls, 1);
  EXPECT_EQ(seqs(b.drain()), (std::vector<std::uint64_t>{0, 1, 2}));
}

TEST(LegacyBufferTest, FailedResizeKeepsTheOldBufferAndRecords) {
  TestAllocator alloc;
  LegacyBuffer b = make(3 * kR, OverflowMode::kWrapAround, &alloc);
  fill(b, 0, 5);  // holds 2, 3, 4; 2 overwritten
  alloc.fail = true;
  auto r = b.resize(10 * kR);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ErrorCode::kNoMem);
  EXPECT_EQ(alloc.calls, 2);
  EXPECT_EQ(b.capacity(), 3u);
  EXPECT_EQ(b.size(), 3u);
  EXPECT_EQ(b.overwritten(), 2u);
  EXPECT_EQ(seq_of(*b.get(0)), 4u);
  EXPECT_EQ(*b.write(record(5)), LegacyWrite::kOverwrote);  // still the old, full buffer
  EXPECT_EQ(seqs(b.drain()), (std::vector<std::uint64_t>{3, 4, 5}));
}

TEST(LegacyBufferTest, ResizeCarriesTheNewestRecordsOver) {
  TestAllocator alloc;
  LegacyBuffer b = make(3 * kR, OverflowMode::kWrapAround, &alloc);
  fill(b, 0, 5);  // 2, 3, 4 held, the ring has wrapped
  ASSERT_TRUE(b.resize(5 * kR).has_value());
  EXPECT_EQ(b.capacity(), 5u);
  EXPECT_EQ(b.size(), 3u);
  fill(b, 5, 7);
  EXPECT_TRUE(b.full());
  EXPECT_EQ(seq_of(*b.get(0)), 6u);
  EXPECT_EQ(seq_of(*b.get(4)), 2u);
  ASSERT_TRUE(b.resize(2 * kR).has_value());  // shrink: the 3 oldest go
  EXPECT_EQ(b.overwritten(), 2u + 3u);
  EXPECT_EQ(seqs(b.drain()), (std::vector<std::uint64_t>{5, 6}));
  fill(b, 7, 8);
  ASSERT_TRUE(b.resize(0).has_value());  // frees the buffer
  EXPECT_EQ(b.capacity(), 0u);
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.write(record(8)).error().code(), ErrorCode::kNxio);
  EXPECT_EQ(alloc.calls, 4);
}

std::vector<std::byte> batch(std::uint64_t first, std::size_t n) {
  std::vector<std::byte> out;
  for (std::uint64_t i = first; i < first + n; ++i) {
    const auto r = record(i);
    out.insert(out.end(), r.begin(), r.end());
  }
  return out;
}

// The per-record model: write() once per record, tallying what write_batch() should report.
BatchWrite write_one_by_one(LegacyBuffer& b, std::span<const std::byte> records) {
  BatchWrite out;
  for (std::size_t off = 0; off < records.size(); off += kR) {
    auto r = b.write(records.subspan(off, kR));
    EXPECT_TRUE(r.has_value());
    if (*r == LegacyWrite::kFull) {
      ++out.dropped;
    } else {
      ++out.stored;
      if (*r == LegacyWrite::kOverwrote) ++out.overwritten;
    }
  }
  out.full = b.full();
  return out;
}

void expect_same_state(const LegacyBuffer& got, const LegacyBuffer& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(seq_of(*got.get(i)), seq_of(*want.get(i))) << "index " << i;
  }
  EXPECT_EQ(got.overwritten(), want.overwritten());
  EXPECT_EQ(got.dropped(), want.dropped());
  EXPECT_EQ(got.full(), want.full());
}

TEST(LegacyBufferTest, WriteBatchMatchesOneWritePerRecord) {
  std::mt19937_64 rng(20261122);
  auto pick = [&rng](std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
  };
  for (int round = 0; round < 400; ++round) {
    const std::size_t cap = pick(1, 12);
    const auto mode = pick(0, 1) == 0 ? OverflowMode::kWrapAround : OverflowMode::kSignal;
    LegacyBuffer got = make(cap * kR, mode);
    LegacyBuffer want = make(cap * kR, mode);
    std::uint64_t seq = 0;
    for (int step = 0; step < 12; ++step) {
      switch (pick(0, 9)) {
        case 0: {  // switch modes: the records are kept
          const auto m = got.mode() == OverflowMode::kSignal ? OverflowMode::kWrapAround
                                                             : OverflowMode::kSignal;
          got.set_mode(m);
          want.set_mode(m);
          break;
        }
        case 1:
          EXPECT_EQ(seqs(got.drain()), seqs(want.drain()));
          break;
        default: {
          // From a single record to several times the capacity (the newest-capacity path).
          const std::size_t n = pick(1, 3 * cap + 2);
          const auto records = batch(seq, n);
          seq += n;
          auto r = got.write_batch(records);
          ASSERT_TRUE(r.has_value());
          EXPECT_EQ(*r, write_one_by_one(want, records))
              << "cap " << cap << " n " << n << " round " << round << " step " << step;
          EXPECT_EQ(r->stored + r->dropped, n);
          break;
        }
      }
      expect_same_state(got, want);
      if (HasFailure()) return;
    }
    // Both still evolve the same under single writes afterwards (the ring position is sound).
    for (std::size_t i = 0; i < cap + 1; ++i) {
      EXPECT_EQ(*got.write(record(seq)), *want.write(record(seq)));
      ++seq;
    }
    expect_same_state(got, want);
    EXPECT_EQ(seqs(got.drain()), seqs(want.drain()));
  }
}

TEST(LegacyBufferTest, WriteBatchReportsFullAndDropsInSignalMode) {
  LegacyBuffer b = make(4 * kR, OverflowMode::kSignal);
  auto r = b.write_batch(batch(0, 3));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (BatchWrite{.stored = 3, .overwritten = 0, .dropped = 0, .full = false}));
  r = b.write_batch(batch(3, 1));  // becomes exactly full: nothing dropped
  EXPECT_EQ(*r, (BatchWrite{.stored = 1, .overwritten = 0, .dropped = 0, .full = true}));
  r = b.write_batch(batch(4, 2));  // was full
  EXPECT_EQ(*r, (BatchWrite{.stored = 0, .overwritten = 0, .dropped = 2, .full = true}));
  EXPECT_EQ(b.dropped(), 2u);
  EXPECT_EQ(seqs(b.drain()), (std::vector<std::uint64_t>{0, 1, 2, 3}));
  r = b.write_batch(batch(10, 6));  // fills then drops
  EXPECT_EQ(*r, (BatchWrite{.stored = 4, .overwritten = 0, .dropped = 2, .full = true}));
  EXPECT_EQ(seqs(b.drain()), (std::vector<std::uint64_t>{10, 11, 12, 13}));
}

TEST(LegacyBufferTest, WriteBatchLargerThanTheWrapBufferKeepsTheNewest) {
  LegacyBuffer b = make(3 * kR, OverflowMode::kWrapAround);
  fill(b, 0, 2);
  auto r = b.write_batch(batch(2, 7));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (BatchWrite{.stored = 7, .overwritten = 6, .dropped = 0, .full = true}));
  EXPECT_EQ(b.overwritten(), 6u);
  EXPECT_EQ(seqs(b.drain()), (std::vector<std::uint64_t>{6, 7, 8}));
}

TEST(LegacyBufferTest, WriteBatchNeedsWholeRecordsAndABufferAndChangesNothingOtherwise) {
  LegacyBuffer b = make(3 * kR, OverflowMode::kSignal);
  fill(b, 0, 3);
  ASSERT_TRUE(b.write(record(3)).has_value());  // dropped: 1
  std::vector<std::byte> partial(2 * kR + 5);
  EXPECT_EQ(b.write_batch(partial).error().message(),
            "records: must be a positive whole number of 24-byte records, not 53 bytes");
  EXPECT_EQ(b.write_batch({}).error().code(), ErrorCode::kInval);
  EXPECT_EQ(b.size(), 3u);
  EXPECT_EQ(b.dropped(), 1u);
  EXPECT_EQ(b.overwritten(), 0u);
  EXPECT_EQ(seqs(b.drain()), (std::vector<std::uint64_t>{0, 1, 2}));
  LegacyBuffer none = make(20, OverflowMode::kWrapAround);
  EXPECT_EQ(none.write_batch(batch(0, 2)).error().code(), ErrorCode::kNxio);
  EXPECT_EQ(none.overwritten(), 0u);
}

}  // namespace
}  // namespace hwarb::bts
