// tools/hwarb/src/json_reader.h — reads one JSON value (RFC 8259), for `hwarb report`, which reads
// back the records of `hwarb watch --json`.
//
// Contract:
//  - parse_json() takes the whole text of one value (whitespace around it allowed): EINVAL
//    "column N: what" for anything else, at the first byte that is wrong. Nesting deeper than
//    kMaxDepth is refused the same way (no unbounded recursion).
//  - Strings are decoded (escapes, \u with surrogate pairs, to UTF-8); numbers are doubles.
//    Object members keep their order; find() gives the first of a name.
// Thread-safety: plain data.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hwarb/base/error.h"

namespace hwarb::cli {

struct JsonValue {
  enum class Type : std::uint8_t { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<JsonValue> items;
  std::vector<std::pair<std::string, JsonValue>> members;

  // The member `key` of an object, or nullptr.
  const JsonValue* find(std::string_view key) const;
  // The member `key` as a string / number, `fallback` when absent or of another type.
  std::string string_of(std::string_view key, std::string_view fallback = {}) const;
  double number_of(std::string_view key, double fallback = 0) const;
};

inline constexpr int kMaxJsonDepth = 64;

Result<JsonValue> parse_json(std::string_view text);

}  // namespace hwarb::cli
