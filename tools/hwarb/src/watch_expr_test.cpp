#include "hwarb/cli/watch_expr.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace hwarb::cli {
namespace {

TEST(AccessName, NamesEveryAccess) {
  EXPECT_STREQ(access_name(WatchAccess::kRead), "r");
  EXPECT_STREQ(access_name(WatchAccess::kWrite), "w");
  EXPECT_STREQ(access_name(WatchAccess::kReadWrite), "rw");
  EXPECT_STREQ(access_name(WatchAccess::kExec), "x");
}

struct Good {
  std::string_view text;
  std::optional<std::uint64_t> address;
  std::string_view symbol;
  std::int64_t offset;
  std::optional<std::uint64_t> length;
  WatchAccess access;
  bool access_given;
};

TEST(ParseWatchExpr, AcceptsPerfSyntax) {
  constexpr auto kRW = WatchAccess::kReadWrite;
  const Good cases[] = {
      {"mem:0x1000", 0x1000, "", 0, std::nullopt, kRW, false},
      {"mem:4096", 4096, "", 0, std::nullopt, kRW, false},
      {"mem:0", 0, "", 0, std::nullopt, kRW, false},
      {"mem:0XdeadBEEF/8", 0xdeadbeef, "", 0, 8, kRW, false},
      {"mem:0x7ffc1000/2:w", 0x7ffc1000, "", 0, 2, WatchAccess::kWrite, true},
      {"mem:0x1000:r", 0x1000, "", 0, std::nullopt, WatchAccess::kRead, true},
      {"mem:0x1000:wr", 0x1000, "", 0, std::nullopt, kRW, true},
      {"mem:0x1000:rw", 0x1000, "", 0, std::nullopt, kRW, true},
      {"mem:0x401000:x", 0x401000, "", 0, std::nullopt, WatchAccess::kExec, true},
      {"mem:0xfffffffffffffffc", 0xfffffffffffffffc, "", 0, std::nullopt, kRW, false},
      {"mem:18446744073708503040/1048576", 0xfffffffffff00000, "", 0, 1048576, kRW, false},
      {"mem:0xffffffffffffffff/1", 0xffffffffffffffff, "", 0, 1, kRW, false},
      {"mem:0xffffffffffffffff:x", 0xffffffffffffffff, "", 0, std::nullopt, WatchAccess::kExec,
       true},
      {"counter", std::nullopt, "counter", 0, std::nullopt, kRW, false},
      {"counter:w", std::nullopt, "counter", 0, std::nullopt, WatchAccess::kWrite, true},
      {"record+8/8:rw", std::nullopt, "record", 8, 8, kRW, true},
      {"record+0x10", std::nullopt, "record", 16, std::nullopt, kRW, false},
      {"table-4/4", std::nullopt, "table", -4, 4, kRW, false},
      {"_start:x", std::nullopt, "_start", 0, std::nullopt, WatchAccess::kExec, true},
      {".L$tmp.1@plt", std::nullopt, ".L$tmp.1@plt", 0, std::nullopt, kRW, false},
      {"malloc@@GLIBC_2.2.5:x", std::nullopt, "malloc@@GLIBC_2.2.5", 0, std::nullopt,
       WatchAccess::kExec, true},
      {"mem", std::nullopt, "mem", 0, std::nullopt, kRW, false},
      {"s+9223372036854775807", std::nullopt, "s", INT64_MAX, std::nullopt, kRW, false},
      {"s-9223372036854775808", std::nullopt, "s", INT64_MIN, std::nullopt, kRW, false},
      {"s-0x8000000000000000", std::nullopt, "s", INT64_MIN, std::nullopt, kRW, false},
      // Names as C++ source spells them: "::" is scope, the access is the last ':' and letters.
      {"ns::Class::member:w", std::nullopt, "ns::Class::member", 0, std::nullopt,
       WatchAccess::kWrite, true},
      {"::g", std::nullopt, "::g", 0, std::nullopt, kRW, false},
      {"ns::w", std::nullopt, "ns::w", 0, std::nullopt, kRW, false},
      {"(anonymous namespace)::hidden:rw", std::nullopt, "(anonymous namespace)::hidden", 0,
       std::nullopt, kRW, true},
      {"ns::Pair<int, char>::x+4/2:r", std::nullopt, "ns::Pair<int, char>::x", 4, 2,
       WatchAccess::kRead, true},
      {"ns::Counter::bump():x", std::nullopt, "ns::Counter::bump()", 0, std::nullopt,
       WatchAccess::kExec, true},
      {"g_cfg.limits[2].max:w", std::nullopt, "g_cfg.limits[2].max", 0, std::nullopt,
       WatchAccess::kWrite, true},
      {"m[1][2]-4", std::nullopt, "m[1][2]", -4, std::nullopt, kRW, false},
      {"p->f->g:w", std::nullopt, "p->f->g", 0, std::nullopt, WatchAccess::kWrite, true},
      {"(*p).f/8", std::nullopt, "(*p).f", 0, 8, kRW, false},
      {"a[i-1]:w", std::nullopt, "a[i-1]", 0, std::nullopt, WatchAccess::kWrite, true},
  };
  for (const Good& c : cases) {
    auto e = parse_watch_expr(c.text);
    ASSERT_TRUE(e) << c.text << ": " << e.error().to_string();
    EXPECT_EQ(e->text, c.text);
    EXPECT_EQ(e->address, c.address) << c.text;
    EXPECT_EQ(e->symbol, c.symbol) << c.text;
    EXPECT_EQ(e->offset, c.offset) << c.text;
    EXPECT_EQ(e->length, c.length) << c.text;
    EXPECT_EQ(e->access, c.access) << c.text;
    EXPECT_EQ(e->access_given, c.access_given) << c.text;
  }
}

struct Bad {
  std::string_view text;
  int column;
  std::string_view reason;
};

TEST(ParseWatchExpr, RejectsWithColumnAndReason) {
  const Bad cases[] = {
      {"", 1, "empty expression"},
      {"mem:", 5, "expected address (hexadecimal with 0x, or decimal)"},
      {"mem:/4", 5, "expected address (hexadecimal with 0x, or decimal)"},
      {"mem:zz", 5, "expected address (hexadecimal with 0x, or decimal)"},
      {"mem:0x", 7, "bad address: no digits after 0x"},
      {"mem:0x12g4", 9, "bad address: 'g' is not a hexadecimal digit"},
      {"mem:12ab", 7, "bad address: 'a' is not a decimal digit"},
      {"mem:0x10000000000000000", 5, "bad address: 0x10000000000000000 does not fit in 64 bits"},
      {"mem:18446744073709551616", 5, "bad address: 18446744073709551616 does not fit in 64 bits"},
      {"mem:0x1000/0", 12, "length must be at least 1"},
      {"mem:0x1000/0x0", 12, "length must be at least 1"},
      {"mem:0x1000/1048577", 12, "length 1048577 is over the limit of 1048576 bytes"},
      {"mem:0x1000/", 12, "expected length (hexadecimal with 0x, or decimal)"},
      {"mem:0x1000/4x", 13, "bad length: 'x' is not a decimal digit"},
      {"mem:0x1000:", 12, "expected access letters (r, w, x)"},
      {"mem:0x1000:q", 12, "unknown access letter 'q' (use r, w, x)"},
      {"mem:0x1000:rW", 13, "unknown access letter 'W' (use r, w, x)"},
      {"mem:0x1000:rr", 13, "access letter 'r' given twice"},
      {"mem:0x1000:rx", 13, "x cannot be combined with r or w"},
      {"mem:0x1000:xw", 13, "x cannot be combined with r or w"},
      {"mem:0x1000/4/4", 13, "unexpected '/' (expected ':')"},
      {"mem:0x1000+4", 11, "unexpected '+' (expected '/' or ':')"},
      {"0x1000", 1, "expected a symbol name or mem:ADDR, found '0'"},
      {" counter", 1, "expected a symbol name or mem:ADDR, found ' '"},
      {"count er", 6, "unexpected ' ' (expected '+', '-', '/' or ':')"},
      {"counter#", 8, "unexpected '#' (expected '+', '-', '/' or ':')"},
      {"counter+", 9, "expected offset (hexadecimal with 0x, or decimal)"},
      {"counter+4+4", 10, "unexpected '+' (expected '/' or ':')"},
      {"counter--4", 9, "expected offset (hexadecimal with 0x, or decimal)"},
      {"s+9223372036854775808", 3,
       "offset 9223372036854775808 does not fit in a signed 64-bit "
       "offset"},
      {"s-9223372036854775809", 3,
       "offset 9223372036854775809 does not fit in a signed 64-bit "
       "offset"},
      {"counter:rw:", 11, "unknown access letter ':' (use r, w, x)"},
      {"a[2:w", 6, "expected ']'"},
      {"ns::x:w:", 8, "unknown access letter ':' (use r, w, x)"},
      {"a]2:w", 2, "unbalanced ']'"},
      {"(*p].f", 4, "unbalanced ']' (expected ')')"},
      {"ns::Box<int::count:w", 21, "expected '>'"},
      {"*p:w", 1, "expected a symbol name or mem:ADDR, found '*'"},
      // The last byte of a range is at most 2^64-1 (the default length counts).
      {"mem:0xffffffffffffffff/8", 5,
       "range 0xffffffffffffffff/8 wraps past the end of the address space"},
      {"mem:0xffffffffffffffff", 5,
       "range 0xffffffffffffffff/4 wraps past the end of the address space"},
      {"mem:0xfffffffffffffffd:w", 5,
       "range 0xfffffffffffffffd/4 wraps past the end of the address space"},
      {"mem:18446744073709551615/1048576", 5,
       "range 0xffffffffffffffff/1048576 wraps past the end of the address space"},
  };
  for (const Bad& c : cases) {
    auto e = parse_watch_expr(c.text);
    ASSERT_FALSE(e) << c.text;
    EXPECT_EQ(e.error().code(), ErrorCode::kInval) << c.text;
    EXPECT_EQ(e.error().message(), "expression '" + std::string(c.text) + "': at column " +
                                       std::to_string(c.column) + ": " + std::string(c.reason));
  }
}

TEST(DefaultLength, FollowsPerf) {
  const auto parsed = [](std::string_view text) {
    auto e = parse_watch_expr(text);
    EXPECT_TRUE(e) << text;
    return e.value_or(WatchExpr{});
  };
  // An explicit length wins over everything.
  EXPECT_EQ(default_length(parsed("mem:0x1000/2"), std::nullopt), 2u);
  EXPECT_EQ(default_length(parsed("record/2"), 24), 2u);
  EXPECT_EQ(default_length(parsed("bump/1:x"), 40), 1u);
  // perf: 4 for data, sizeof(long) for execution.
  EXPECT_EQ(default_length(parsed("mem:0x1000"), std::nullopt), 4u);
  EXPECT_EQ(default_length(parsed("mem:0x1000:w"), 24), 4u);
  EXPECT_EQ(default_length(parsed("mem:0x1000:x"), std::nullopt), sizeof(long));
  EXPECT_EQ(default_length(parsed("bump:x"), 40), sizeof(long));
  // A symbol at offset 0: its size when known.
  EXPECT_EQ(default_length(parsed("record"), 24), 24u);
  EXPECT_EQ(default_length(parsed("counter:r"), 4), 4u);
  EXPECT_EQ(default_length(parsed("flag"), 1), 1u);
  EXPECT_EQ(default_length(parsed("record"), std::nullopt), 4u);
  EXPECT_EQ(default_length(parsed("record"), 0), 4u);
  EXPECT_EQ(default_length(parsed("huge"), kMaxWatchLength * 4), kMaxWatchLength);
  // At an offset the symbol's size says nothing of the target.
  EXPECT_EQ(default_length(parsed("record+8"), 24), 4u);
  EXPECT_EQ(default_length(parsed("record-8"), 24), 4u);
}

}  // namespace
}  // namespace hwarb::cli
