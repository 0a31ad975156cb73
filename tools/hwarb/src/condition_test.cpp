#include "hwarb/cli/condition.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hwarb::cli {
namespace {

TEST(OpName, SpellsEveryOperator) {
  EXPECT_STREQ(op_name(CondOp::kEq), "==");
  EXPECT_STREQ(op_name(CondOp::kNe), "!=");
  EXPECT_STREQ(op_name(CondOp::kLt), "<");
  EXPECT_STREQ(op_name(CondOp::kGt), ">");
  EXPECT_STREQ(op_name(CondOp::kLe), "<=");
  EXPECT_STREQ(op_name(CondOp::kGe), ">=");
}

struct Term {
  CondOperand operand;
  CondOp op;
  std::uint64_t constant;
  bool negative;
};

struct Good {
  std::string_view text;
  std::vector<Term> terms;
};

TEST(ParseCondition, AcceptsComparisonsJoinedByAnd) {
  constexpr auto kOld = CondOperand::kOld;
  constexpr auto kNew = CondOperand::kNew;
  const Good cases[] = {
      {"new==5", {{kNew, CondOp::kEq, 5, false}}},
      {"value>=3", {{kNew, CondOp::kGe, 3, false}}},
      {"old!=0 && new>10", {{kOld, CondOp::kNe, 0, false}, {kNew, CondOp::kGt, 10, false}}},
      {"new<0x10", {{kNew, CondOp::kLt, 16, false}}},
      {"new<=0XfF", {{kNew, CondOp::kLe, 255, false}}},
      {"new == -1", {{kNew, CondOp::kEq, ~std::uint64_t{0}, true}}},
      {"new>-0x10", {{kNew, CondOp::kGt, static_cast<std::uint64_t>(-16), true}}},
      {"new==-0", {{kNew, CondOp::kEq, 0, false}}},
      {"  old<1&&old>=0x0&&new!=18446744073709551615  ",
       {{kOld, CondOp::kLt, 1, false},
        {kOld, CondOp::kGe, 0, false},
        {kNew, CondOp::kNe, ~std::uint64_t{0}, false}}},
      {"new>=-9223372036854775808", {{kNew, CondOp::kGe, std::uint64_t{1} << 63, true}}},
  };
  for (const Good& c : cases) {
    auto cond = parse_condition(c.text);
    ASSERT_TRUE(cond) << c.text << ": " << cond.error().to_string();
    EXPECT_EQ(cond->text, c.text);
    ASSERT_EQ(cond->terms.size(), c.terms.size()) << c.text;
    for (std::size_t i = 0; i < c.terms.size(); ++i) {
      EXPECT_EQ(cond->terms[i].operand, c.terms[i].operand) << c.text << " term " << i;
      EXPECT_EQ(cond->terms[i].op, c.terms[i].op) << c.text << " term " << i;
      EXPECT_EQ(cond->terms[i].constant, c.terms[i].constant) << c.text << " term " << i;
      EXPECT_EQ(cond->terms[i].negative, c.terms[i].negative) << c.text << " term " << i;
    }
  }
}

struct Bad {
  std::string_view text;
  int column;
  std::string_view reason;
};

TEST(ParseCondition, RejectsWithColumnAndReason) {
  const Bad cases[] = {
      {"", 1, "empty condition"},
      {"   ", 4, "empty condition"},
      {"x==1", 1, "unknown operand 'x' (use old, new or value)"},
      {"newer==1", 1, "unknown operand 'newer' (use old, new or value)"},
      {"5==new", 1, "unknown operand '5' (use old, new or value)"},
      {"==5", 1, "expected 'old', 'new' or 'value', found '='"},
      {"new", 4, "expected a comparison (==, !=, <, >, <=, >=)"},
      {"new=5", 4, "'=' is not a comparison (use '==')"},
      {"new!5", 4, "expected a comparison (==, !=, <, >, <=, >=), found '!'"},
      {"new 5", 5, "expected a comparison (==, !=, <, >, <=, >=), found '5'"},
      {"new==", 6, "expected a number"},
      {"new== old", 7, "expected a number, found 'o'"},
      {"new==-", 7, "expected a number"},
      {"new==0x", 8, "no digits after 0x"},
      {"new==0x1g", 9, "'g' is not a hexadecimal digit"},
      {"new==12a", 8, "'a' is not a decimal digit"},
      {"new==18446744073709551616", 6, "18446744073709551616 does not fit in 64 bits"},
      {"new==-9223372036854775809", 6, "-9223372036854775809 is below -2^63"},
      {"new==1 || old==2", 8, "'||' is not supported: a condition is comparisons joined by '&&'"},
      {"new==1 & old==2", 8, "unexpected '&' (expected '&&')"},
      {"new==1 old==2", 8, "unexpected 'o' (expected '&&')"},
      {"new==1 &&", 10, "expected 'old', 'new' or 'value'"},
      {"new==1 && && old==2", 11, "expected 'old', 'new' or 'value', found '&'"},
      {"(new==1)", 1, "expected 'old', 'new' or 'value', found '('"},
  };
  for (const Bad& c : cases) {
    auto cond = parse_condition(c.text);
    ASSERT_FALSE(cond) << c.text;
    EXPECT_EQ(cond.error().code(), ErrorCode::kInval) << c.text;
    EXPECT_EQ(cond.error().message(), "condition '" + std::string(c.text) + "': at column " +
                                          std::to_string(c.column) + ": " + std::string(c.reason));
  }
}

bool eval(std::string_view text, std::uint64_t old_value, std::uint64_t new_value, unsigned width) {
  auto cond = parse_condition(text);
  EXPECT_TRUE(cond) << text;
  return cond && cond->eval(old_value, new_value, width);
}

TEST(ConditionEval, EveryOperatorAgainstSmallerEqualAndGreater) {
  struct Row {
    std::string_view op;
    bool less, equal, greater;  // the truth for new = 4, 5, 6 against 5
  };
  const Row rows[] = {{"==", false, true, false}, {"!=", true, false, true},
                      {"<", true, false, false},  {">", false, false, true},
                      {"<=", true, true, false},  {">=", false, true, true}};
  for (const Row& r : rows) {
    const std::string text = "new" + std::string(r.op) + "5";
    EXPECT_EQ(eval(text, 0, 4, 4), r.less) << text;
    EXPECT_EQ(eval(text, 0, 5, 4), r.equal) << text;
    EXPECT_EQ(eval(text, 0, 6, 4), r.greater) << text;
    // The same against a negative constant, signed.
    const std::string neg = "new" + std::string(r.op) + "-5";
    EXPECT_EQ(eval(neg, 0, static_cast<std::uint64_t>(-6), 8), r.less) << neg;
    EXPECT_EQ(eval(neg, 0, static_cast<std::uint64_t>(-5), 8), r.equal) << neg;
    EXPECT_EQ(eval(neg, 0, static_cast<std::uint64_t>(-4), 8), r.greater) << neg;
  }
}

TEST(ConditionEval, OldAndValueReadTheRightOperand) {
  EXPECT_TRUE(eval("old==1", 1, 2, 4));
  EXPECT_FALSE(eval("old==2", 1, 2, 4));
  EXPECT_TRUE(eval("value==2", 1, 2, 4));
  EXPECT_TRUE(eval("new==2", 1, 2, 4));
}

TEST(ConditionEval, ConjunctionNeedsEveryTerm) {
  const std::string_view text = "old!=0 && new>10";
  EXPECT_TRUE(eval(text, 1, 11, 4));
  EXPECT_FALSE(eval(text, 0, 11, 4));
  EXPECT_FALSE(eval(text, 1, 10, 4));
  EXPECT_FALSE(eval(text, 0, 10, 4));
  EXPECT_TRUE(Condition{}.eval(0, 0, 4));
}

TEST(ConditionEval, WidthMasksAndSignExtends) {
  // Bits above the width are ignored.
  EXPECT_TRUE(eval("new==0x34", 0, 0x1234, 1));
  EXPECT_TRUE(eval("new==0x1234", 0, 0xffff'1234, 2));
  EXPECT_FALSE(eval("new==0x1234", 0, 0xffff'1234, 4));
  // A negative constant: signed, sign-extended from the width.
  EXPECT_TRUE(eval("new==-1", 0, 0xff, 1));
  EXPECT_TRUE(eval("new<=-1", 0, 0xff, 1));
  // 0 is not negative: compared unsigned, nothing is below it.
  EXPECT_FALSE(eval("new<0", 0, 0xff, 1));
  EXPECT_TRUE(eval("new<-100", 0, 0x80, 1));   // -128
  EXPECT_FALSE(eval("new<-100", 0, 0x7f, 1));  // 127
  EXPECT_TRUE(eval("new==-1", 0, 0xffff'ffff, 4));
  EXPECT_FALSE(eval("new==-1", 0, 0xffff'ffff, 8));
  EXPECT_TRUE(eval("new==-1", 0, ~std::uint64_t{0}, 8));
  EXPECT_TRUE(eval("new>=-9223372036854775808", 0, std::uint64_t{1} << 63, 8));
  // A constant >= 0: unsigned, so an all-ones value is large.
  EXPECT_TRUE(eval("new>0", 0, 0xff, 1));
  EXPECT_TRUE(eval("new==255", 0, 0xff, 1));
  EXPECT_TRUE(eval("new==18446744073709551615", 0, ~std::uint64_t{0}, 8));
  // Widths outside 1..8 count as 8.
  EXPECT_FALSE(eval("new==0x34", 0, 0x1234, 0));
  EXPECT_FALSE(eval("new==0x34", 0, 0x1234, 16));
  EXPECT_TRUE(eval("new==-1", 0, ~std::uint64_t{0}, 0));
}

TEST(ConditionUsesOld, OnlyWhenATermReadsIt) {
  auto a = parse_condition("new==1 && value>0");
  auto b = parse_condition("new==1 && old>0");
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(a->uses_old());
  EXPECT_TRUE(b->uses_old());
}

}  // namespace
}  // namespace hwarb::cli
