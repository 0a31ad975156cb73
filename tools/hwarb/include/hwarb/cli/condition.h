// hwarb/cli/condition.h — the `--if` conditions of `hwarb watch`: when a hit is reported.
//
// Contract:
//  - parse_condition() is pure. Grammar (blanks allowed between tokens):
//      condition  = comparison { "&&" comparison }
//      comparison = operand op number
//      operand    = "old" | "new" | "value"          (value is another name for new)
//      op         = "==" | "!=" | "<" | ">" | "<=" | ">="
//      number     = ["-"] (decimal | 0x hexadecimal)   from -2^63 to 2^64-1
//    Only conjunctions: "||" is rejected (EINVAL at its column), there are no parentheses and the
//    number is always on the right.
//  - Errors are EINVAL with the message "condition 'TEXT': at column N: reason", N the 1-based
//    column of the offending character (one past the end when something is missing).
//  - eval() takes the watched value before and after the access, `width_bytes` wide (1..8; any
//    other width counts as 8); the bits above the width are ignored. A comparison with a negative
//    constant compares signed, both sides sign-extended from the width (so `new<=-1` holds for
//    0xff at width 1); with a constant >= 0 it compares unsigned (so `new>0` holds for 0xff and
//    `new<0` never holds: write `new<=-1` for "negative").
//    A Condition without comparisons (default-constructed) is always true.
// Thread-safety: all functions are pure; a Condition is immutable after parsing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/base/error.h"

namespace hwarb::cli {

enum class CondOperand : std::uint8_t { kOld, kNew };
enum class CondOp : std::uint8_t { kEq, kNe, kLt, kGt, kLe, kGe };

// "==", "!=", "<", ">", "<=", ">=".
const char* op_name(CondOp op);

struct Comparison {
  CondOperand operand = CondOperand::kNew;
  CondOp op = CondOp::kEq;
  std::uint64_t constant = 0;  // two's complement when negative
  bool negative = false;

  bool eval(std::uint64_t old_value, std::uint64_t new_value, unsigned width_bytes) const;
};

struct Condition {
  std::string text;               // as given
  std::vector<Comparison> terms;  // all must hold

  bool eval(std::uint64_t old_value, std::uint64_t new_value, unsigned width_bytes) const;
  // Whether any comparison reads the old value (so the caller must keep it).
  bool uses_old() const;
};

Result<Condition> parse_condition(std::string_view text);

}  // namespace hwarb::cli
