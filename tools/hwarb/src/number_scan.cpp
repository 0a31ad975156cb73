#include "number_scan.h"

#include <cctype>
#include <limits>

namespace hwarb::cli {

NumberScan scan_number(std::string_view text, std::size_t pos) {
  NumberScan out;
  if (pos + 1 < text.size() && text[pos] == '0' && (text[pos + 1] | 0x20) == 'x') {
    out.hex = true;
    pos += 2;
  }
  const unsigned base = out.hex ? 16 : 10;
  const std::size_t digits = pos;
  bool overflow = false;
  // Letters and digits run together: "12ab" is a bad digit, not 12 followed by "ab".
  while (pos < text.size() && std::isalnum(static_cast<unsigned char>(text[pos]))) {
    const char c = text[pos];
    const bool dec = std::isdigit(static_cast<unsigned char>(c)) != 0;
    if (out.hex ? !std::isxdigit(static_cast<unsigned char>(c)) : !dec) {
      if (pos == digits) break;
      out.kind = NumberScan::Kind::kBadDigit;
      out.end = pos;
      out.bad = c;
      return out;
    }
    const unsigned d =
        dec ? static_cast<unsigned>(c - '0') : static_cast<unsigned>((c | 0x20) - 'a' + 10);
    if (out.value > (std::numeric_limits<std::uint64_t>::max() - d) / base) overflow = true;
    out.value = out.value * base + d;
    ++pos;
  }
  out.end = pos;
  if (pos == digits) {
    out.kind = out.hex ? NumberScan::Kind::kNoHexDigits : NumberScan::Kind::kNoDigits;
  } else if (overflow) {
    out.kind = NumberScan::Kind::kOverflow;
  }
  return out;
}

std::string quoted(char c) {
  return std::string("'") + c + "'";
}

Result<std::uint64_t> parse_count_option(std::string_view option, const std::string& text,
                                         std::string_view unit) {
  const std::string give = "give a number of " + std::string(unit);
  const auto bad = [&](const std::string& reason) {
    return make_error(ErrorCode::kInval, std::string(option) + ": '" + text + "' " + reason);
  };
  if (text.empty())
    return make_error(ErrorCode::kInval, std::string(option) + ": empty (" + give + ")");
  if (text.front() == '-') return bad("is negative (" + give + ")");
  const NumberScan n = scan_number(text, 0);
  if (n.kind == NumberScan::Kind::kOverflow) return bad("does not fit in 64 bits");
  if (n.kind != NumberScan::Kind::kOk || n.end != text.size()) {
    return bad("is not a number of " + std::string(unit) + " (decimal, or hexadecimal with 0x)");
  }
  return n.value;
}

}  // namespace hwarb::cli
