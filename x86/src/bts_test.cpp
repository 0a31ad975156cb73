#include "hwarb/x86/bts.h"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace hwarb::x86 {
namespace {

constexpr std::array kFormats = {BtsFormat::k32, BtsFormat::k64};

std::vector<std::byte> bytes(std::initializer_list<unsigned> values) {
  std::vector<std::byte> out;
  for (unsigned v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

std::vector<std::byte> filled(std::size_t n, unsigned value) {
  return std::vector<std::byte>(n, static_cast<std::byte>(value));
}

// Sizes and offsets, computed by hand from the SDM layout.
static_assert(bts::record_size(BtsFormat::k32) == 12);
static_assert(bts::record_size(BtsFormat::k64) == 24);
static_assert(bts::to_offset(BtsFormat::k64) == 8 && bts::flags_offset(BtsFormat::k64) == 16);
static_assert(bts::to_offset(BtsFormat::k32) == 4 && bts::flags_offset(BtsFormat::k32) == 8);
static_assert(bts::kPredicted == 0x10);

constexpr std::array<std::byte, 24> encoded64(BtsRecord record) {
  std::array<std::byte, 24> out{};
  if (!bts::encode(BtsFormat::k64, record, out)) return {};
  return out;
}
// The encoders work at compile time.
static_assert(encoded64({0x1122334455667788, 0, true})[0] == std::byte{0x88});
static_assert(encoded64({0x1122334455667788, 0, true})[7] == std::byte{0x11});
static_assert(encoded64({0x1122334455667788, 0, true})[16] == std::byte{0x10});
static_assert(*bts::decode(BtsFormat::k64, encoded64({1, 2, true})) == BtsRecord{1, 2, true});

TEST(BtsRecordTest, SixtyFourBitImageIsExact) {
  const BtsRecord record{0xffffffff81000010, 0x0000000000401000, true};
  std::vector<std::byte> out = filled(24, 0xaa);
  ASSERT_TRUE(bts::encode(BtsFormat::k64, record, out).has_value());
  EXPECT_EQ(out, bytes({0x10, 0x00, 0x00, 0x81, 0xff, 0xff, 0xff, 0xff,     // from
                        0x00, 0x10, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00,     // to
                        0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}));  // flags: P
  auto back = bts::decode(BtsFormat::k64, out);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, record);
}

TEST(BtsRecordTest, ThirtyTwoBitImageIsExact) {
  const BtsRecord record{0x08048123, 0xc0101234, false};
  std::vector<std::byte> out = filled(12, 0xaa);
  ASSERT_TRUE(bts::encode(BtsFormat::k32, record, out).has_value());
  EXPECT_EQ(out, bytes({0x23, 0x81, 0x04, 0x08,     // from
                        0x34, 0x12, 0x10, 0xc0,     // to
                        0x00, 0x00, 0x00, 0x00}));  // flags
  ASSERT_TRUE(bts::encode(BtsFormat::k32, {0x08048123, 0xc0101234, true}, out).has_value());
  EXPECT_EQ(out[8], std::byte{0x10});
  EXPECT_EQ(out[9], std::byte{0x00});
}

TEST(BtsRecordTest, RoundTripsInBothFormats) {
  const std::vector<BtsRecord> records = {
      {0, 0, false},
      {1, 2, true},
      {0xffffffff, 0xfffffffe, true},
      {0x7fffffff, 0x80000000, false},
      {0xffffffffffffffff, 0x8000000000000000, true},
      {0x00007fffffffe000, 0xffffffff81234567, false},
  };
  for (BtsFormat f : kFormats) {
    for (const BtsRecord& r : records) {
      if (!bts::fits(f, r)) continue;
      std::vector<std::byte> out(bts::record_size(f));
      ASSERT_TRUE(bts::encode(f, r, out).has_value());
      auto back = bts::decode(f, out);
      ASSERT_TRUE(back.has_value());
      EXPECT_EQ(*back, r) << std::hex << r.from << " " << r.to;
    }
  }
}

TEST(BtsRecordTest, EncodeWritesOnlyTheRecord) {
  for (BtsFormat f : kFormats) {
    const std::size_t size = bts::record_size(f);
    std::vector<std::byte> out = filled(size + 8, 0xaa);
    ASSERT_TRUE(bts::encode(f, {0x1000, 0x2000, true}, out).has_value());
    for (std::size_t i = size; i < out.size(); ++i) EXPECT_EQ(out[i], std::byte{0xaa}) << i;
  }
}

TEST(BtsRecordTest, PredictedIsBitFourOnlyAndReservedFlagsAreIgnored) {
  EXPECT_EQ(bts::flags({1, 2, true}), 0x10u);
  EXPECT_EQ(bts::flags({1, 2, false}), 0u);
  // Every reserved flag bit set, P clear: not predicted.
  std::vector<std::byte> in = bytes({0x01, 0, 0, 0, 0x02, 0, 0, 0, 0xef, 0xff, 0xff, 0xff});
  auto r = bts::decode(BtsFormat::k32, in);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (BtsRecord{1, 2, false}));
  // Only P and bit 63 set in the 64-bit flags word.
  std::vector<std::byte> in64 = filled(24, 0);
  in64[16] = std::byte{0x10};
  in64[23] = std::byte{0x80};
  auto r64 = bts::decode(BtsFormat::k64, in64);
  ASSERT_TRUE(r64.has_value());
  EXPECT_TRUE(r64->predicted);
  EXPECT_EQ(r64->from, 0u);
  EXPECT_EQ(r64->to, 0u);
}

TEST(BtsRecordTest, ThirtyTwoBitRefusesWideAddressesAndWritesNothing) {
  for (const BtsRecord& r :
       {BtsRecord{0x100000000, 0x1000, false}, BtsRecord{0x1000, 0xffffffff81000000, true}}) {
    EXPECT_FALSE(bts::fits(BtsFormat::k32, r));
    EXPECT_TRUE(bts::fits(BtsFormat::k64, r));
    std::vector<std::byte> out = filled(12, 0xaa);
    auto result = bts::encode(BtsFormat::k32, r, out);
    ASSERT_FALSE(result.has_value());
    EXPECT_EQ(result.error().code(), ErrorCode::kInval);
    const std::string field = r.from > 0xffffffff ? "from:" : "to:";
    EXPECT_TRUE(result.error().message().starts_with(field)) << result.error().message();
    EXPECT_EQ(out, filled(12, 0xaa));
  }
  // Truncation is explicit: the EIP a 32-bit processor would have written.
  const BtsRecord wide{0x1234567890, 0xffffffff81000000, true};
  EXPECT_EQ(bts::truncated(BtsFormat::k32, wide), (BtsRecord{0x34567890, 0x81000000, true}));
  EXPECT_EQ(bts::truncated(BtsFormat::k64, wide), wide);
  std::vector<std::byte> out(12);
  ASSERT_TRUE(bts::encode(BtsFormat::k32, bts::truncated(BtsFormat::k32, wide), out).has_value());
  EXPECT_EQ(out, bytes({0x90, 0x78, 0x56, 0x34, 0x00, 0x00, 0x00, 0x81, 0x10, 0, 0, 0}));
}

TEST(BtsRecordTest, ShortSpansAreRefused) {
  std::vector<std::byte> out = filled(23, 0xaa);
  auto e = bts::encode(BtsFormat::k64, {1, 2, false}, out);
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(e.error().message().starts_with("out:")) << e.error().message();
  EXPECT_EQ(out, filled(23, 0xaa));
  std::vector<std::byte> in(11);
  auto d = bts::decode(BtsFormat::k32, in);
  ASSERT_FALSE(d.has_value());
  EXPECT_TRUE(d.error().message().starts_with("in:")) << d.error().message();
  EXPECT_TRUE(bts::decode(BtsFormat::k32, std::vector<std::byte>(12)).has_value());
}

// DS offsets, by hand: 4-byte fields from 0x00, 8-byte fields from 0x00.
static_assert(ds::offset(BtsFormat::k32, DsField::kBtsBufferBase) == 0x00);
static_assert(ds::offset(BtsFormat::k32, DsField::kBtsIndex) == 0x04);
static_assert(ds::offset(BtsFormat::k32, DsField::kBtsAbsoluteMaximum) == 0x08);
static_assert(ds::offset(BtsFormat::k32, DsField::kBtsInterruptThreshold) == 0x0c);
static_assert(ds::offset(BtsFormat::k32, DsField::kPebsBufferBase) == 0x10);
static_assert(ds::offset(BtsFormat::k32, DsField::kPebsIndex) == 0x14);
static_assert(ds::offset(BtsFormat::k32, DsField::kPebsAbsoluteMaximum) == 0x18);
static_assert(ds::offset(BtsFormat::k32, DsField::kPebsInterruptThreshold) == 0x1c);
static_assert(ds::offset(BtsFormat::k32, DsField::kPebsCounterReset) == 0x20);
static_assert(ds::area_size(BtsFormat::k32) == 0x24);
static_assert(ds::offset(BtsFormat::k64, DsField::kBtsBufferBase) == 0x00);
static_assert(ds::offset(BtsFormat::k64, DsField::kBtsIndex) == 0x08);
static_assert(ds::offset(BtsFormat::k64, DsField::kBtsAbsoluteMaximum) == 0x10);
static_assert(ds::offset(BtsFormat::k64, DsField::kBtsInterruptThreshold) == 0x18);
static_assert(ds::offset(BtsFormat::k64, DsField::kPebsBufferBase) == 0x20);
static_assert(ds::offset(BtsFormat::k64, DsField::kPebsIndex) == 0x28);
static_assert(ds::offset(BtsFormat::k64, DsField::kPebsAbsoluteMaximum) == 0x30);
static_assert(ds::offset(BtsFormat::k64, DsField::kPebsInterruptThreshold) == 0x38);
static_assert(ds::offset(BtsFormat::k64, DsField::kPebsCounterReset) == 0x40);
static_assert(ds::counter_reset_offset(BtsFormat::k64, 3) == 0x58);
static_assert(ds::counter_reset_offset(BtsFormat::k64, 7) == 0x78);
static_assert(ds::area_size(BtsFormat::k64) == 0x80);

TEST(DsAreaTest, ThirtyTwoBitImageIsExact) {
  DsArea area;
  area.bts_buffer_base = 0x1000;
  area.bts_index = 0x1018;
  area.bts_absolute_maximum = 0x1030;
  area.bts_interrupt_threshold = 0x1024;
  area.pebs_buffer_base = 0x2000;
  area.pebs_index = 0x2004;
  area.pebs_absolute_maximum = 0x2100;
  area.pebs_interrupt_threshold = 0x20c0;
  area.pebs_counter_reset[0] = 0x12345678;
  std::vector<std::byte> out = filled(0x24 + 4, 0xaa);
  ASSERT_TRUE(ds::encode(BtsFormat::k32, area, out).has_value());
  EXPECT_EQ(
      out, bytes({0x00, 0x10, 0,    0,    0x18, 0x10, 0,    0,   0x30, 0x10, 0, 0, 0x24, 0x10, 0, 0,
                  0x00, 0x20, 0,    0,    0x04, 0x20, 0,    0,   0x00, 0x21, 0, 0, 0xc0, 0x20, 0, 0,
                  0x78, 0x56, 0x34, 0x12, 0xaa, 0xaa, 0xaa, 0xaa}));
  auto back = ds::decode(BtsFormat::k32, out);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, area);
}

TEST(DsAreaTest, SixtyFourBitImageIsExact) {
  DsArea area;
  area.bts_buffer_base = 0x00007f0000001000;
  area.bts_index = 0x00007f0000001030;
  area.bts_absolute_maximum = 0x00007f0000001060;
  area.bts_interrupt_threshold = 0x00007f0000001048;
  area.pebs_counter_reset[0] = 0x0000fffff0000000;
  area.pebs_counter_reset[7] = 0x0102030405060708;
  std::vector<std::byte> out = filled(0x80, 0xaa);
  ASSERT_TRUE(ds::encode(BtsFormat::k64, area, out).has_value());
  EXPECT_EQ(std::vector<std::byte>(out.begin(), out.begin() + 0x20),
            bytes({0x00, 0x10, 0x00, 0x00, 0x00, 0x7f, 0x00, 0x00,  // base
                   0x30, 0x10, 0x00, 0x00, 0x00, 0x7f, 0x00, 0x00,  // index
                   0x60, 0x10, 0x00, 0x00, 0x00, 0x7f, 0x00, 0x00,  // maximum
                   0x48, 0x10, 0x00, 0x00, 0x00, 0x7f, 0x00, 0x00}));
  EXPECT_EQ(std::vector<std::byte>(out.begin() + 0x20, out.begin() + 0x40), filled(0x20, 0));
  EXPECT_EQ(std::vector<std::byte>(out.begin() + 0x40, out.begin() + 0x48),
            bytes({0x00, 0x00, 0x00, 0xf0, 0xff, 0xff, 0x00, 0x00}));
  EXPECT_EQ(std::vector<std::byte>(out.begin() + 0x48, out.begin() + 0x78), filled(0x30, 0));
  EXPECT_EQ(std::vector<std::byte>(out.begin() + 0x78, out.end()),
            bytes({0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01}));
}

TEST(DsAreaTest, RoundTripsInBothFormats) {
  for (BtsFormat f : kFormats) {
    DsArea area;
    std::uint64_t v = 0x11;
    for (auto field : ds::kScalarFields) {
      area.*field = v;
      v = v * 3 + 0x1010;
    }
    for (int n = 0; n < ds::counter_resets(f); ++n) {
      area.pebs_counter_reset[static_cast<std::size_t>(n)] = 0xabc00 + static_cast<unsigned>(n);
    }
    if (f == BtsFormat::k64) area.bts_absolute_maximum = 0xffffffffffffffe8;
    std::vector<std::byte> out(ds::area_size(f));
    ASSERT_TRUE(ds::encode(f, area, out).has_value());
    auto back = ds::decode(f, out);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, area);
    for (DsField field : {DsField::kBtsIndex, DsField::kPebsCounterReset}) {
      EXPECT_EQ(ds::get(*back, field), ds::get(area, field));
    }
  }
}

TEST(DsAreaTest, EncodeRefusesWhatTheFormCannotHold) {
  std::vector<std::byte> out = filled(0x24, 0xaa);
  DsArea wide;
  wide.pebs_index = 0x100000000;
  auto e = ds::encode(BtsFormat::k32, wide, out);
  ASSERT_FALSE(e.has_value());
  EXPECT_EQ(e.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(e.error().message().starts_with("pebs_index:")) << e.error().message();
  EXPECT_EQ(out, filled(0x24, 0xaa));

  DsArea resets;
  resets.pebs_counter_reset[1] = 5;
  e = ds::encode(BtsFormat::k32, resets, out);
  ASSERT_FALSE(e.has_value());
  EXPECT_TRUE(e.error().message().starts_with("pebs_counter_reset[1]:")) << e.error().message();
  std::vector<std::byte> out64(0x80);
  EXPECT_TRUE(ds::encode(BtsFormat::k64, resets, out64).has_value());

  DsArea reset0;
  reset0.pebs_counter_reset[0] = 0xff00000000;  // 40 bits: a real counter width
  e = ds::encode(BtsFormat::k32, reset0, out);
  ASSERT_FALSE(e.has_value());
  EXPECT_TRUE(e.error().message().starts_with("pebs_counter_reset[0]:")) << e.error().message();

  std::vector<std::byte> short64(0x7f);
  e = ds::encode(BtsFormat::k64, DsArea{}, short64);
  ASSERT_FALSE(e.has_value());
  EXPECT_TRUE(e.error().message().starts_with("out:")) << e.error().message();
  auto d = ds::decode(BtsFormat::k32, std::vector<std::byte>(0x23));
  ASSERT_FALSE(d.has_value());
  EXPECT_TRUE(d.error().message().starts_with("in:")) << d.error().message();
}

// A 64-bit buffer of four records at 0x1000.
constexpr DsArea four_records(std::uint64_t index, std::uint64_t threshold) {
  DsArea a;
  a.bts_buffer_base = 0x1000;
  a.bts_index = index;
  a.bts_absolute_maximum = 0x1000 + 4 * 24;
  a.bts_interrupt_threshold = threshold;
  return a;
}
constexpr BtsFormat k64 = BtsFormat::k64;
constexpr std::uint64_t kMax = 0x1060;

static_assert(ds::bts_capacity(k64, four_records(0x1000, kMax)) == 4);
static_assert(ds::bts_records(k64, four_records(0x1030, kMax)) == 2);

TEST(DsArithmeticTest, EmptyOneAndFull) {
  const DsArea empty = four_records(0x1000, kMax);
  EXPECT_EQ(ds::bts_capacity(k64, empty), 4u);
  EXPECT_EQ(ds::bts_records(k64, empty), 0u);
  EXPECT_FALSE(ds::bts_full(k64, empty));

  const DsArea one = four_records(0x1018, kMax);
  EXPECT_EQ(ds::bts_records(k64, one), 1u);
  EXPECT_FALSE(ds::bts_full(k64, one));

  const DsArea three = four_records(kMax - 24, kMax);
  EXPECT_EQ(ds::bts_records(k64, three), 3u);
  EXPECT_FALSE(ds::bts_full(k64, three));

  const DsArea full = four_records(kMax, kMax);
  EXPECT_EQ(ds::bts_records(k64, full), 4u);
  EXPECT_TRUE(ds::bts_full(k64, full));

  // The 32-bit format counts 12-byte records over the same bytes.
  EXPECT_EQ(ds::bts_capacity(BtsFormat::k32, empty), 8u);
  EXPECT_EQ(ds::bts_records(BtsFormat::k32, one), 2u);
  EXPECT_FALSE(ds::bts_full(BtsFormat::k32, three));
  EXPECT_TRUE(ds::bts_full(BtsFormat::k32, full));
}

TEST(DsArithmeticTest, ThresholdEqualToMaximumIsReachedWhenFull) {
  EXPECT_FALSE(ds::bts_threshold_reached(four_records(kMax - 24, kMax)));
  EXPECT_TRUE(ds::bts_threshold_reached(four_records(kMax, kMax)));
  // A threshold at record 2 is reached when the index gets there, not before.
  EXPECT_FALSE(ds::bts_threshold_reached(four_records(0x1018, 0x1030)));
  EXPECT_TRUE(ds::bts_threshold_reached(four_records(0x1030, 0x1030)));
  EXPECT_TRUE(ds::bts_threshold_reached(four_records(0x1048, 0x1030)));
  // Above the maximum: never, not even when full.
  const std::uint64_t never = ds::bts_no_interrupt_threshold(k64, kMax);
  EXPECT_EQ(never, kMax + 24);
  EXPECT_FALSE(ds::bts_threshold_reached(four_records(kMax, never)));
  EXPECT_EQ(ds::bts_no_interrupt_threshold(BtsFormat::k32, 0x2000), 0x200cu);
}

TEST(DsArithmeticTest, MisalignedIndexCountsWholeRecordsAndFullMeansNoRoomForOne) {
  const DsArea partial = four_records(0x1000 + 30, kMax);
  EXPECT_EQ(ds::bts_records(k64, partial), 1u);
  EXPECT_FALSE(ds::bts_full(k64, partial));
  // 10 bytes left below the maximum: the next record would not fit.
  const DsArea tail = four_records(kMax - 10, kMax);
  EXPECT_EQ(ds::bts_records(k64, tail), 3u);
  EXPECT_TRUE(ds::bts_full(k64, tail));
  // The SDM's "multiple of the record size plus 1" maximum: full after four records although
  // the index is still below the maximum.
  DsArea plus_one = four_records(kMax, kMax);
  plus_one.bts_absolute_maximum = kMax + 1;
  EXPECT_TRUE(ds::bts_full(k64, plus_one));
  EXPECT_EQ(ds::bts_capacity(k64, plus_one), 4u);
  // An index below the base holds nothing; a maximum at or below the base holds nothing.
  EXPECT_EQ(ds::bts_records(k64, four_records(0x0ff0, kMax)), 0u);
  DsArea inverted = four_records(0x1000, kMax);
  inverted.bts_absolute_maximum = 0x0f00;
  EXPECT_EQ(ds::bts_capacity(k64, inverted), 0u);
  EXPECT_TRUE(ds::bts_full(k64, inverted));
}

TEST(DsArithmeticTest, WrapPutsTheIndexBackAtTheBaseOnly) {
  DsArea full = four_records(kMax, 0x1048);
  full.pebs_index = 0x5000;
  const DsArea wrapped = ds::bts_wrap(full);
  EXPECT_EQ(wrapped.bts_index, 0x1000u);
  EXPECT_EQ(ds::bts_records(k64, wrapped), 0u);
  EXPECT_FALSE(ds::bts_full(k64, wrapped));
  DsArea expected = full;
  expected.bts_index = 0x1000;
  EXPECT_EQ(wrapped, expected);
}

void expect_invalid(BtsFormat f, const DsArea& area, const std::string& field) {
  auto r = ds::validate_bts(f, area);
  ASSERT_FALSE(r.has_value()) << field;
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(r.error().message().starts_with(field + ": ")) << r.error().message();
}

TEST(DsValidateTest, AcceptsValidAreas) {
  for (std::uint64_t index : {0x1000u, 0x1018u, 0x1060u}) {
    for (std::uint64_t threshold : {0x1000u, 0x1048u, 0x1060u, 0x1061u, 0x1078u}) {
      auto r = ds::validate_bts(k64, four_records(index, threshold));
      EXPECT_TRUE(r.has_value()) << index << " " << threshold << " " << r.error().message();
    }
  }
  DsArea a32;
  a32.bts_buffer_base = 0xfffff000;
  a32.bts_index = 0xfffff00c;
  a32.bts_absolute_maximum = 0xfffff000 + 10 * 12;
  a32.bts_interrupt_threshold = a32.bts_absolute_maximum - 2 * 12;
  EXPECT_TRUE(ds::validate_bts(BtsFormat::k32, a32).has_value());
  // Doubleword alignment is all the base needs, in both formats.
  DsArea dword = four_records(0x1004, kMax + 4);
  dword.bts_buffer_base = 0x1004;
  dword.bts_absolute_maximum = kMax + 4;
  EXPECT_TRUE(ds::validate_bts(k64, dword).has_value());
  // PEBS fields are not BTS's concern.
  DsArea pebs = four_records(0x1000, kMax);
  pebs.pebs_index = 3;
  EXPECT_TRUE(ds::validate_bts(k64, pebs).has_value());
}

TEST(DsValidateTest, EachErrorNamesItsField) {
  DsArea a = four_records(0x1002, kMax + 2);
  a.bts_buffer_base = 0x1002;
  a.bts_absolute_maximum = kMax + 2;
  expect_invalid(k64, a, "bts_buffer_base");

  a = four_records(0x1000, kMax);
  a.bts_absolute_maximum = 0x1000;
  expect_invalid(k64, a, "bts_absolute_maximum");
  a.bts_absolute_maximum = 0x1000 + 23;
  expect_invalid(k64, a, "bts_absolute_maximum");
  a.bts_absolute_maximum = 0x0f00;
  expect_invalid(k64, a, "bts_absolute_maximum");
  a.bts_absolute_maximum = kMax + 1;  // the SDM's "plus 1": not a whole number of records
  expect_invalid(k64, a, "bts_absolute_maximum");

  expect_invalid(k64, four_records(0x0fe8, kMax), "bts_index");
  expect_invalid(k64, four_records(kMax + 24, kMax), "bts_index");
  expect_invalid(k64, four_records(0x1000 + 30, kMax), "bts_index");

  expect_invalid(k64, four_records(0x1000, 0x0fe8), "bts_interrupt_threshold");
  // 2^64 - 16 is a multiple of 24: only the "below the base" rule catches this one.
  expect_invalid(k64, four_records(0x1000, 0x0ff0), "bts_interrupt_threshold");
  expect_invalid(k64, four_records(0x1000, 0x1000 + 12), "bts_interrupt_threshold");

  DsArea a32;
  a32.bts_buffer_base = 0x1000;
  a32.bts_index = 0x1000;
  a32.bts_absolute_maximum = 0x1000 + 12 * 4;
  a32.bts_interrupt_threshold = 0x1000 + 12 * 2;
  EXPECT_TRUE(ds::validate_bts(BtsFormat::k32, a32).has_value());
  a32.bts_interrupt_threshold = 0x1000 + 24 + 4;  // a 64-bit boundary, not a 32-bit one
  expect_invalid(BtsFormat::k32, a32, "bts_interrupt_threshold");
  a32.bts_interrupt_threshold = 0x100000000;
  expect_invalid(BtsFormat::k32, a32, "bts_interrupt_threshold");
  a32.bts_interrupt_threshold = 0x1000;
  a32.bts_absolute_maximum = 0x100000000;
  expect_invalid(BtsFormat::k32, a32, "bts_absolute_maximum");
}

struct DebugctlBit {
  int bit;
  bool (*accessor)(std::uint64_t);
  const char* name;
};

constexpr std::array<DebugctlBit, 8> kDebugctlBits = {{
    {0, debugctl::lbr, "LBR"},
    {1, debugctl::btf, "BTF"},
    {6, debugctl::tr, "TR"},
    {7, debugctl::bts, "BTS"},
    {8, debugctl::btint, "BTINT"},
    {9, debugctl::bts_off_os, "BTS_OFF_OS"},
    {10, debugctl::bts_off_usr, "BTS_OFF_USR"},
    {11, debugctl::freeze_lbrs_on_pmi, "FREEZE_LBRS_ON_PMI"},
}};

// Linux's DEBUGCTLMSR_* values.
static_assert(debugctl::kLbr == 0x1 && debugctl::kBtf == 0x2);
static_assert(debugctl::kTr == 0x40 && debugctl::kBts == 0x80 && debugctl::kBtint == 0x100);
static_assert(debugctl::kBtsOffOs == 0x200 && debugctl::kBtsOffUsr == 0x400);
static_assert(debugctl::kFreezeLbrsOnPmi == 0x800);
static_assert(debugctl::kBtsMask == 0x7c0);

TEST(DebugctlTest, EachAccessorReadsExactlyItsBit) {
  for (const DebugctlBit& b : kDebugctlBits) {
    const std::uint64_t v = std::uint64_t{1} << b.bit;
    for (const DebugctlBit& other : kDebugctlBits) {
      EXPECT_EQ(other.accessor(v), other.bit == b.bit) << b.name << " read by " << other.name;
      EXPECT_EQ(other.accessor(~v), other.bit != b.bit) << b.name << " read by " << other.name;
    }
  }
  for (int bit : {2, 3, 4, 5, 12, 13, 14, 15, 31, 63}) {
    for (const DebugctlBit& b : kDebugctlBits) {
      EXPECT_FALSE(b.accessor(std::uint64_t{1} << bit)) << b.name << " bit " << bit;
    }
  }
}

TEST(DebugctlTest, WhatTheHardwareStoresFollowsTheSdmTable) {
  using namespace debugctl;
  struct Row {
    std::uint64_t v;
    bool enabled, kernel, user, interrupt;
  };
  const std::vector<Row> rows = {
      {0, false, false, false, false},
      {kBts | kBtint, false, false, false, false},  // no TR: no messages
      {kTr, false, false, false, false},            // messages, not stored
      {kTr | kBts, true, true, true, false},        // circular, all rings
      {kTr | kBts | kBtsOffOs, true, false, true, false},
      {kTr | kBts | kBtsOffUsr, true, true, false, false},
      {kTr | kBts | kBtsOffOs | kBtsOffUsr, true, false, false, false},
      {kTr | kBts | kBtint, true, true, true, true},
      {kTr | kBts | kBtint | kBtsOffOs, true, false, true, true},
      {kTr | kBtint, false, false, false, false},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(bts_enabled(r.v), r.enabled) << std::hex << r.v;
    EXPECT_EQ(traces_kernel(r.v), r.kernel) << std::hex << r.v;
    EXPECT_EQ(traces_user(r.v), r.user) << std::hex << r.v;
    EXPECT_EQ(bts_interrupt(r.v), r.interrupt) << std::hex << r.v;
  }
}

TEST(DebugctlTest, EnableAndDisableLikeLinux) {
  using namespace debugctl;
  EXPECT_EQ(enable_bts(0, {}), 0xc0u);
  EXPECT_EQ(enable_bts(0, {.interrupt = true}), 0x1c0u);
  EXPECT_EQ(enable_bts(0, {.kernel = false}), 0x2c0u);
  EXPECT_EQ(enable_bts(0, {.user = false}), 0x4c0u);
  EXPECT_EQ(enable_bts(0, {.kernel = false, .user = false, .interrupt = true}), 0x7c0u);
  // Other bits are kept; the BTS bits are replaced.
  EXPECT_EQ(enable_bts(kLbr | kFreezeLbrsOnPmi | kBtsOffOs | kBtint, {}), 0x8c1u);
  EXPECT_EQ(disable_bts(0xfff), 0x83fu);
  EXPECT_EQ(disable_bts(enable_bts(kBtf, {.user = false, .interrupt = true})), kBtf);
  const std::uint64_t v = enable_bts(0, {.kernel = true, .user = false});
  EXPECT_TRUE(traces_kernel(v));
  EXPECT_FALSE(traces_user(v));
  EXPECT_FALSE(bts_interrupt(v));
}

// --- store_bts ------------------------------------------------------------------------------

constexpr std::uint64_t kOn = debugctl::kTr | debugctl::kBts;
constexpr std::uint64_t kOnInt = kOn | debugctl::kBtint;

// The n-th test record: distinct addresses that fit both formats, alternating predicted.
constexpr BtsRecord rec(int n) {
  const auto v = static_cast<std::uint64_t>(n);
  return {0x400000 + 0x10 * v, 0x500000 + 0x10 * v, n % 2 == 0};
}

// The records the buffer holds at slots 0..count-1.
std::vector<BtsRecord> slots(BtsFormat f, const std::vector<std::byte>& buffer) {
  std::vector<BtsRecord> out;
  const std::size_t size = bts::record_size(f);
  for (std::size_t at = 0; at + size <= buffer.size(); at += size) {
    auto r = bts::decode(f, std::span<const std::byte>(buffer).subspan(at, size));
    EXPECT_TRUE(r.has_value());
    out.push_back(*r);
  }
  return out;
}

// Stores rec(n) and checks the outcome flags ("s" stored, "w" wrapped, "d" dropped, "i" interrupt).
void store_expect(BtsFormat f, std::uint64_t ctl, DsArea& area, std::vector<std::byte>& buffer,
                  int n, const std::string& flags) {
  auto r = store_bts(f, ctl, area, buffer, rec(n), false);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  std::string got;
  if (r->stored) got += "s";
  if (r->wrapped) got += "w";
  if (r->dropped) got += "d";
  if (r->interrupt) got += "i";
  EXPECT_EQ(got, flags) << "record " << n;
}

TEST(StoreBtsTest, OffOrFilteredStoresNothing) {
  struct Row {
    std::uint64_t ctl;
    bool kernel_stored;
    bool user_stored;
  };
  const Row rows[] = {
      {0, false, false},
      {debugctl::kTr, false, false},
      {debugctl::kBts, false, false},
      {debugctl::kBts | debugctl::kBtint, false, false},
      {kOn, true, true},
      {kOn | debugctl::kBtsOffOs, false, true},
      {kOn | debugctl::kBtsOffUsr, true, false},
      {kOn | debugctl::kBtsOffOs | debugctl::kBtsOffUsr, false, false},
      {kOnInt | debugctl::kBtsOffOs, false, true},
  };
  for (const Row& row : rows) {
    for (bool kernel : {false, true}) {
      DsArea area = four_records(0x1000, kMax);
      std::vector<std::byte> buffer = filled(4 * 24, 0xaa);
      auto r = store_bts(k64, row.ctl, area, buffer, rec(1), kernel);
      ASSERT_TRUE(r.has_value()) << r.error().message();
      const bool expect = kernel ? row.kernel_stored : row.user_stored;
      EXPECT_EQ(r->stored, expect) << std::hex << row.ctl << " kernel " << kernel;
      EXPECT_FALSE(r->wrapped || r->dropped || r->interrupt);
      if (expect) {
        EXPECT_EQ(area.bts_index, 0x1018u);
        EXPECT_EQ(slots(k64, buffer)[0], rec(1));
      } else {
        EXPECT_EQ(area, four_records(0x1000, kMax));
        EXPECT_EQ(buffer, filled(4 * 24, 0xaa));
      }
    }
  }
  // A filtered branch changes nothing even when the buffer is full with BTINT set.
  DsArea full = four_records(kMax, kMax);
  std::vector<std::byte> buffer = filled(4 * 24, 0xaa);
  auto r = store_bts(k64, kOnInt | debugctl::kBtsOffUsr, full, buffer, rec(1), false);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->stored || r->wrapped || r->dropped || r->interrupt);
  EXPECT_EQ(full, four_records(kMax, kMax));
}

TEST(StoreBtsTest, RecordsLandAtTheIndexAndTheIndexMovesOn) {
  DsArea area = four_records(0x1000, ds::bts_no_interrupt_threshold(k64, kMax));
  std::vector<std::byte> buffer = filled(4 * 24, 0xaa);
  for (int n = 0; n < 4; ++n) {
    store_expect(k64, kOn, area, buffer, n, "s");
    EXPECT_EQ(area.bts_index, 0x1000u + 24 * static_cast<std::uint64_t>(n + 1));
    EXPECT_EQ(slots(k64, buffer)[static_cast<std::size_t>(n)], rec(n));
  }
  // The predicted bit is the only flag written.
  EXPECT_EQ(buffer[16], std::byte{0x10});
  EXPECT_EQ(buffer[24 + 16], std::byte{0x00});
  // Only the BTS index moves.
  DsArea expected = four_records(kMax, ds::bts_no_interrupt_threshold(k64, kMax));
  EXPECT_EQ(area, expected);
}

TEST(StoreBtsTest, CircularBufferOverwritesTheOldest) {
  // BTINT clear: even a threshold inside the buffer raises nothing.
  for (std::uint64_t threshold : {std::uint64_t{0x1030}, kMax, kMax + 24}) {
    DsArea area = four_records(0x1000, threshold);
    std::vector<std::byte> buffer = filled(4 * 24, 0xaa);
    for (int n = 0; n < 4; ++n) store_expect(k64, kOn, area, buffer, n, "s");
    EXPECT_EQ(area.bts_index, kMax);
    // Full: back to the base, the oldest overwritten, then on from there.
    store_expect(k64, kOn, area, buffer, 4, "sw");
    EXPECT_EQ(area.bts_index, 0x1018u);
    EXPECT_EQ(slots(k64, buffer), (std::vector<BtsRecord>{rec(4), rec(1), rec(2), rec(3)}));
    store_expect(k64, kOn, area, buffer, 5, "s");
    EXPECT_EQ(area.bts_index, 0x1030u);
    EXPECT_EQ(slots(k64, buffer), (std::vector<BtsRecord>{rec(4), rec(5), rec(2), rec(3)}));
    for (int n = 6; n < 8; ++n) store_expect(k64, kOn, area, buffer, n, "s");
    store_expect(k64, kOn, area, buffer, 8, "sw");
    EXPECT_EQ(slots(k64, buffer), (std::vector<BtsRecord>{rec(8), rec(5), rec(6), rec(7)}));
  }
}

TEST(StoreBtsTest, InterruptExactlyWhenTheThresholdIsReachedThenDrops) {
  // Threshold after two records.
  DsArea area = four_records(0x1000, 0x1030);
  std::vector<std::byte> buffer = filled(4 * 24, 0xaa);
  store_expect(k64, kOnInt, area, buffer, 0, "s");
  store_expect(k64, kOnInt, area, buffer, 1, "si");
  store_expect(k64, kOnInt, area, buffer, 2, "s");
  store_expect(k64, kOnInt, area, buffer, 3, "s");
  EXPECT_EQ(area.bts_index, kMax);
  // Full with BTINT set: nothing stored, nothing moves, nothing overwritten.
  const std::vector<std::byte> before = buffer;
  store_expect(k64, kOnInt, area, buffer, 4, "d");
  store_expect(k64, kOnInt, area, buffer, 5, "d");
  EXPECT_EQ(area, four_records(kMax, 0x1030));
  EXPECT_EQ(buffer, before);
  // Software drains (index back to the base): the next crossing interrupts again.
  area = ds::bts_wrap(area);
  store_expect(k64, kOnInt, area, buffer, 6, "s");
  store_expect(k64, kOnInt, area, buffer, 7, "si");
  EXPECT_EQ(slots(k64, buffer), (std::vector<BtsRecord>{rec(6), rec(7), rec(2), rec(3)}));
  // An index already at or past the threshold is no crossing.
  area = four_records(0x1030, 0x1030);
  store_expect(k64, kOnInt, area, buffer, 8, "s");
}

TEST(StoreBtsTest, ThresholdAtTheMaximumInterruptsOnTheLastRecord) {
  DsArea area = four_records(0x1000, kMax);
  std::vector<std::byte> buffer = filled(4 * 24, 0xaa);
  for (int n = 0; n < 3; ++n) store_expect(k64, kOnInt, area, buffer, n, "s");
  store_expect(k64, kOnInt, area, buffer, 3, "si");
  store_expect(k64, kOnInt, area, buffer, 4, "d");
  EXPECT_EQ(area.bts_index, kMax);
}

TEST(StoreBtsTest, ThresholdAboveTheMaximumNeverInterrupts) {
  for (std::uint64_t threshold : {kMax + 1, kMax + 24, ~std::uint64_t{0}}) {
    DsArea area = four_records(0x1000, threshold);
    std::vector<std::byte> buffer = filled(4 * 24, 0xaa);
    for (int n = 0; n < 4; ++n) store_expect(k64, kOnInt, area, buffer, n, "s");
    // BTINT set still means "stop when full", without any interrupt.
    store_expect(k64, kOnInt, area, buffer, 4, "d");
    EXPECT_EQ(area.bts_index, kMax);
  }
}

TEST(StoreBtsTest, ThirtyTwoBitFormatStoresTwelveByteRecords) {
  constexpr BtsFormat k32 = BtsFormat::k32;
  // Eight 12-byte records over the 96 bytes at 0x1000; threshold after six.
  DsArea area = four_records(0x1000, 0x1000 + 6 * 12);
  std::vector<std::byte> buffer = filled(8 * 12, 0xaa);
  for (int n = 0; n < 5; ++n) store_expect(k32, kOnInt, area, buffer, n, "s");
  store_expect(k32, kOnInt, area, buffer, 5, "si");
  EXPECT_EQ(area.bts_index, 0x1000u + 6 * 12);
  for (int n = 0; n < 6; ++n) EXPECT_EQ(slots(k32, buffer)[static_cast<std::size_t>(n)], rec(n));
  EXPECT_EQ(buffer[12 * 6], std::byte{0xaa});
  // The 32-bit image of record 1 by hand.
  EXPECT_EQ(std::vector<std::byte>(buffer.begin() + 12, buffer.begin() + 24),
            bytes({0x10, 0x00, 0x40, 0x00, 0x10, 0x00, 0x50, 0x00, 0, 0, 0, 0}));

  // A 64-bit address does not fit: EINVAL, nothing changes (also where the buffer would wrap).
  for (std::uint64_t index : {std::uint64_t{0x1000 + 6 * 12}, kMax}) {
    area.bts_index = index;
    const DsArea area_before = area;
    const std::vector<std::byte> buffer_before = buffer;
    for (BtsRecord wide :
         {BtsRecord{0xffffffff81000000, 0x400000, true}, BtsRecord{0x400000, 0x100000000, false}}) {
      auto r = store_bts(k32, kOn, area, buffer, wide, true);
      ASSERT_FALSE(r.has_value());
      EXPECT_EQ(r.error().code(), ErrorCode::kInval);
      EXPECT_TRUE(r.error().message().starts_with(wide.from > 0xffffffff ? "from:" : "to:"))
          << r.error().message();
      EXPECT_EQ(area, area_before);
      EXPECT_EQ(buffer, buffer_before);
    }
  }
  // The same area read as 64-bit holds four records.
  area = four_records(0x1000, kMax);
  for (int n = 0; n < 4; ++n) store_expect(k64, kOn, area, buffer, n, "s");
  EXPECT_EQ(slots(k64, buffer)[3], rec(3));
}

TEST(StoreBtsTest, BufferTooSmallIsInvalidAndChangesNothing) {
  for (BtsFormat f : kFormats) {
    const std::size_t size = bts::record_size(f);
    // The area says 96 bytes; the memory has 92: the last record's place is cut short.
    const std::vector<std::byte> pristine = filled(4 * 24 - 4, 0xaa);
    for (std::uint64_t index : {kMax - size, kMax}) {
      DsArea area = four_records(index, kMax + 24);
      std::vector<std::byte> buffer = pristine;
      auto r = store_bts(f, kOn, area, buffer, rec(1), false);
      if (index == kMax) {
        // Full and circular: the store goes to the base, which is in memory.
        ASSERT_TRUE(r.has_value()) << r.error().message();
        EXPECT_TRUE(r->wrapped);
        continue;
      }
      ASSERT_FALSE(r.has_value());
      EXPECT_EQ(r.error().code(), ErrorCode::kInval);
      EXPECT_TRUE(r.error().message().starts_with("bts_index:")) << r.error().message();
      EXPECT_EQ(area, four_records(index, kMax + 24));
      EXPECT_EQ(buffer, pristine);
    }
    // No memory at all.
    DsArea area = four_records(0x1000, kMax);
    auto r = store_bts(f, kOn, area, std::span<std::byte>(), rec(1), false);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), ErrorCode::kInval);
    EXPECT_EQ(area, four_records(0x1000, kMax));
    // An index below the base (an area that would not validate) is refused too.
    area = four_records(0x0fe8, kMax);
    std::vector<std::byte> buffer = filled(4 * 24, 0xaa);
    r = store_bts(f, kOn, area, buffer, rec(1), false);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), ErrorCode::kInval);
    EXPECT_EQ(buffer, filled(4 * 24, 0xaa));
  }
}

}  // namespace
}  // namespace hwarb::x86
