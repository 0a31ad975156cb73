// Tests of gdb's agent expressions as breakpoint conditions: the bytecode gdb sends for
// conditions such as `i == 5` or `p->n < -3` (assembled here by hand), every operation's
// operand order, and the errors that make a stub report the stop for gdb to evaluate.
#include "hwarb/gdb/agent_expr.h"

#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace hwarb::gdb {
namespace {

// A thread with rdi = 0x1000 (gdb's register 5) and memory: 0x1000 holds the 32-bit -7 and
// 0x1008 the 64-bit 0x1122334455667788.
AgentAccess fake_thread(int* reads = nullptr) {
  AgentAccess a;
  a.reg = [](int regno) -> Result<std::uint64_t> {
    if (regno == 5) return 0x1000;
    if (regno == 16) return 0x401000;
    return make_error(ErrorCode::kInval, "regno: " + std::to_string(regno));
  };
  a.memory = [reads](std::uint64_t addr, int size) -> Result<std::uint64_t> {
    if (reads != nullptr) ++*reads;
    std::map<std::uint64_t, std::uint8_t> bytes;
    const std::uint32_t minus7 = static_cast<std::uint32_t>(-7);
    for (int i = 0; i < 4; ++i) bytes[0x1000 + i] = (minus7 >> (8 * i)) & 0xff;
    for (int i = 0; i < 8; ++i) bytes[0x1008 + i] = (0x1122334455667788ULL >> (8 * i)) & 0xff;
    std::uint64_t v = 0;
    for (int i = size; i-- > 0;) {
      auto b = bytes.find(addr + static_cast<std::uint64_t>(i));
      if (b == bytes.end()) return make_error(ErrorCode::kFault, "addr: not mapped");
      v = (v << 8) | b->second;
    }
    return v;
  };
  return a;
}

std::uint64_t eval(const std::vector<std::uint8_t>& code) {
  auto v = eval_agent_expr(code, fake_thread());
  EXPECT_TRUE(v) << (v ? "" : v.error().message());
  return v ? *v : 0xdeadbeef;
}

Result<std::uint64_t> try_eval(const std::vector<std::uint8_t>& code) {
  return eval_agent_expr(code, fake_thread());
}

// `*(int *)$rdi == -7`: the int read through the register and sign-extended, compared with
// the constant sign-extended from 32 bits.
TEST(AgentExpr, AnIntThroughARegisterComparedWithANegativeConstant) {
  const std::vector<std::uint8_t> code = {0x26, 0x00, 0x05,              // reg 5 (rdi)
                                          0x19,                          // ref32
                                          0x16, 0x20,                    // ext 32
                                          0x24, 0xff, 0xff, 0xff, 0xf9,  // const32 -7
                                          0x16, 0x20,                    // ext 32
                                          0x13,                          // equal
                                          0x27};                         // end
  EXPECT_EQ(eval(code), 1u);
  std::vector<std::uint8_t> other = code;
  other[10] = 0xf8;  // -8
  EXPECT_EQ(eval(other), 0u);
}

TEST(AgentExpr, OperandOrderIsALeftThenBTop) {
  // 10 - 3, 3 < 10 signed and -1 < 1 unsigned (false), 20 / 6, 20 % 6, 1 << 4, -16 >> 2.
  EXPECT_EQ(eval({0x22, 10, 0x22, 3, 0x03, 0x27}), 7u);
  EXPECT_EQ(eval({0x22, 3, 0x22, 10, 0x14, 0x27}), 1u);
  EXPECT_EQ(eval({0x22, 10, 0x22, 3, 0x14, 0x27}), 0u);
  EXPECT_EQ(eval({0x22, 0xff, 0x16, 8, 0x22, 1, 0x15, 0x27}), 0u);
  EXPECT_EQ(eval({0x22, 0xff, 0x16, 8, 0x22, 1, 0x14, 0x27}), 1u);
  EXPECT_EQ(eval({0x22, 20, 0x22, 6, 0x05, 0x27}), 3u);
  EXPECT_EQ(eval({0x22, 20, 0x22, 6, 0x07, 0x27}), 2u);
  EXPECT_EQ(eval({0x22, 1, 0x22, 4, 0x09, 0x27}), 16u);
  EXPECT_EQ(eval({0x22, 0xf0, 0x16, 8, 0x22, 2, 0x0a, 0x27}), static_cast<std::uint64_t>(-4));
  EXPECT_EQ(eval({0x22, 0xf0, 0x22, 2, 0x0b, 0x27}), 0x3cu);
  EXPECT_EQ(eval({0x22, 0xf0, 0x16, 8, 0x22, 0xfd, 0x16, 8, 0x05, 0x27}), 5u);  // -16 / -3
}

TEST(AgentExpr, BitAndLogicOperations) {
  EXPECT_EQ(eval({0x22, 0x0c, 0x22, 0x0a, 0x0f, 0x27}), 0x08u);
  EXPECT_EQ(eval({0x22, 0x0c, 0x22, 0x0a, 0x10, 0x27}), 0x0eu);
  EXPECT_EQ(eval({0x22, 0x0c, 0x22, 0x0a, 0x11, 0x27}), 0x06u);
  EXPECT_EQ(eval({0x22, 0x00, 0x12, 0x27}), ~std::uint64_t{0});
  EXPECT_EQ(eval({0x22, 0x00, 0x0e, 0x27}), 1u);
  EXPECT_EQ(eval({0x22, 0x05, 0x0e, 0x27}), 0u);
  EXPECT_EQ(eval({0x25, 0x80, 0, 0, 0, 0, 0, 0, 1, 0x2a, 8, 0x27}), 1u);  // zero_ext 8
}

TEST(AgentExpr, MemoryReadsOfEachSizeAreZeroExtended) {
  EXPECT_EQ(eval({0x23, 0x10, 0x08, 0x17, 0x27}), 0x88u);
  EXPECT_EQ(eval({0x23, 0x10, 0x08, 0x18, 0x27}), 0x7788u);
  EXPECT_EQ(eval({0x23, 0x10, 0x08, 0x19, 0x27}), 0x55667788u);
  EXPECT_EQ(eval({0x23, 0x10, 0x08, 0x1a, 0x27}), 0x1122334455667788u);
  EXPECT_EQ(eval({0x23, 0x10, 0x00, 0x19, 0x27}), 0xfffffff9u);
}

TEST(AgentExpr, StackOperations) {
  // dup, swap (a b => b a: 1 2 swap sub = 1), rot (a b c => c a b), pick 1, pop.
  EXPECT_EQ(eval({0x22, 4, 0x28, 0x02, 0x27}), 8u);
  EXPECT_EQ(eval({0x22, 1, 0x22, 2, 0x2b, 0x03, 0x27}), 1u);
  EXPECT_EQ(eval({0x22, 1, 0x22, 2, 0x22, 3, 0x33, 0x29, 0x29, 0x27}), 3u);
  EXPECT_EQ(eval({0x22, 1, 0x22, 2, 0x22, 3, 0x33, 0x29, 0x27}), 1u);
  EXPECT_EQ(eval({0x22, 7, 0x22, 9, 0x32, 1, 0x27}), 7u);
  EXPECT_EQ(eval({0x22, 7, 0x22, 9, 0x29, 0x27}), 7u);
}

TEST(AgentExpr, JumpsAreOffsetsFromTheStart) {
  // `x && y` as gdb compiles &&: if_goto over the false branch. 0: const8 1; 2: if_goto 8;
  // 5: const8 0; 7: end; 8: const8 42; 10: end.
  EXPECT_EQ(eval({0x22, 1, 0x20, 0x00, 0x08, 0x22, 0, 0x27, 0x22, 42, 0x27}), 42u);
  EXPECT_EQ(eval({0x22, 0, 0x20, 0x00, 0x08, 0x22, 0, 0x27, 0x22, 42, 0x27}), 0u);
  EXPECT_EQ(eval({0x21, 0x00, 0x05, 0x22, 1, 0x22, 2, 0x27}), 2u);
}

TEST(AgentExpr, ErrorsAreReportedNotGuessed) {
  struct Case {
    std::vector<std::uint8_t> code;
    ErrorCode code_expected;
    const char* what;
  };
  const Case cases[] = {
      {{}, ErrorCode::kInval, "without `end`"},
      {{0x22, 1}, ErrorCode::kInval, "without `end`"},
      {{0x02, 0x27}, ErrorCode::kInval, "underflows"},
      {{0x27}, ErrorCode::kInval, "empty stack"},
      {{0x24, 0x00, 0x01}, ErrorCode::kInval, "past the end"},
      {{0x22, 1, 0x22, 0, 0x05, 0x27}, ErrorCode::kInval, "division by zero"},
      {{0x22, 1, 0x22, 0, 0x08, 0x27}, ErrorCode::kInval, "division by zero"},
      {{0x21, 0x00, 0x40}, ErrorCode::kInval, "leaves the code"},
      {{0x21, 0x00, 0x00}, ErrorCode::kInval, "million"},
      {{0xee}, ErrorCode::kInval, "unknown opcode"},
      {{0x01, 0x27}, ErrorCode::kNoSys, "floating point"},
      {{0x2c, 0x00, 0x01, 0x27}, ErrorCode::kNoSys, "trace"},
      {{0x26, 0x00, 0x07, 0x27}, ErrorCode::kInval, "regno"},
      {{0x22, 0x40, 0x19, 0x27}, ErrorCode::kFault, "not mapped"},
  };
  for (const Case& c : cases) {
    auto v = try_eval(c.code);
    ASSERT_FALSE(v) << c.what;
    EXPECT_EQ(v.error().code(), c.code_expected) << c.what << ": " << v.error().message();
    EXPECT_NE(v.error().message().find(c.what), std::string::npos) << v.error().message();
  }
  // A stack that grows without end.
  std::vector<std::uint8_t> deep = {0x22, 1};
  for (int i = 0; i < 1100; ++i) deep.push_back(0x28);
  deep.push_back(0x27);
  auto v = try_eval(deep);
  ASSERT_FALSE(v);
  EXPECT_NE(v.error().message().find("overflows"), std::string::npos);
}

TEST(AgentExpr, TheConditionsAndCommandsOfAZPacket) {
  auto none = parse_point_agent("");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->conditions.empty());
  EXPECT_TRUE(none->commands.empty());
  auto two = parse_point_agent(";X3,220127;X2,2227");
  ASSERT_TRUE(two) << two.error().message();
  ASSERT_EQ(two->conditions.size(), 2u);
  EXPECT_EQ(two->conditions[0], (std::vector<std::uint8_t>{0x22, 0x01, 0x27}));
  EXPECT_EQ(eval(two->conditions[0]), 1u);
  // gdb's own form: one ';', then the conditions back to back (two breakpoints at one address,
  // each with its condition).
  auto joined = parse_point_agent(";X3,220027X3,220127");
  ASSERT_TRUE(joined) << joined.error().message();
  ASSERT_EQ(joined->conditions.size(), 2u);
  EXPECT_EQ(eval(joined->conditions[0]), 0u);
  EXPECT_EQ(eval(joined->conditions[1]), 1u);
  // Commands after the conditions, back to back too; the persist flag first.
  auto with_cmds = parse_point_agent(";X3,220027;cmds:1,X3,220027X1,27");
  ASSERT_TRUE(with_cmds) << with_cmds.error().message();
  EXPECT_EQ(with_cmds->conditions.size(), 1u);
  ASSERT_EQ(with_cmds->commands.size(), 2u);
  EXPECT_EQ(with_cmds->commands[1], (std::vector<std::uint8_t>{0x27}));
  EXPECT_TRUE(with_cmds->persist);
  auto only_cmds = parse_point_agent(";cmds:0,X1,27");
  ASSERT_TRUE(only_cmds);
  EXPECT_TRUE(only_cmds->conditions.empty());
  EXPECT_FALSE(only_cmds->persist);
  for (const char* bad :
       {"X3,220027", ";Y3,220027", ";X3220027", ";X4,220027", ";Xzz,22", ";X2,2g27"}) {
    auto r = parse_point_agent(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code(), ErrorCode::kInval);
    EXPECT_NE(r.error().message().find("condition"), std::string::npos) << r.error().message();
  }
  for (const char* bad : {";cmds:", ";cmds:1,", ";cmds:1,Y1,27", ";cmds:1,X2,27"}) {
    auto r = parse_point_agent(bad);
    if (std::string_view(bad) == ";cmds:1,") {
      ASSERT_TRUE(r) << "no commands after the flag is an empty list";
      continue;
    }
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message().find("cmds"), std::string::npos) << r.error().message();
  }
}

// The printf of gdb's agent-style dprintf as gdb compiles `dprintf foo,"arg=%d s=%s\n", arg,
// "hi"`: the arguments pushed last first, then the function and the channel (0, 0), then printf
// 2 and the format with its NUL. The escapes are gdb's to undo.
TEST(AgentExpr, PrintfFormatsItsArgumentsAndPrintsThem) {
  AgentAccess a = fake_thread();
  std::string printed;
  a.print = [&](std::string_view text) { printed += text; };
  a.string = [](std::uint64_t addr) -> Result<std::string> {
    if (addr == 0x2000) return std::string("hi");
    return make_error(ErrorCode::kFault, "addr: not mapped");
  };
  const std::string format = "arg=%d s=%s\\n";
  std::vector<std::uint8_t> code = {0x23, 0x20, 0x00,  // const16 0x2000: the string
                                    0x26, 0x00, 0x05, 0x19,
                                    0x16, 0x20,              // *(int *)$rdi
                                    0x22, 0x00, 0x22, 0x00,  // function, channel
                                    0x34, 0x02, 0x00, static_cast<std::uint8_t>(format.size() + 1)};
  code.insert(code.end(), format.begin(), format.end());
  code.push_back(0);
  code.push_back(0x27);
  auto r = run_agent_commands(code, a);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(printed, "arg=-7 s=hi\n");

  // Without a place to print: ENOSYS, as a stub without printf.
  a.print = nullptr;
  auto none = run_agent_commands(code, a);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code(), ErrorCode::kNoSys);

  // A format that does not end in NUL in the code, or more arguments than the stack holds.
  a.print = [&](std::string_view text) { printed += text; };
  std::vector<std::uint8_t> cut = {0x22, 0, 0x22, 0, 0x34, 0x00, 0x00, 0x02, 'a', 'b', 0x27};
  EXPECT_FALSE(run_agent_commands(cut, a));
  std::vector<std::uint8_t> few = {0x22, 0, 0x22, 0, 0x34, 0x01, 0x00, 0x01, 0, 0x27};
  EXPECT_FALSE(run_agent_commands(few, a));
}

TEST(AgentExpr, PrintfTextOfEachConversion) {
  AgentAccess a;
  a.string = [](std::uint64_t) -> Result<std::string> { return std::string("str"); };
  const auto text = [&](std::string_view format, std::vector<std::uint64_t> args) {
    auto r = printf_agent_text(format, args, a);
    return r ? *r : "error: " + r.error().message();
  };
  double half = 2.5;
  std::uint64_t half_bits = 0;
  std::memcpy(&half_bits, &half, sizeof half);
  EXPECT_EQ(text("%d|%i|%u", {0xffffffffu, 5, 0xffffffffu}), "-1|5|4294967295");
  EXPECT_EQ(text("%ld %lu", {~std::uint64_t{0}, ~std::uint64_t{0}}), "-1 18446744073709551615");
  EXPECT_EQ(text("%hhd %hu %zu", {0xff, 0x1ffff, 7}), "-1 65535 7");
  EXPECT_EQ(text("%#x %08X %o %-4d|", {255, 0xbeef, 8, 3}), "0xff 0000BEEF 10 3   |");
  EXPECT_EQ(text("%c%c %5s %.2s", {'o', 'k', 0x10, 0x10}), "ok   str st");
  EXPECT_EQ(text("%s", {0}), "(null)");
  EXPECT_EQ(text("%.2f %g %%", {half_bits, half_bits}), "2.50 2.5 %");
  EXPECT_EQ(text("%p", {0x1234}), "0x1234");
  EXPECT_EQ(text("tab\\there\\\"\\\\", {}), "tab\there\"\\");
  for (const auto& [format, what] :
       std::vector<std::pair<std::string, std::string>>{{"%n", "conversion"},
                                                        {"%ls", "wide"},
                                                        {"%Lf", "length"},
                                                        {"%d %d", "fewer arguments"},
                                                        {"\\q", "escape"},
                                                        {"%", "without its letter"},
                                                        {"%99999d", "over 9999"},
                                                        {"%.10000f", "over 9999"}}) {
    auto r = printf_agent_text(format, std::vector<std::uint64_t>{1}, a);
    ASSERT_FALSE(r) << format;
    EXPECT_EQ(r.error().code(), ErrorCode::kInval);
    EXPECT_NE(r.error().message().find("format"), std::string::npos) << r.error().message();
    EXPECT_NE(r.error().message().find(what), std::string::npos) << r.error().message();
  }
}

}  // namespace
}  // namespace hwarb::gdb
