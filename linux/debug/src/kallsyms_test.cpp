#include "hwarb/linux/kallsyms.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

namespace hwarb::native {
namespace {

constexpr const char* kTable =
    "ffffffff81000010 T schedule\n"
    "ffffffff81000000 t __pfx_schedule\n"
    "ffffffff82000000 D jiffies_like\n"
    "ffffffff82000000 d jiffies_like\n"
    "ffffffffc0000000 t helper\t[mod_a]\n"
    "\n";

TEST(Kallsyms, ParsesSortsAndKeepsModules) {
  auto parsed = parse_kallsyms(kTable);
  ASSERT_TRUE(parsed.has_value()) << parsed.error().to_string();
  ASSERT_EQ(parsed->size(), 5u);
  EXPECT_EQ((*parsed)[0].name, "__pfx_schedule");
  EXPECT_EQ((*parsed)[1].name, "schedule");
  EXPECT_EQ((*parsed)[1].type, 'T');
  EXPECT_EQ((*parsed)[2].type, 'D');  // the file's order among equal addresses
  EXPECT_EQ((*parsed)[4].module, "mod_a");
  EXPECT_EQ((*parsed)[4].address, 0xffffffffc0000000ULL);
}

TEST(Kallsyms, BadLinesNameTheLineAndTheField) {
  const struct {
    const char* text;
    const char* says;
  } cases[] = {
      {"zz T name\n", "line 1: the address 'zz'"},
      {"ffff T name\n1234567890abcdef0 T x\n", "line 2: the address"},
      {"ffff TT name\n", "the type 'TT'"},
      {"ffff 1 name\n", "the type '1'"},
      {"ffff T\n", "no symbol name"},
      {"ffff T name mod\n", "the module 'mod'"},
      {"ffff T name [m] extra\n", "more than four fields"},
  };
  for (const auto& c : cases) {
    auto parsed = parse_kallsyms(c.text);
    ASSERT_FALSE(parsed.has_value()) << c.text;
    EXPECT_EQ(parsed.error().code(), ErrorCode::kInval);
    EXPECT_NE(parsed.error().message().find("kallsyms: "), std::string::npos);
    EXPECT_NE(parsed.error().message().find(c.says), std::string::npos) << parsed.error().message();
  }
}

TEST(Kallsyms, FindPrefersTextAndDescribeNamesTheNearest) {
  auto parsed = parse_kallsyms(kTable);
  ASSERT_TRUE(parsed.has_value());
  const KernelSymbols table = KernelSymbols::from(*parsed);
  EXPECT_FALSE(table.hidden());
  auto s = table.find("schedule");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->address, 0xffffffff81000010ULL);
  EXPECT_EQ(table.size_of(*s), 0xffffffff82000000ULL - 0xffffffff81000010ULL);
  auto missing = table.find("nosuch");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), ErrorCode::kNoEnt);
  EXPECT_EQ(table.describe(0xffffffff81000014ULL), "schedule+0x4");
  EXPECT_EQ(table.describe(0xffffffff81000010ULL), "schedule");
  EXPECT_EQ(table.describe(0xffffffffc0000008ULL), "helper+0x8 [mod_a]");
  EXPECT_EQ(table.describe(0x1000), "0x1000");
  auto helper = table.find("helper");
  ASSERT_TRUE(helper.has_value());
  EXPECT_EQ(table.size_of(*helper), 0u);
}

TEST(Kallsyms, AllZeroAddressesAreHidden) {
  auto parsed = parse_kallsyms("0000000000000000 T a\n0000000000000000 T b\n");
  ASSERT_TRUE(parsed.has_value());
  const KernelSymbols table = KernelSymbols::from(*parsed);
  EXPECT_TRUE(table.hidden());
  auto a = table.find("a");
  ASSERT_FALSE(a.has_value());
  EXPECT_EQ(a.error().code(), ErrorCode::kAcces);
  EXPECT_NE(a.error().message().find("hides"), std::string::npos);
}

// The running kernel's table: root (and kptr_restrict < 2) sees real addresses of kernel text.
TEST(Kallsyms, LoadsThisKernel) {
  auto table = KernelSymbols::load();
  ASSERT_TRUE(table.has_value()) << table.error().to_string();
  EXPECT_GT(table->size(), 1000u);
  if (table->hidden()) {
    EXPECT_NE(::geteuid(), 0u) << "root sees 0 addresses: kptr_restrict is 2";
    GTEST_SKIP() << "this user sees no kernel addresses (kptr_restrict or not root)";
  }
  auto s = table->find("schedule");
  ASSERT_TRUE(s.has_value()) << s.error().to_string();
  EXPECT_GE(s->address, 0x00007ffffffff000ULL);
  EXPECT_EQ(table->describe(s->address + 1), "schedule+0x1");
  auto missing = KernelSymbols::load("/nonexistent/kallsyms");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code(), ErrorCode::kNoEnt);
}

}  // namespace
}  // namespace hwarb::native
