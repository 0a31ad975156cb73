#include "typed_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "hwarb/base/format.h"

namespace hwarb::cli {
namespace {

std::uint64_t unsigned_of(const std::vector<std::uint8_t>& bytes) {
  std::uint64_t v = 0;
  std::memcpy(&v, bytes.data(), std::min<std::size_t>(bytes.size(), sizeof v));
  return v;
}

std::int64_t signed_of(const std::vector<std::uint8_t>& bytes) {
  const std::uint64_t v = unsigned_of(bytes);
  const unsigned bits = static_cast<unsigned>(bytes.size()) * 8;
  if (bits >= 64) return static_cast<std::int64_t>(v);
  const std::uint64_t sign = std::uint64_t{1} << (bits - 1);
  return static_cast<std::int64_t>((v ^ sign) - sign);
}

bool integer_size(std::size_t n) {
  return n == 1 || n == 2 || n == 4 || n == 8;
}

std::string quote(const std::string& text, bool json) {
  if (json) return json_string(text);
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

std::optional<std::string> typed_value(const native::ValueType& type,
                                       const std::vector<std::uint8_t>& bytes,
                                       const native::SymbolTable* symbols, bool json) {
  if (bytes.empty()) return std::nullopt;
  const std::size_t n = bytes.size();
  switch (type.kind) {
    case native::ValueKind::kBytes:
      return std::nullopt;
    case native::ValueKind::kSigned:
      if (!integer_size(n)) return std::nullopt;
      return std::to_string(signed_of(bytes));
    case native::ValueKind::kUnsigned:
      if (!integer_size(n)) return std::nullopt;
      return std::to_string(unsigned_of(bytes));
    case native::ValueKind::kBool:
      if (!integer_size(n)) return std::nullopt;
      return unsigned_of(bytes) != 0 ? "true" : "false";
    case native::ValueKind::kFloat: {
      double v = 0;
      if (n == sizeof(float)) {
        float f = 0;
        std::memcpy(&f, bytes.data(), sizeof f);
        v = f;
      } else if (n == sizeof(double)) {
        std::memcpy(&v, bytes.data(), sizeof v);
      } else {
        return std::nullopt;
      }
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", v);
      // %.17g round-trips; the shortest of %g's precisions that still does reads better.
      for (int p = 1; p < 17; ++p) {
        char shorter[64];
        std::snprintf(shorter, sizeof shorter, "%.*g", p, v);
        if (std::strtod(shorter, nullptr) == v) {
          std::strcpy(buf, shorter);
          break;
        }
      }
      if (json && !std::isfinite(v)) return json_string(buf);
      return std::string(buf);
    }
    case native::ValueKind::kEnum: {
      if (!integer_size(n)) return std::nullopt;
      const std::int64_t v = signed_of(bytes);
      for (const auto& [value, name] : type.enumerators) {
        if (value == v || static_cast<std::uint64_t>(value) == unsigned_of(bytes)) {
          return json ? json_string(name) : name;
        }
      }
      return std::to_string(v);
    }
    case native::ValueKind::kPointer: {
      if (n != 8) return std::nullopt;
      const std::uint64_t v = unsigned_of(bytes);
      std::string text = hex(v);
      if (v != 0 && symbols != nullptr) {
        const native::Location loc = symbols->locate(v);
        if (loc.symbol) text += " (" + loc.symbol->name + "+" + hex(loc.offset) + ")";
      }
      return json ? json_string(text) : text;
    }
    case native::ValueKind::kCharArray: {
      std::string text(bytes.begin(), bytes.end());
      text.resize(std::strlen(text.c_str()));
      return quote(text, json);
    }
  }
  return std::nullopt;
}

}  // namespace hwarb::cli
