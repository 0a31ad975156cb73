#include "hwarb/cli/watch_expr.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <string>

#include "hwarb/base/format.h"
#include "number_scan.h"

namespace hwarb::cli {
namespace {

constexpr std::uint64_t kMaxOffset = std::uint64_t{1} << 63;  // |OFF| after '-'

bool symbol_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$';
}

bool symbol_char(char c) {
  return symbol_start(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '@';
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<WatchExpr> parse() {
    WatchExpr e;
    e.text = std::string(text_);
    bool offset_given = false;
    if (text_.empty()) return fail(0, "empty expression");
    if (text_.starts_with("mem:")) {
      pos_ = 4;
      auto addr = number("address");
      if (!addr) return std::unexpected(addr.error());
      e.address = *addr;
    } else {
      if (!symbol_start(text_[0]) && text_[0] != '(' && !text_.starts_with("::")) {
        return fail(0, "expected a symbol name or mem:ADDR, found " + quoted(text_[0]));
      }
      auto name = source_name();
      if (!name) return std::unexpected(name.error());
      e.symbol = std::move(*name);
      if (at('+') || at('-')) {
        const bool negative = text_[pos_] == '-';
        offset_given = true;
        ++pos_;
        const std::size_t start = pos_;
        auto off = number("offset");
        if (!off) return std::unexpected(off.error());
        if (*off > kMaxOffset - (negative ? 0 : 1)) {
          return fail(start, "offset " + std::string(text_.substr(start, pos_ - start)) +
                                 " does not fit in a signed 64-bit offset");
        }
        e.offset = negative ? static_cast<std::int64_t>(0 - *off) : static_cast<std::int64_t>(*off);
      }
    }
    if (at('/')) {
      ++pos_;
      const std::size_t start = pos_;
      auto len = number("length");
      if (!len) return std::unexpected(len.error());
      if (*len == 0) return fail(start, "length must be at least 1");
      if (*len > kMaxWatchLength) {
        return fail(start, "length " + std::to_string(*len) + " is over the limit of " +
                               std::to_string(kMaxWatchLength) + " bytes");
      }
      e.length = *len;
    }
    if (at(':')) {
      ++pos_;
      auto access = access_letters();
      if (!access) return std::unexpected(access.error());
      e.access = *access;
      e.access_given = true;
    }
    if (pos_ < text_.size()) {
      std::string expected = e.length ? "':'" : "'/' or ':'";
      if (!e.address && !offset_given && !e.length) expected = "'+', '-', '/' or ':'";
      return fail(pos_, "unexpected " + quoted(text_[pos_]) + " (expected " + expected + ")");
    }
    if (e.address) {
      // An execute watch is its first byte alone.
      const std::uint64_t len =
          e.access == WatchAccess::kExec ? 1 : default_length(e, std::nullopt);
      if (*e.address > std::numeric_limits<std::uint64_t>::max() - (len - 1)) {
        return fail(4, "range " + hex(*e.address) + "/" + std::to_string(len) +
                           " wraps past the end of the address space");
      }
    }
    return e;
  }

 private:
  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  std::unexpected<Error> fail(std::size_t index, const std::string& reason) const {
    return make_error(ErrorCode::kInval, "expression '" + std::string(text_) + "': at column " +
                                             std::to_string(index + 1) + ": " + reason);
  }

  // The name at pos_ as the source spells it, which it moves past: symbol characters, the scope
  // operator ::, and within brackets ((), [], <>) anything but another closing bracket; at depth 0
  // it ends at '+', '/', a ':' that is not half of "::", a '-' that is not the start of "->", or
  // anything else that is not a name character (an error then follows from the caller).
  Result<std::string> source_name() {
    const std::size_t start = pos_;
    std::string open;  // the closing brackets expected, innermost last
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      const auto closing = [](char o) { return o == '(' ? ')' : o == '[' ? ']' : '>'; };
      if (c == '(' || c == '[' || c == '<') {
        open += closing(c);
        ++pos_;
        continue;
      }
      if (c == ')' || c == ']' || c == '>') {
        if (c == '>' && open.empty() && pos_ > start && text_[pos_ - 1] == '-') {
          ++pos_;  // the '>' of "->"
          continue;
        }
        if (open.empty() || open.back() != c) {
          return fail(pos_, "unbalanced " + quoted(c) +
                                (open.empty() ? "" : " (expected " + quoted(open.back()) + ")"));
        }
        open.pop_back();
        ++pos_;
        continue;
      }
      if (!open.empty()) {
        ++pos_;
        continue;
      }
      if (c == ':' && pos_ + 1 < text_.size() && text_[pos_ + 1] == ':') {
        pos_ += 2;
        continue;
      }
      if (c == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '>') {
        ++pos_;
        continue;
      }
      if (!symbol_char(c)) break;
      ++pos_;
    }
    if (!open.empty()) return fail(pos_, "expected " + quoted(open.back()));
    return std::string(text_.substr(start, pos_ - start));
  }

  // A hexadecimal (0x) or decimal number at pos_, which it moves past.
  Result<std::uint64_t> number(const char* field) {
    const std::size_t start = pos_;
    const NumberScan n = scan_number(text_, pos_);
    const std::string bad = std::string("bad ") + field + ": ";
    switch (n.kind) {
      case NumberScan::Kind::kOk:
        pos_ = n.end;
        return n.value;
      case NumberScan::Kind::kBadDigit:
        return fail(n.end, bad + quoted(n.bad) + " is not a " +
                               (n.hex ? "hexadecimal" : "decimal") + " digit");
      case NumberScan::Kind::kNoHexDigits:
        return fail(n.end, bad + "no digits after 0x");
      case NumberScan::Kind::kNoDigits:
        return fail(n.end, std::string("expected ") + field + " (hexadecimal with 0x, or decimal)");
      case NumberScan::Kind::kOverflow:
        break;
    }
    return fail(start,
                bad + std::string(text_.substr(start, n.end - start)) + " does not fit in 64 bits");
  }

  Result<WatchAccess> access_letters() {
    if (pos_ == text_.size()) return fail(pos_, "expected access letters (r, w, x)");
    unsigned bits = 0;
    for (; pos_ < text_.size(); ++pos_) {
      const char c = text_[pos_];
      unsigned bit = 0;
      switch (c) {
        case 'r':
          bit = static_cast<unsigned>(WatchAccess::kRead);
          break;
        case 'w':
          bit = static_cast<unsigned>(WatchAccess::kWrite);
          break;
        case 'x':
          bit = static_cast<unsigned>(WatchAccess::kExec);
          break;
        default:
          return fail(pos_, "unknown access letter " + quoted(c) + " (use r, w, x)");
      }
      if ((bits & bit) != 0) return fail(pos_, "access letter " + quoted(c) + " given twice");
      bits |= bit;
      const unsigned rw = static_cast<unsigned>(WatchAccess::kReadWrite);
      if ((bits & static_cast<unsigned>(WatchAccess::kExec)) != 0 && (bits & rw) != 0) {
        return fail(pos_, "x cannot be combined with r or w");
      }
    }
    return static_cast<WatchAccess>(bits);
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

const char* access_name(WatchAccess a) {
  switch (a) {
    case WatchAccess::kRead:
      return "r";
    case WatchAccess::kWrite:
      return "w";
    case WatchAccess::kReadWrite:
      return "rw";
    case WatchAccess::kExec:
      return "x";
  }
  return "?";
}

Result<WatchExpr> parse_watch_expr(std::string_view text) {
  return Parser(text).parse();
}

std::uint64_t default_length(const WatchExpr& e, std::optional<std::uint64_t> symbol_size) {
  if (e.length) return *e.length;
  if (e.access == WatchAccess::kExec) return sizeof(long);
  if (!e.symbol.empty() && e.offset == 0 && symbol_size && *symbol_size != 0) {
    return std::min(*symbol_size, kMaxWatchLength);
  }
  return 4;
}

}  // namespace hwarb::cli
