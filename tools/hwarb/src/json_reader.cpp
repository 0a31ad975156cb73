#include "json_reader.h"

#include <cstdlib>

namespace hwarb::cli {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<JsonValue> document() {
    JsonValue v;
    if (auto r = value(v, 0); !r) return std::unexpected(r.error());
    skip_space();
    if (at_ != text_.size()) return fail("text after the value");
    return v;
  }

 private:
  std::unexpected<Error> fail(const std::string& what) const {
    return make_error(ErrorCode::kInval, "column " + std::to_string(at_ + 1) + ": " + what);
  }

  void skip_space() {
    while (at_ < text_.size() &&
           (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' || text_[at_] == '\r')) {
      ++at_;
    }
  }

  bool take(std::string_view word) {
    if (text_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }

  Result<void> value(JsonValue& v, int depth) {
    if (depth > kMaxJsonDepth) return fail("nested deeper than " + std::to_string(kMaxJsonDepth));
    skip_space();
    if (at_ >= text_.size()) return fail("a value is missing");
    const char c = text_[at_];
    if (c == '{') return object(v, depth);
    if (c == '[') return array(v, depth);
    if (c == '"') {
      v.type = JsonValue::Type::kString;
      return string(v.text);
    }
    if (take("true")) {
      v.type = JsonValue::Type::kBool;
      v.boolean = true;
      return {};
    }
    if (take("false")) {
      v.type = JsonValue::Type::kBool;
      return {};
    }
    if (take("null")) return {};
    return number(v);
  }

  Result<void> number(JsonValue& v) {
    const std::size_t begin = at_;
    if (at_ < text_.size() && text_[at_] == '-') ++at_;
    const auto digits = [&] {
      const std::size_t from = at_;
      while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') ++at_;
      return at_ - from;
    };
    if (digits() == 0) return fail("not a JSON value");
    if (at_ < text_.size() && text_[at_] == '.') {
      ++at_;
      if (digits() == 0) return fail("a digit must follow '.'");
    }
    if (at_ < text_.size() && (text_[at_] == 'e' || text_[at_] == 'E')) {
      ++at_;
      if (at_ < text_.size() && (text_[at_] == '+' || text_[at_] == '-')) ++at_;
      if (digits() == 0) return fail("a digit must follow the exponent");
    }
    v.type = JsonValue::Type::kNumber;
    v.number = std::strtod(std::string(text_.substr(begin, at_ - begin)).c_str(), nullptr);
    return {};
  }

  static void utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  Result<unsigned> hex4() {
    if (at_ + 4 > text_.size()) return fail("\\u needs 4 hex digits");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[at_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<unsigned>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<unsigned>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<unsigned>(c - 'A' + 10);
      } else {
        --at_;
        return fail("\\u needs 4 hex digits");
      }
    }
    return v;
  }

  Result<void> string(std::string& out) {
    ++at_;  // the opening quote
    while (true) {
      if (at_ >= text_.size()) return fail("the string is not closed");
      const char c = text_[at_++];
      if (c == '"') return {};
      if (static_cast<unsigned char>(c) < 0x20) {
        --at_;
        return fail("a control character in a string");
      }
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= text_.size()) return fail("the string is not closed");
      const char e = text_[at_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          auto cp = hex4();
          if (!cp) return std::unexpected(cp.error());
          unsigned code = *cp;
          if (code >= 0xd800 && code < 0xdc00 && take("\\u")) {
            auto low = hex4();
            if (!low) return std::unexpected(low.error());
            if (*low >= 0xdc00 && *low < 0xe000) {
              code = 0x10000 + ((code - 0xd800) << 10) + (*low - 0xdc00);
            } else {
              utf8(out, 0xfffd);
              code = *low;
            }
          }
          if (code >= 0xd800 && code < 0xe000) code = 0xfffd;  // a lone surrogate
          utf8(out, code);
          break;
        }
        default:
          --at_;
          return fail("an unknown escape");
      }
    }
  }

  Result<void> array(JsonValue& v, int depth) {
    ++at_;
    v.type = JsonValue::Type::kArray;
    skip_space();
    if (at_ < text_.size() && text_[at_] == ']') {
      ++at_;
      return {};
    }
    while (true) {
      JsonValue item;
      if (auto r = value(item, depth + 1); !r) return r;
      v.items.push_back(std::move(item));
      skip_space();
      if (at_ < text_.size() && text_[at_] == ',') {
        ++at_;
        continue;
      }
      if (at_ < text_.size() && text_[at_] == ']') {
        ++at_;
        return {};
      }
      return fail("',' or ']' expected");
    }
  }

  Result<void> object(JsonValue& v, int depth) {
    ++at_;
    v.type = JsonValue::Type::kObject;
    skip_space();
    if (at_ < text_.size() && text_[at_] == '}') {
      ++at_;
      return {};
    }
    while (true) {
      skip_space();
      if (at_ >= text_.size() || text_[at_] != '"') return fail("a member name expected");
      std::string key;
      if (auto r = string(key); !r) return r;
      skip_space();
      if (at_ >= text_.size() || text_[at_] != ':') return fail("':' expected");
      ++at_;
      JsonValue member;
      if (auto r = value(member, depth + 1); !r) return r;
      v.members.emplace_back(std::move(key), std::move(member));
      skip_space();
      if (at_ < text_.size() && text_[at_] == ',') {
        ++at_;
        continue;
      }
      if (at_ < text_.size() && text_[at_] == '}') {
        ++at_;
        return {};
      }
      return fail("',' or '}' expected");
    }
  }

  std::string_view text_;
  std::size_t at_ = 0;
};

}  // namespace

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [name, value] : members) {
    if (name == key) return &value;
  }
  return nullptr;
}

std::string JsonValue::string_of(std::string_view key, std::string_view fallback) const {
  const JsonValue* v = find(key);
  return v != nullptr && v->type == Type::kString ? v->text : std::string(fallback);
}

double JsonValue::number_of(std::string_view key, double fallback) const {
  const JsonValue* v = find(key);
  return v != nullptr && v->type == Type::kNumber ? v->number : fallback;
}

Result<JsonValue> parse_json(std::string_view text) {
  return Parser(text).document();
}

}  // namespace hwarb::cli
