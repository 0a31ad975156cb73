#include "hwarb/cli/condition.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <string>

#include "number_scan.h"

namespace hwarb::cli {
namespace {

constexpr std::uint64_t kMinMagnitude = std::uint64_t{1} << 63;  // |INT64_MIN|

bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<Condition> parse() {
    Condition c;
    c.text = std::string(text_);
    skip_blanks();
    if (pos_ == text_.size()) return fail(pos_, "empty condition");
    for (;;) {
      auto term = comparison();
      if (!term) return std::unexpected(term.error());
      c.terms.push_back(*term);
      skip_blanks();
      if (pos_ == text_.size()) break;
      if (text_.substr(pos_).starts_with("&&")) {
        pos_ += 2;
        skip_blanks();
        continue;
      }
      if (text_.substr(pos_).starts_with("||")) {
        return fail(pos_, "'||' is not supported: a condition is comparisons joined by '&&'");
      }
      return fail(pos_, "unexpected " + quoted(text_[pos_]) + " (expected '&&')");
    }
    return c;
  }

 private:
  void skip_blanks() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  std::unexpected<Error> fail(std::size_t index, const std::string& reason) const {
    return make_error(ErrorCode::kInval, "condition '" + std::string(text_) + "': at column " +
                                             std::to_string(index + 1) + ": " + reason);
  }

  Result<Comparison> comparison() {
    Comparison cmp;
    const std::size_t start = pos_;
    while (pos_ < text_.size() && ident_char(text_[pos_])) ++pos_;
    const std::string_view name = text_.substr(start, pos_ - start);
    if (name == "old") {
      cmp.operand = CondOperand::kOld;
    } else if (name == "new" || name == "value") {
      cmp.operand = CondOperand::kNew;
    } else if (name.empty()) {
      if (start == text_.size()) return fail(start, "expected 'old', 'new' or 'value'");
      return fail(start, "expected 'old', 'new' or 'value', found " + quoted(text_[start]));
    } else {
      return fail(start, "unknown operand '" + std::string(name) + "' (use old, new or value)");
    }
    skip_blanks();
    auto op = comparison_op();
    if (!op) return std::unexpected(op.error());
    cmp.op = *op;
    skip_blanks();
    auto value = number(&cmp.negative);
    if (!value) return std::unexpected(value.error());
    cmp.constant = *value;
    return cmp;
  }

  Result<CondOp> comparison_op() {
    const std::string_view rest = text_.substr(pos_);
    struct Spelling {
      std::string_view text;
      CondOp op;
    };
    // Two-character operators first, so "<=" is not read as "<".
    static constexpr Spelling kOps[] = {{"==", CondOp::kEq}, {"!=", CondOp::kNe},
                                        {"<=", CondOp::kLe}, {">=", CondOp::kGe},
                                        {"<", CondOp::kLt},  {">", CondOp::kGt}};
    for (const Spelling& s : kOps) {
      if (rest.starts_with(s.text)) {
        pos_ += s.text.size();
        return s.op;
      }
    }
    if (rest.starts_with("=")) return fail(pos_, "'=' is not a comparison (use '==')");
    if (rest.empty()) return fail(pos_, "expected a comparison (==, !=, <, >, <=, >=)");
    return fail(pos_, "expected a comparison (==, !=, <, >, <=, >=), found " + quoted(text_[pos_]));
  }

  // ["-"] decimal or 0x hexadecimal; a negative value is returned in two's complement.
  Result<std::uint64_t> number(bool* negative) {
    const std::size_t start = pos_;
    *negative = pos_ < text_.size() && text_[pos_] == '-';
    if (*negative) ++pos_;
    const NumberScan n = scan_number(text_, pos_);
    switch (n.kind) {
      case NumberScan::Kind::kOk:
      case NumberScan::Kind::kOverflow:
        break;
      case NumberScan::Kind::kBadDigit:
        return fail(n.end,
                    quoted(n.bad) + " is not a " + (n.hex ? "hexadecimal" : "decimal") + " digit");
      case NumberScan::Kind::kNoHexDigits:
        return fail(n.end, "no digits after 0x");
      case NumberScan::Kind::kNoDigits:
        if (n.end == text_.size()) return fail(n.end, "expected a number");
        return fail(n.end, "expected a number, found " + quoted(text_[n.end]));
    }
    pos_ = n.end;
    const std::string spelled(text_.substr(start, pos_ - start));
    if (n.kind == NumberScan::Kind::kOverflow)
      return fail(start, spelled + " does not fit in 64 bits");
    if (*negative) {
      if (n.value > kMinMagnitude) return fail(start, spelled + " is below -2^63");
      // -0 is 0: compared unsigned like any constant >= 0.
      if (n.value == 0) *negative = false;
      return 0 - n.value;
    }
    return n.value;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

template <typename T>
bool compare(CondOp op, T a, T b) {
  switch (op) {
    case CondOp::kEq:
      return a == b;
    case CondOp::kNe:
      return a != b;
    case CondOp::kLt:
      return a < b;
    case CondOp::kGt:
      return a > b;
    case CondOp::kLe:
      return a <= b;
    case CondOp::kGe:
      return a >= b;
  }
  return false;
}

}  // namespace

const char* op_name(CondOp op) {
  switch (op) {
    case CondOp::kEq:
      return "==";
    case CondOp::kNe:
      return "!=";
    case CondOp::kLt:
      return "<";
    case CondOp::kGt:
      return ">";
    case CondOp::kLe:
      return "<=";
    case CondOp::kGe:
      return ">=";
  }
  return "?";
}

bool Comparison::eval(std::uint64_t old_value, std::uint64_t new_value,
                      unsigned width_bytes) const {
  const unsigned bits = width_bytes >= 1 && width_bytes <= 8 ? width_bytes * 8 : 64;
  const std::uint64_t mask = bits == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
  const std::uint64_t v = (operand == CondOperand::kOld ? old_value : new_value) & mask;
  if (!negative) return compare(op, v, constant);
  const std::uint64_t sign = std::uint64_t{1} << (bits - 1);
  const std::uint64_t extended = (v & sign) != 0 ? v | ~mask : v;
  return compare(op, static_cast<std::int64_t>(extended), static_cast<std::int64_t>(constant));
}

bool Condition::eval(std::uint64_t old_value, std::uint64_t new_value, unsigned width_bytes) const {
  return std::all_of(terms.begin(), terms.end(), [&](const Comparison& c) {
    return c.eval(old_value, new_value, width_bytes);
  });
}

bool Condition::uses_old() const {
  return std::any_of(terms.begin(), terms.end(),
                     [](const Comparison& c) { return c.operand == CondOperand::kOld; });
}

Result<Condition> parse_condition(std::string_view text) {
  return Parser(text).parse();
}

}  // namespace hwarb::cli
