#include "hwarb/bts/trace_record.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

namespace hwarb::bts {
namespace {

using Bytes = std::array<std::byte, kTraceRecordSize>;

std::uint64_t word(const Bytes& b, std::size_t index) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8; ++i) {
    v |= std::to_integer<std::uint64_t>(b[index * 8 + i]) << (8 * i);
  }
  return v;
}

Bytes encoded(const TraceRecord& r) {
  Bytes b{};
  auto e = encode(r, b);
  EXPECT_TRUE(e.has_value()) << e.error().to_string();
  return b;
}

TEST(TraceRecordTest, BranchLayoutIsTheHardwares64BitRecord) {
  const Bytes b = encoded(TraceRecord::branch(0x401000, 0xffffffff81000000, true));
  EXPECT_EQ(word(b, 0), 0x401000u);
  EXPECT_EQ(word(b, 1), 0xffffffff81000000u);
  EXPECT_EQ(word(b, 2), kPredictedFlag);
  EXPECT_EQ(b[0], std::byte{0x00});
  EXPECT_EQ(b[1], std::byte{0x10});
  EXPECT_EQ(b[2], std::byte{0x40});
  EXPECT_EQ(word(encoded(TraceRecord::branch(1, 2)), 2), 0u);
}

TEST(TraceRecordTest, TimestampLayoutSetsExactlyOneKindBit) {
  const Bytes a = encoded(TraceRecord::sched(RecordKind::kArrives, TaskId(3), 1000));
  EXPECT_EQ(word(a, 0), 3u);
  EXPECT_EQ(word(a, 1), 1000u);
  EXPECT_EQ(word(a, 2), kArrivesFlag);
  const Bytes d = encoded(TraceRecord::sched(RecordKind::kDeparts, TaskId(3), 2000));
  EXPECT_EQ(word(d, 2), kDepartsFlag);
}

TEST(TraceRecordTest, RoundTrips) {
  const std::vector<TraceRecord> records = {
      TraceRecord::branch(0, 0),
      TraceRecord::branch(0x401000, 0x401020, false),
      TraceRecord::branch(0x401000, 0x401020, true),
      TraceRecord::branch(~std::uint64_t{0}, 0x8000000000000000, true),
      TraceRecord::sched(RecordKind::kArrives, TaskId(0), 0),
      TraceRecord::sched(RecordKind::kArrives, TaskId(7), ~std::uint64_t{0}),
      TraceRecord::sched(RecordKind::kDeparts, TaskId(-1), 123456789),
      TraceRecord::sched(RecordKind::kDeparts, TaskId(INT64_MAX), 1),
  };
  for (const TraceRecord& r : records) {
    const Bytes b = encoded(r);
    auto back = decode(b);
    ASSERT_TRUE(back.has_value()) << back.error().to_string();
    EXPECT_EQ(*back, r) << format_record(r);
  }
}

TEST(TraceRecordTest, DecodeIgnoresReservedBitsOfABranch) {
  Bytes b = encoded(TraceRecord::branch(5, 6, false));
  b[16] = std::byte{0x0f};  // reserved bits 0-3
  b[17] = std::byte{0x01};  // bit 8
  auto r = decode(b);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, TraceRecord::branch(5, 6, false));
}

TEST(TraceRecordTest, ErrorsNameTheField) {
  std::array<std::byte, kTraceRecordSize - 1> small{};
  auto e = encode(TraceRecord::branch(1, 2), small);
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(e.error().message().starts_with("out: ")) << e.error().message();
  EXPECT_EQ(small, (std::array<std::byte, kTraceRecordSize - 1>{}));

  auto d = decode(small);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(d.error().message().starts_with("in: ")) << d.error().message();

  Bytes both = encoded(TraceRecord::sched(RecordKind::kArrives, TaskId(1), 2));
  both[23] = std::byte{0xc0};
  auto b = decode(both);
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(b.error().message().starts_with("flags: ")) << b.error().message();

  TraceRecord bad = TraceRecord::branch(1, 2);
  bad.kind = static_cast<RecordKind>(9);
  Bytes untouched{};
  auto k = encode(bad, untouched);
  ASSERT_FALSE(k.has_value());
  EXPECT_TRUE(k.error().message().starts_with("kind: ")) << k.error().message();
  EXPECT_EQ(untouched, Bytes{});
}

TEST(TraceRecordTest, EncodeWritesExactlyOneRecord) {
  std::array<std::byte, kTraceRecordSize + 4> big{};
  big.fill(std::byte{0xee});
  ASSERT_TRUE(encode(TraceRecord::branch(1, 2), big).has_value());
  for (std::size_t i = kTraceRecordSize; i < big.size(); ++i) EXPECT_EQ(big[i], std::byte{0xee});
}

TEST(TraceRecordTest, Formats) {
  EXPECT_EQ(format_record(TraceRecord::branch(0x401000, 0x401020)), "from=0x401000 to=0x401020");
  EXPECT_EQ(format_record(TraceRecord::branch(0x401000, 0x401020, true)),
            "from=0x401000 to=0x401020 predicted");
  EXPECT_EQ(format_record(TraceRecord::branch(0, 0xFFFFFFFF81000ABC)),
            "from=0x0 to=0xffffffff81000abc");
  EXPECT_EQ(format_record(TraceRecord::sched(RecordKind::kArrives, TaskId(3), 1000)),
            "arrives task=3 time=1000");
  EXPECT_EQ(format_record(TraceRecord::sched(RecordKind::kDeparts, TaskId(3), 2000)),
            "departs task=3 time=2000");
  EXPECT_EQ(to_string(RecordKind::kBranch), "branch");
  EXPECT_EQ(to_string(RecordKind::kArrives), "arrives");
  EXPECT_EQ(to_string(RecordKind::kDeparts), "departs");
}

}  // namespace
}  // namespace hwarb::bts
