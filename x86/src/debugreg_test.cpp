#include "hwarb/x86/debugreg.h"

#include <gtest/gtest.h>

#include <array>

namespace hwarb::x86 {
namespace {

constexpr std::array kTypes = {DrType::kExecute, DrType::kWrite, DrType::kIo, DrType::kReadWrite};
constexpr std::array kLens = {DrLen::k1, DrLen::k2, DrLen::k4, DrLen::k8};

// Known images, computed by hand from the SDM layout.
static_assert(dr7::encode_slot(0, DrType::kWrite, DrLen::k4) == 0x000d0202);
static_assert(dr7::encode_slot(3, DrType::kReadWrite, DrLen::k8) == 0xb0000280);
static_assert(dr7::encode_slot(1, DrType::kExecute, DrLen::k1) == 0x00000208);
static_assert(dr6::to_hardware(0) == 0xffff0ff0);
static_assert(dr6::to_hardware(dr6::trap_bit(2) | dr6::kSingleStep) == 0xffff4ff4);

TEST(Dr7Test, EverySlotTypeAndLenRoundTrips) {
  for (int slot = 0; slot < kSlots; ++slot) {
    for (DrType t : kTypes) {
      for (DrLen l : kLens) {
        std::uint64_t v = dr7::install(0, slot, t, l);
        EXPECT_TRUE(dr7::enabled(v, slot));
        EXPECT_TRUE(dr7::global_enabled(v, slot));
        EXPECT_FALSE(dr7::local_enabled(v, slot));
        EXPECT_EQ(dr7::type(v, slot), t);
        EXPECT_EQ(dr7::len(v, slot), l);
        EXPECT_TRUE(dr7::global_exact(v));
        for (int other = 0; other < kSlots; ++other) {
          if (other != slot) {
            EXPECT_FALSE(dr7::enabled(v, other)) << slot << " " << other;
          }
        }
        EXPECT_EQ(v & 0xffffffff00000000ull, 0u);
        EXPECT_EQ(v & dr7::kReserved, 0u);
        EXPECT_EQ(dr7::uninstall(v, slot), 0u);
      }
    }
  }
}

TEST(Dr7Test, InstallReplacesOnlyItsSlot) {
  std::uint64_t v = 0;
  v = dr7::install(v, 0, DrType::kWrite, DrLen::k4);
  v = dr7::install(v, 2, DrType::kReadWrite, DrLen::k8);
  std::uint64_t before = v;
  v = dr7::install(v, 0, DrType::kExecute, DrLen::k1);  // same slot, new encoding
  EXPECT_EQ(dr7::type(v, 0), DrType::kExecute);
  EXPECT_EQ(dr7::len(v, 0), DrLen::k1);
  EXPECT_EQ(v & dr7::control_mask(2), before & dr7::control_mask(2));
  EXPECT_TRUE(dr7::enabled(v, 2));
}

TEST(Dr7Test, UninstallKeepsOthersAndClearsGeWithTheLast) {
  std::uint64_t v = dr7::install(0, 1, DrType::kWrite, DrLen::k2);
  v = dr7::install(v, 3, DrType::kReadWrite, DrLen::k4);
  v = dr7::uninstall(v, 1);
  EXPECT_FALSE(dr7::enabled(v, 1));
  EXPECT_EQ(v & dr7::control_mask(1), 0u);
  EXPECT_TRUE(dr7::enabled(v, 3));
  EXPECT_TRUE(dr7::global_exact(v));
  EXPECT_EQ(v, dr7::encode_slot(3, DrType::kReadWrite, DrLen::k4));
  v = dr7::uninstall(v, 3);
  EXPECT_EQ(v, 0u);
  // Uninstalling an empty slot changes nothing else.
  std::uint64_t w = dr7::install(0, 0, DrType::kWrite, DrLen::k1);
  EXPECT_EQ(dr7::uninstall(w, 2), w);
}

TEST(Dr7Test, LocalEnableCountsAsArmed) {
  std::uint64_t v = dr7::local_bit(2) | (std::uint64_t{0b1101} << dr7::control_shift(2));
  EXPECT_TRUE(dr7::enabled(v, 2));
  EXPECT_TRUE(dr7::local_enabled(v, 2));
  EXPECT_FALSE(dr7::global_enabled(v, 2));
  EXPECT_EQ(dr7::type(v, 2), DrType::kWrite);
  EXPECT_EQ(dr7::len(v, 2), DrLen::k4);
}

TEST(Dr7Test, DropReservedClearsBits10To15Only) {
  EXPECT_EQ(dr7::drop_reserved(0xffffffff), 0xffff03ffu);
  EXPECT_EQ(dr7::drop_reserved(0x400), 0u);
  EXPECT_TRUE(dr7::general_detect(dr7::kGeneralDetect));
  EXPECT_FALSE(dr7::general_detect(dr7::drop_reserved(dr7::kGeneralDetect)));
}

TEST(Dr6Test, PolarityRoundTripsAndNamesBits) {
  for (int slot = 0; slot < kSlots; ++slot) {
    std::uint64_t happened = dr6::trap_bit(slot);
    std::uint64_t raw = dr6::to_hardware(happened);
    EXPECT_EQ(dr6::from_hardware(raw), happened);
    EXPECT_TRUE(dr6::trapped(happened, slot));
    for (int other = 0; other < kSlots; ++other) {
      if (other != slot) {
        EXPECT_FALSE(dr6::trapped(happened, other));
      }
    }
    // Bn reads as 1 in the raw image when it happened: the trap bits are not inverted.
    EXPECT_EQ(raw & dr6::kTrapMask, happened);
  }
  EXPECT_TRUE(dr6::single_stepped(dr6::from_hardware(0xffff4ff0)));
  EXPECT_FALSE(dr6::single_stepped(dr6::from_hardware(0xffff0ff0)));
}

TEST(LenTest, BytesAndEncodings) {
  for (DrLen l : kLens) {
    auto back = len_from_bytes(len_bytes(l));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, l);
  }
  EXPECT_FALSE(len_from_bytes(8, /*has_len8=*/false).has_value());
  EXPECT_FALSE(len_from_bytes(3).has_value());
  EXPECT_FALSE(len_from_bytes(0).has_value());
  EXPECT_FALSE(len_from_bytes(16).has_value());
  EXPECT_EQ(len_bytes(DrLen::k8), 8);
  EXPECT_EQ(len_bytes(DrLen::k4), 4);
}

// Data matching against a brute-force byte-set model, for every len, alignment, access size and
// offset around the watched range (first byte, last byte, one before, one after).
TEST(MatchTest, DataMatchEqualsByteOverlap) {
  const std::uint64_t base = 0x1000;
  for (DrLen l : kLens) {
    const int n = len_bytes(l);
    for (int misalign = 0; misalign < n; ++misalign) {
      const std::uint64_t dr = base + static_cast<std::uint64_t>(misalign);
      for (int size : {1, 2, 4, 8}) {
        for (int off = -10; off <= 10; ++off) {
          const std::uint64_t access = base + static_cast<std::uint64_t>(off);
          bool model = false;
          for (int b = 0; b < size; ++b) {
            std::uint64_t byte = access + static_cast<std::uint64_t>(b);
            if (byte >= base && byte < base + static_cast<std::uint64_t>(n)) model = true;
          }
          EXPECT_EQ(data_match(dr, l, access, size), model)
              << "len " << n << " dr+" << misalign << " access " << off << "/" << size;
        }
      }
    }
  }
  EXPECT_FALSE(data_match(base, DrLen::k4, base, 0));
}

TEST(MatchTest, ExecuteMatchesExactAddressOnly) {
  EXPECT_TRUE(exec_match(0x401000, 0x401000));
  EXPECT_FALSE(exec_match(0x401000, 0x401001));
  EXPECT_FALSE(exec_match(0x401001, 0x401000));
}

}  // namespace
}  // namespace hwarb::x86
