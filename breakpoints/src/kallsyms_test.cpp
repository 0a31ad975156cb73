#include "hwarb/breakpoints/kallsyms.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "hwarb/breakpoints/validate.h"

namespace hwarb::breakpoints {
namespace {

constexpr std::uint64_t kStart = task_size_max(Arch::kX86_64);

KernelSymbol sym(std::string name, std::uint64_t addr, std::uint64_t size = 0) {
  KernelSymbol s;
  s.name = std::move(name);
  s.addr = addr;
  s.size = size;
  return s;
}

TEST(KernelSymbols, RefusesUserSpaceAddressesNamingTheField) {
  KernelSymbols t(kStart);
  auto r = t.add(sym("jiffies", 0x1000));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_EQ(r.error().message().rfind("addr: 0x1000 of jiffies is a user-space address", 0), 0u)
      << r.error().message();
  EXPECT_FALSE(t.add(sym("last_user", kStart - 1)));
  EXPECT_TRUE(t.add(sym("first_kernel", kStart)));
  EXPECT_EQ(t.size(), 1u);
}

TEST(KernelSymbols, RefusesBadNamesAndWrappingSizes) {
  KernelSymbols t(kStart);
  for (const char* bad : {"", "a+b", "a=b", "a b", "a\tb"}) {
    auto r = t.add(sym(bad, 0xffffffff81000000));
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().message().rfind("name: ", 0), 0u) << r.error().message();
  }
  auto r = t.add(sym("wraps", 0xfffffffffffffff0, 0x20));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message().rfind("size: ", 0), 0u) << r.error().message();
  EXPECT_EQ(t.size(), 0u);
}

TEST(KernelSymbols, LookupGivesTheFirstOfDuplicateNames) {
  KernelSymbols t(kStart);
  ASSERT_TRUE(t.add(sym("show_stat", 0xffffffff81100000)));
  ASSERT_TRUE(t.add(sym("show_stat", 0xffffffff81200000)));
  ASSERT_TRUE(t.add(sym("show_stat", 0xffffffff81100000)));  // the same again: a no-op
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.lookup("show_stat")->addr, 0xffffffff81100000u);
  auto none = t.lookup("nope");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code(), ErrorCode::kNoEnt);
  EXPECT_EQ(none.error().message(), "symbol: no kernel symbol 'nope'");
}

TEST(KernelSymbols, ResolveTakesAnOffsetInDecimalOrHex) {
  KernelSymbols t(kStart);
  ASSERT_TRUE(t.add(sym("jiffies", 0xffffffff82000000, 8)));
  EXPECT_EQ(*t.resolve("jiffies"), 0xffffffff82000000u);
  EXPECT_EQ(*t.resolve("jiffies+4"), 0xffffffff82000004u);
  EXPECT_EQ(*t.resolve("jiffies+0x10"), 0xffffffff82000010u);
  EXPECT_EQ(t.resolve("nope+4").error().code(), ErrorCode::kNoEnt);
  for (const char* bad : {"jiffies+", "jiffies+x", "+4", "jiffies+0x", "jiffies+4+4"}) {
    auto r = t.resolve(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), ErrorCode::kInval) << bad;
    EXPECT_EQ(r.error().message().rfind("symbol: ", 0), 0u) << r.error().message();
  }
  ASSERT_TRUE(t.add(sym("top", 0xfffffffffffffff0)));
  EXPECT_EQ(t.resolve("top+0x10").error().code(), ErrorCode::kInval);  // wraps
}

TEST(KernelSymbols, SymbolizeUsesSizesOrRunsToTheNextSymbol) {
  KernelSymbols t(kStart);
  ASSERT_TRUE(t.add(sym("a", 0xffffffff81000000)));  // no size: up to b
  ASSERT_TRUE(t.add(sym("b", 0xffffffff81000100, 0x10)));
  ASSERT_TRUE(t.add(sym("b_alias", 0xffffffff81000100)));
  EXPECT_EQ(t.symbolize(0xffffffff80ffffff), std::nullopt);
  EXPECT_EQ(t.symbolize(0xffffffff81000000), "a+0x0");
  EXPECT_EQ(t.symbolize(0xffffffff810000ff), "a+0xff");
  EXPECT_EQ(t.symbolize(0xffffffff81000104), "b+0x4");       // the first added at that address
  EXPECT_EQ(t.symbolize(0xffffffff81000110), std::nullopt);  // past b's size
}

TEST(Kallsyms, ParsesProcKallsymsLines) {
  auto s = parse_kallsyms(
      "ffffffff81000000 T _text\n"
      "\n"
      "ffffffff82a0b000 D jiffies\r\n"
      "ffffffffc0a01000 t ext4_init\t[ext4]\n");
  ASSERT_TRUE(s) << s.error().message();
  ASSERT_EQ(s->size(), 3u);
  EXPECT_EQ((*s)[0], (KernelSymbol{"_text", 0xffffffff81000000, 0, 'T', ""}));
  EXPECT_EQ((*s)[1], (KernelSymbol{"jiffies", 0xffffffff82a0b000, 0, 'D', ""}));
  EXPECT_EQ((*s)[2], (KernelSymbol{"ext4_init", 0xffffffffc0a01000, 0, 't', "ext4"}));
}

TEST(Kallsyms, BadLinesNameTheLineAndTheField) {
  struct Case {
    const char* text;
    const char* message;
  };
  const Case cases[] = {
      {"ffffffff81000000 T\n", "line 1: expected 'ADDR TYPE NAME [[module]]', got 2 words"},
      {"\nzz T x\n", "line 2: addr: bad 'zz' (expected hex without 0x)"},
      {"ffffffff81000000 TT x\n", "line 1: type: bad 'TT' (expected one letter)"},
      {"ffffffff81000000 T x ext4\n", "line 1: module: bad 'ext4' (expected [name])"},
      {"0000000000000000 T _text\n",
       "line 1: addr: 0 for _text (kptr_restrict hides the addresses: read /proc/kallsyms with "
       "CAP_SYSLOG, e.g. as root)"},
  };
  for (const Case& c : cases) {
    auto s = parse_kallsyms(c.text);
    ASSERT_FALSE(s) << c.text;
    EXPECT_EQ(s.error().code(), ErrorCode::kInval);
    EXPECT_EQ(s.error().message(), c.message);
  }
}

class KallsymsFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hwarb_kallsyms_XXXXXX";
    const int fd = ::mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    ::close(fd);
    path_ = tmpl;
  }
  void TearDown() override { std::remove(path_.c_str()); }
  void write(const std::string& text) { std::ofstream(path_, std::ios::binary) << text; }
  std::string path_;
};

TEST_F(KallsymsFile, LoadsEverySymbolOrNone) {
  KernelSymbols t(kStart);
  write("ffffffff81000000 T _text\nffffffff82a0b000 D jiffies\n");
  auto n = t.load_kallsyms_file(path_);
  ASSERT_TRUE(n) << n.error().message();
  EXPECT_EQ(*n, 2u);
  EXPECT_EQ(t.lookup("jiffies")->type, 'D');
  // A user-space address on line 3: nothing of the file is added.
  write("ffffffff83000000 D a\n\n0000000000401000 T main\n");
  auto bad = t.load_kallsyms_file(path_);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code(), ErrorCode::kInval);
  EXPECT_EQ(bad.error().message().rfind(path_ + ": line 3: addr: 0x401000 of main is a user", 0),
            0u)
      << bad.error().message();
  EXPECT_EQ(t.size(), 2u);
  EXPECT_FALSE(t.lookup("a"));
}

TEST_F(KallsymsFile, AMissingFileIsTheOpenError) {
  KernelSymbols t(kStart);
  auto r = t.load_kallsyms_file(path_ + ".missing");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoEnt);
  EXPECT_EQ(r.error().message().rfind("cannot read " + path_ + ".missing", 0), 0u);
}

}  // namespace
}  // namespace hwarb::breakpoints
