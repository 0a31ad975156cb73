// number_scan.h (cli_expr, private) — the one scanner of the numbers in watch expressions and
// --if conditions: decimal, or hexadecimal after 0x/0X, unsigned, 64 bits. The callers word the
// errors for their own grammar (with the column); the scanner says what is wrong and where.
// Pure and reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "hwarb/base/error.h"

namespace hwarb::cli {

struct NumberScan {
  enum class Kind : std::uint8_t {
    kOk,           // value, end = past the last digit
    kNoDigits,     // end = where a digit was expected (nothing, or a non-digit, at pos)
    kNoHexDigits,  // "0x" and no hexadecimal digit after it; end = after the x
    kBadDigit,     // a letter that is not a digit of the base after some digits; end = at it
    kOverflow,     // more than 64 bits; end = past the last digit
  };
  Kind kind = Kind::kOk;
  std::uint64_t value = 0;
  std::size_t end = 0;
  bool hex = false;
  char bad = 0;  // kBadDigit: the letter
};

NumberScan scan_number(std::string_view text, std::size_t pos);

// The value of a command-line count `option` (--count N): a number as scan_number reads it, all
// of `text`. EINVAL naming the option, the text and what is wrong, with `unit` saying what is
// counted ("hits": "give a number of hits").
Result<std::uint64_t> parse_count_option(std::string_view option, const std::string& text,
                                         std::string_view unit);

// "'c'", for messages.
std::string quoted(char c);

}  // namespace hwarb::cli
