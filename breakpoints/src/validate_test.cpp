#include "hwarb/breakpoints/validate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace hwarb::breakpoints {
namespace {

using pmu::BpType;

constexpr std::array<Arch, 3> kArches = {Arch::kX86_64, Arch::kI386, Arch::kArm64};
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

pmu::EventAttr bp(std::uint64_t addr, std::uint64_t len, BpType type, bool exclude_kernel = false,
                  bool privileged = false) {
  pmu::EventAttr a;
  a.bp_addr = addr;
  a.bp_len = len;
  a.bp_type = type;
  a.exclude_kernel = exclude_kernel;
  a.privileged = privileged;
  return a;
}

// Expects an error with `code` whose message starts with `field`.
void expect_error(const Result<void>& r, ErrorCode code, std::string_view field,
                  std::string_view contains = {}) {
  ASSERT_FALSE(r.has_value()) << "expected " << errno_name(code) << " on " << field;
  EXPECT_EQ(r.error().code(), code) << r.error().to_string();
  EXPECT_TRUE(r.error().message().starts_with(field)) << r.error().to_string();
  if (!contains.empty()) {
    EXPECT_NE(r.error().message().find(contains), std::string::npos) << r.error().to_string();
  }
}

void expect_ok(const Result<void>& r) {
  EXPECT_TRUE(r.has_value()) << r.error().to_string();
}

TEST(Validate, ArchNamesAndSizes) {
  EXPECT_EQ(to_string(Arch::kX86_64), "x86_64");
  EXPECT_EQ(to_string(Arch::kI386), "i386");
  EXPECT_EQ(to_string(Arch::kArm64), "arm64");
  for (Arch a : kArches) EXPECT_EQ(*parse_arch(to_string(a)), a);
  auto bad = parse_arch("mips");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(bad.error().message().starts_with("arch"));
  EXPECT_FALSE(parse_arch(""));
  EXPECT_FALSE(parse_arch("X86_64"));
  // sizeof(long) of each arch.
  EXPECT_EQ(exec_len(Arch::kX86_64), 8u);
  EXPECT_EQ(exec_len(Arch::kI386), 4u);
  EXPECT_EQ(exec_len(Arch::kArm64), 4u);
  EXPECT_EQ(task_size_max(Arch::kX86_64), 0x00007ffffffff000ULL);  // docs/architecture.md section 4
  for (Arch a : kArches) {
    EXPECT_EQ(default_len(a, BpType::kX), exec_len(a));
    EXPECT_EQ(default_len(a, BpType::kW), 4u);
    EXPECT_EQ(default_len(a, BpType::kRw), 4u);
  }
  EXPECT_EQ(to_string(BpType::kR), "r");
  EXPECT_EQ(to_string(BpType::kW), "w");
  EXPECT_EQ(to_string(BpType::kRw), "rw");
  EXPECT_EQ(to_string(BpType::kX), "x");
  EXPECT_EQ(to_string(BpType::kEmpty), "empty");
}

TEST(Validate, EmptyTypeIsRefusedEverywhere) {
  for (Arch a : kArches) {
    SCOPED_TRACE(to_string(a));
    expect_error(validate_breakpoint(a, bp(0x1000, 4, BpType::kEmpty)), ErrorCode::kInval, "type");
  }
}

TEST(Validate, ReadOnlyRefusedOnX86AllowedOnArm64) {
  expect_error(validate_breakpoint(Arch::kX86_64, bp(0x1000, 4, BpType::kR)), ErrorCode::kInval,
               "type");
  expect_error(validate_breakpoint(Arch::kI386, bp(0x1000, 4, BpType::kR)), ErrorCode::kInval,
               "type");
  for (std::uint64_t len : {1, 2, 4, 8}) {
    expect_ok(validate_breakpoint(Arch::kArm64, bp(0x1000, len, BpType::kR)));
  }
  // The other types are fine everywhere.
  for (Arch a : kArches) {
    SCOPED_TRACE(to_string(a));
    expect_ok(validate_breakpoint(a, bp(0x1000, 4, BpType::kW)));
    expect_ok(validate_breakpoint(a, bp(0x1000, 4, BpType::kRw)));
    expect_ok(validate_breakpoint(a, bp(0x1000, exec_len(a), BpType::kX)));
  }
}

TEST(Validate, ExecuteLenIsSizeofLong) {
  const std::uint64_t want[] = {8, 4, 4};  // x86_64, i386, arm64
  for (std::size_t i = 0; i < kArches.size(); ++i) {
    const Arch a = kArches[i];
    for (std::uint64_t len = 0; len <= 17; ++len) {
      SCOPED_TRACE(std::string(to_string(a)) + " len " + std::to_string(len));
      auto r = validate_breakpoint(a, bp(0x1000, len, BpType::kX));
      if (len == want[i]) {
        expect_ok(r);
      } else {
        expect_error(r, ErrorCode::kInval, "len", std::to_string(want[i]));
      }
    }
  }
}

TEST(Validate, DataLenIsOneTwoFourOrEight) {
  for (Arch a : kArches) {
    const bool has8 = a != Arch::kI386;
    std::vector<BpType> types = {BpType::kW, BpType::kRw};
    if (a == Arch::kArm64) types.push_back(BpType::kR);
    for (BpType t : types) {
      for (std::uint64_t len = 0; len <= 17; ++len) {
        SCOPED_TRACE(std::string(to_string(a)) + " " + std::string(to_string(t)) + " len " +
                     std::to_string(len));
        const bool ok = len == 1 || len == 2 || len == 4 || (len == 8 && has8);
        // x86: another power of two (aligned: 0x1000 is) is an AMD range breakpoint, which
        // needs BPEXT: EOPNOTSUPP. arm64 has no such thing.
        const bool range = a != Arch::kArm64 && (len == 8 || len == 16);
        auto r = validate_breakpoint(a, bp(0x1000, len, t));
        if (ok) {
          expect_ok(r);
        } else if (range) {
          expect_error(r, ErrorCode::kOpNotSupp, "len", "range");
        } else {
          expect_error(r, ErrorCode::kInval, "len");
        }
      }
    }
  }
  // Large lengths: a power of two is a range breakpoint (misaligned: EINVAL on addr), others
  // EINVAL on len.
  expect_error(validate_breakpoint(Arch::kX86_64, bp(0x1000, 16, BpType::kW)),
               ErrorCode::kOpNotSupp, "len");
  expect_error(validate_breakpoint(Arch::kX86_64, bp(0x1008, 16, BpType::kW)), ErrorCode::kInval,
               "addr");
  expect_error(validate_breakpoint(Arch::kX86_64, bp(0x1000, 24, BpType::kW)), ErrorCode::kInval,
               "len");
  expect_error(validate_breakpoint(Arch::kX86_64, bp(0, kMax, BpType::kW)), ErrorCode::kInval,
               "len");
}

TEST(Validate, DataAddressAlignedToLenForEveryMisalignment) {
  for (Arch a : kArches) {
    const std::uint64_t lens[] = {1, 2, 4, 8};
    for (std::uint64_t len : lens) {
      if (len == 8 && a == Arch::kI386) continue;
      for (BpType t : {BpType::kW, BpType::kRw}) {
        for (std::uint64_t mis = 0; mis < 16; ++mis) {
          SCOPED_TRACE(std::string(to_string(a)) + " len " + std::to_string(len) + " +" +
                       std::to_string(mis));
          auto r = validate_breakpoint(a, bp(0x10000 + mis, len, t));
          if (mis % len == 0) {
            expect_ok(r);
          } else {
            expect_error(r, ErrorCode::kInval, "addr", "aligned");
          }
        }
      }
    }
  }
}

TEST(Validate, X86ExecuteAtAnyByteArm64ExecuteAlignedToFour) {
  for (std::uint64_t mis = 0; mis < 16; ++mis) {
    SCOPED_TRACE(mis);
    expect_ok(validate_breakpoint(Arch::kX86_64, bp(0x400000 + mis, 8, BpType::kX)));
    expect_ok(validate_breakpoint(Arch::kI386, bp(0x400000 + mis, 4, BpType::kX)));
    auto r = validate_breakpoint(Arch::kArm64, bp(0x400000 + mis, 4, BpType::kX));
    if (mis % 4 == 0) {
      expect_ok(r);
    } else {
      expect_error(r, ErrorCode::kInval, "addr");
    }
  }
}

TEST(Validate, X86ExecuteInKernelSpaceIsEinvalNeverAWrap) {
  // Near 2^64 an x86 execute breakpoint is kernel space, which takes no execute breakpoint (a
  // kernel without kprobes): EINVAL naming addr for every caller, never a wrap.
  for (Arch a : {Arch::kX86_64, Arch::kI386}) {
    for (std::uint64_t back = 1; back < 8; ++back) {
      SCOPED_TRACE(back);
      const std::uint64_t addr = kMax - back + 1;
      for (int flags = 0; flags < 4; ++flags) {
        expect_error(
            validate_breakpoint(a, bp(addr, exec_len(a), BpType::kX, flags & 1, flags & 2)),
            ErrorCode::kInval, "addr", "kprobes");
      }
    }
  }
  // The last bytes of the address space exactly, for a privileged caller.
  expect_ok(validate_breakpoint(Arch::kX86_64, bp(kMax - 7, 8, BpType::kRw, false, true)));
  expect_ok(validate_breakpoint(Arch::kArm64, bp(kMax - 3, 4, BpType::kX, false, true)));
}

TEST(Validate, KernelSpaceAtAndAboveTaskSizeMax) {
  for (Arch a : kArches) {
    const std::uint64_t tsm = task_size_max(a);
    struct Case {
      std::uint64_t addr, len;
      BpType type;
      bool kernel;
    };
    std::vector<Case> cases = {
        {tsm - 4, 4, BpType::kW, false},  // last byte tsm - 1: user space
        {tsm - 1, 1, BpType::kRw, false},     {tsm, 1, BpType::kW, true},
        {tsm, 4, BpType::kRw, true},          {tsm + 0x1000, 2, BpType::kW, true},
        {kMax - 3, 4, BpType::kW, true},      {tsm - exec_len(a), exec_len(a), BpType::kX, false},
        {tsm, exec_len(a), BpType::kX, true},
    };
    if (a != Arch::kArm64) {
      // x86 execute at any byte covers that byte only (LEN_1), as Linux checks it: the last
      // user byte is user space even though addr + len reaches past TASK_SIZE_MAX.
      cases.push_back({tsm - 1, exec_len(a), BpType::kX, false});
      cases.push_back({tsm - exec_len(a) + 1, exec_len(a), BpType::kX, false});
    }
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(to_string(a)) + " addr " + std::to_string(c.addr));
      if (!c.kernel) {
        expect_ok(validate_breakpoint(a, bp(c.addr, c.len, c.type, true, false)));
        expect_ok(validate_breakpoint(a, bp(c.addr, c.len, c.type, false, false)));
        continue;
      }
      if (a != Arch::kArm64 && c.type == BpType::kX) {
        // No x86 execute breakpoint in kernel space, for any caller (no kprobes).
        for (int flags = 0; flags < 4; ++flags) {
          expect_error(validate_breakpoint(a, bp(c.addr, c.len, c.type, flags & 1, flags & 2)),
                       ErrorCode::kInval, "addr", "kprobes");
        }
        continue;
      }
      expect_error(validate_breakpoint(a, bp(c.addr, c.len, c.type, true, false)),
                   ErrorCode::kInval, "addr", "exclude_kernel");
      // exclude_kernel wins over the privilege.
      expect_error(validate_breakpoint(a, bp(c.addr, c.len, c.type, true, true)), ErrorCode::kInval,
                   "addr", "exclude_kernel");
      expect_error(validate_breakpoint(a, bp(c.addr, c.len, c.type, false, false)),
                   ErrorCode::kPerm, "addr", "kernel");
      expect_ok(validate_breakpoint(a, bp(c.addr, c.len, c.type, false, true)));
    }
  }
}

TEST(Validate, FirstFailingRuleWins) {
  // type before len: an empty or read-only x86 type with a bad len is a type error.
  expect_error(validate_breakpoint(Arch::kX86_64, bp(0x1001, 3, BpType::kEmpty)), ErrorCode::kInval,
               "type");
  expect_error(validate_breakpoint(Arch::kX86_64, bp(0x1001, 3, BpType::kR)), ErrorCode::kInval,
               "type");
  expect_error(validate_breakpoint(Arch::kX86_64, bp(kMax, 3, BpType::kR, false, false)),
               ErrorCode::kInval, "type");
  // len before alignment and kernel space.
  expect_error(validate_breakpoint(Arch::kX86_64, bp(0x1001, 3, BpType::kW)), ErrorCode::kInval,
               "len");
  expect_error(validate_breakpoint(Arch::kI386, bp(0x1001, 6, BpType::kW)), ErrorCode::kInval,
               "len");
  expect_error(validate_breakpoint(Arch::kArm64, bp(0x1001, 8, BpType::kX)), ErrorCode::kInval,
               "len");
  expect_error(validate_breakpoint(Arch::kX86_64, bp(0x1000, 4, BpType::kX, true, false)),
               ErrorCode::kInval, "len");
  // x86 execute: the kernel-space address before the len (arch_build_bp_info's order).
  expect_error(validate_breakpoint(Arch::kX86_64, bp(kMax, 4, BpType::kX, true, false)),
               ErrorCode::kInval, "addr", "kprobes");
  // alignment before kernel space: a misaligned data range at the very top.
  expect_error(validate_breakpoint(Arch::kX86_64, bp(kMax - 2, 4, BpType::kW, false, false)),
               ErrorCode::kInval, "addr", "aligned");
  expect_error(validate_breakpoint(Arch::kArm64, bp(kMax - 1, 4, BpType::kX, false, false)),
               ErrorCode::kInval, "addr", "arm64");
  // ... but a data breakpoint in kernel space passes the len and alignment first.
  expect_error(validate_breakpoint(Arch::kX86_64, bp(kMax - 3, 4, BpType::kW, false, false)),
               ErrorCode::kPerm, "addr", "kernel");
}

// An independent model of the rules, in order; returns the failing field and code.
struct Verdict {
  std::optional<ErrorCode> code;
  std::string field;
};
Verdict model(Arch a, const pmu::EventAttr& attr) {
  const bool x86 = a != Arch::kArm64;
  const unsigned t = static_cast<unsigned>(attr.bp_type);
  if (t == 0 || t > 4 || (x86 && attr.bp_type == BpType::kR)) return {ErrorCode::kInval, "type"};
  const std::uint64_t long_size = a == Arch::kX86_64 ? 8 : 4;
  const std::uint64_t limit = a == Arch::kX86_64 ? 0x00007ffffffff000ULL
                              : a == Arch::kI386 ? 0xc0000000ULL
                                                 : 0x0001000000000000ULL;
  if (attr.bp_type == BpType::kX) {
    if (x86 && attr.bp_addr >= limit) return {ErrorCode::kInval, "addr"};  // no kprobes
    if (attr.bp_len != long_size) return {ErrorCode::kInval, "len"};
    if (!x86 && attr.bp_addr % 4 != 0) return {ErrorCode::kInval, "addr"};
  } else {
    std::vector<std::uint64_t> ok = {1, 2, 4};
    if (a != Arch::kI386) ok.push_back(8);
    if (std::find(ok.begin(), ok.end(), attr.bp_len) == ok.end()) {
      // x86: any other power of two is an AMD range breakpoint (no BPEXT here).
      const bool pow2 = attr.bp_len != 0 && (attr.bp_len & (attr.bp_len - 1)) == 0;
      if (x86 && pow2) {
        if (attr.bp_addr % attr.bp_len != 0) return {ErrorCode::kInval, "addr"};
        return {ErrorCode::kOpNotSupp, "len"};
      }
      return {ErrorCode::kInval, "len"};
    }
    if (attr.bp_addr % attr.bp_len != 0) return {ErrorCode::kInval, "addr"};
  }
  // Byte by byte over what the register covers (x86 execute: the one byte at addr): does any
  // byte lie past 2^64 or at/above the user limit?
  bool kernel = false;
  const std::uint64_t covered = (x86 && attr.bp_type == BpType::kX) ? 1 : attr.bp_len;
  for (std::uint64_t i = 0; i < covered; ++i) {
    if (i > 0 && attr.bp_addr + i == 0) return {ErrorCode::kInval, "addr"};
    if (attr.bp_addr + i >= limit) kernel = true;
  }
  if (kernel && attr.exclude_kernel) return {ErrorCode::kInval, "addr"};
  if (kernel && !attr.privileged) return {ErrorCode::kPerm, "addr"};
  return {};
}

TEST(Validate, MatrixAgainstModelAndEveryMessageNamesItsField) {
  int errors = 0, oks = 0;
  for (Arch a : kArches) {
    const std::uint64_t tsm = task_size_max(a);
    std::vector<std::uint64_t> bases = {0, 0x1000, tsm - 16, tsm - 8, tsm, kMax - 15};
    for (std::uint64_t base : bases) {
      for (std::uint64_t off = 0; off < 16; ++off) {
        for (unsigned tv = 0; tv <= 7; ++tv) {
          const BpType t = static_cast<BpType>(tv);
          for (std::uint64_t len : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 32, 24}) {
            for (int flags = 0; flags < 4; ++flags) {
              pmu::EventAttr attr = bp(base + off, len, t, flags & 1, flags & 2);
              Verdict v = model(a, attr);
              auto r = validate_breakpoint(a, attr);
              SCOPED_TRACE(std::string(to_string(a)) + " addr " + std::to_string(base + off) +
                           " len " + std::to_string(len) + " type " + std::string(to_string(t)) +
                           " flags " + std::to_string(flags));
              if (!v.code) {
                ASSERT_TRUE(r.has_value()) << r.error().to_string();
                ++oks;
              } else {
                ASSERT_FALSE(r.has_value());
                ASSERT_EQ(r.error().code(), *v.code) << r.error().to_string();
                ASSERT_TRUE(r.error().message().starts_with(v.field)) << r.error().to_string();
                ++errors;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(oks, 100);
  EXPECT_GT(errors, 1000);
}

}  // namespace
}  // namespace hwarb::breakpoints
