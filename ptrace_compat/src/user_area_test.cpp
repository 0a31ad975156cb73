#include "hwarb/ptrace_compat/user_area.h"

#include <gtest/gtest.h>
#include <sys/user.h>

#include <cstddef>

namespace hwarb::ptrace_compat {
namespace {

void expect_eio(UserLayout layout, std::uint64_t offset) {
  auto r = decode_offset(layout, layout == UserLayout::kI386 ? UserAbi::kCompat : UserAbi::kNative,
                         offset);
  ASSERT_FALSE(r) << offset;
  EXPECT_EQ(r.error().code(), ErrorCode::kIo);
  EXPECT_TRUE(r.error().message().starts_with("offset " + std::to_string(offset)))
      << r.error().message();
}

void expect_kind(UserLayout layout, std::uint64_t offset, OffsetKind kind, int dr = 0) {
  auto r = decode_offset(layout, layout == UserLayout::kI386 ? UserAbi::kCompat : UserAbi::kNative,
                         offset);
  ASSERT_TRUE(r) << offset << ": " << r.error().to_string();
  EXPECT_EQ(r->kind, kind) << offset;
  if (kind == OffsetKind::kDebugReg) {
    EXPECT_EQ(r->debugreg, dr) << offset;
  }
}

TEST(UserArea, NativeLayoutComesFromSysUser) {
  const UserArea& a = user_area(UserLayout::kX86_64);
  EXPECT_EQ(a.word, 8u);
  EXPECT_EQ(a.debugreg, offsetof(struct user, u_debugreg));
  EXPECT_EQ(a.regs_size, sizeof(struct user_regs_struct));
  // The kernel's struct user has error_code and fault_address after u_debugreg[].
  EXPECT_EQ(a.size, sizeof(struct user) + 16);
  EXPECT_EQ(debugreg_offset(a, 7), offsetof(struct user, u_debugreg) + 56);
}

TEST(UserArea, CompatLayoutIsStructUser32) {
  const UserArea& a = user_area(UserLayout::kI386);
  EXPECT_EQ(a.word, 4u);
  EXPECT_EQ(a.debugreg, 252u);
  EXPECT_EQ(a.regs_size, 68u);
  EXPECT_EQ(a.size, 284u);
}

TEST(UserArea, NativeDecodingEveryOffsetClass) {
  const UserArea& a = user_area(UserLayout::kX86_64);
  for (std::uint64_t off = 0; off < a.size + 64; ++off) {
    SCOPED_TRACE(off);
    if (off % 8 != 0 || off >= a.size) {
      expect_eio(UserLayout::kX86_64, off);
    } else if (off < a.regs_size) {
      expect_kind(UserLayout::kX86_64, off, OffsetKind::kRegister);
    } else if (off >= a.debugreg && off < a.debugreg + 64) {
      expect_kind(UserLayout::kX86_64, off, OffsetKind::kDebugReg,
                  static_cast<int>((off - a.debugreg) / 8));
    } else {
      expect_kind(UserLayout::kX86_64, off, OffsetKind::kOther);
    }
  }
  // Concrete values checked against the kernel on this machine (ptrace_differential_test).
  expect_kind(UserLayout::kX86_64, 912, OffsetKind::kOther);
  expect_kind(UserLayout::kX86_64, 920, OffsetKind::kOther);
  expect_eio(UserLayout::kX86_64, 928);
  expect_eio(UserLayout::kX86_64, 849);
  expect_eio(UserLayout::kX86_64, ~std::uint64_t{7});
}

TEST(UserArea, CompatDecodingAcceptsMisalignedDebugRegOffsets) {
  // Linux's getreg32/putreg32 match the u_debugreg range before checking alignment.
  expect_kind(UserLayout::kI386, 252, OffsetKind::kDebugReg, 0);
  expect_kind(UserLayout::kI386, 253, OffsetKind::kDebugReg, 0);
  expect_kind(UserLayout::kI386, 255, OffsetKind::kDebugReg, 0);
  expect_kind(UserLayout::kI386, 256, OffsetKind::kDebugReg, 1);
  expect_kind(UserLayout::kI386, 279, OffsetKind::kDebugReg, 6);
  expect_kind(UserLayout::kI386, 280, OffsetKind::kDebugReg, 7);
  expect_eio(UserLayout::kI386, 281);
  expect_eio(UserLayout::kI386, 283);
  // `regno > sizeof(struct user32)`: the size itself passes, as a dummy field.
  expect_kind(UserLayout::kI386, 284, OffsetKind::kOther);
  expect_eio(UserLayout::kI386, 288);
  expect_eio(UserLayout::kI386, 2);
  expect_kind(UserLayout::kI386, 0, OffsetKind::kRegister);
  expect_kind(UserLayout::kI386, 64, OffsetKind::kRegister);
  expect_kind(UserLayout::kI386, 68, OffsetKind::kOther);
  expect_kind(UserLayout::kI386, 248, OffsetKind::kOther);
}

TEST(UserArea, NativeI386DecodingChecksAlignmentAndSizeFirst) {
  // A 32-bit kernel's arch_ptrace: the same rules as x86_64 on the 4-byte layout.
  auto native = [](std::uint64_t off) {
    return decode_offset(UserLayout::kI386, UserAbi::kNative, off);
  };
  EXPECT_EQ(native(253).error().code(), ErrorCode::kIo);
  EXPECT_EQ(native(284).error().code(), ErrorCode::kIo);
  EXPECT_EQ(native(280)->debugreg, 7);
  EXPECT_EQ(native(248)->kind, OffsetKind::kOther);
  EXPECT_EQ(native(64)->kind, OffsetKind::kRegister);
  // Compat decoding exists for the i386 layout only.
  auto bad = decode_offset(UserLayout::kX86_64, UserAbi::kCompat, 848);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(bad.error().message().starts_with("abi"));
}

TEST(UserArea, ParseLayout) {
  EXPECT_EQ(parse_user_layout("x86_64"), UserLayout::kX86_64);
  EXPECT_EQ(parse_user_layout("i386"), UserLayout::kI386);
  auto bad = parse_user_layout("arm64");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(bad.error().message().starts_with("layout"));
  EXPECT_EQ(to_string(UserLayout::kI386), "i386");
}

}  // namespace
}  // namespace hwarb::ptrace_compat
