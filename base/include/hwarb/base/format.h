// hwarb/base/format.h — the one way numbers and strings are printed in messages and reports.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace hwarb {

// "0x1f": lowercase, no padding, always with the prefix (zero prints as "0x0", as gdb and perf
// print it). Every hex number hwarb prints comes from here or from hex_padded.
inline std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// "0x00000000ffff0ff0": `digits` hex digits, zero-padded (a register image printed at its width).
inline std::string hex_padded(std::uint64_t v, int digits) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits, static_cast<unsigned long long>(v));
  return buf;
}

// A JSON string literal (quotes included): quote, backslash and every control character
// escaped (\n, \t, else \u00XX). Bytes >= 0x20 pass through (UTF-8 stays UTF-8).
inline std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

// `text` with &, <, > and " (and ') escaped: for XML and HTML text and attribute values (gdb's
// qXfer documents, the SVG and HTML pictures).
inline std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace hwarb
