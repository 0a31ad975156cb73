#include "hwarb/gdb/rsp.h"

#include <algorithm>
#include <utility>

namespace hwarb::gdb {
namespace {

constexpr char kDigits[] = "0123456789abcdef";

// The value of one hex digit, -1 for any other byte.
int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool needs_escape(char c) {
  return c == '$' || c == '#' || c == '}' || c == '*';
}

void append_byte_hex(std::string& out, std::uint8_t b) {
  out += kDigits[b >> 4];
  out += kDigits[b & 0xf];
}

}  // namespace

std::uint8_t rsp_checksum(std::string_view bytes) {
  std::uint8_t sum = 0;
  for (char c : bytes) sum = static_cast<std::uint8_t>(sum + static_cast<std::uint8_t>(c));
  return sum;
}

std::string rsp_escape_binary(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (char c : bytes) {
    if (needs_escape(c)) {
      out += '}';
      out += static_cast<char>(c ^ 0x20);
    } else {
      out += c;
    }
  }
  return out;
}

std::string rsp_unescape(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != '}') {
      out += bytes[i];
    } else if (i + 1 < bytes.size()) {
      out += static_cast<char>(bytes[++i] ^ 0x20);
    }
  }
  return out;
}

std::string rsp_frame(std::string_view payload) {
  const std::string escaped = rsp_escape_binary(payload);
  std::string out;
  out.reserve(escaped.size() + 4);
  out += '$';
  out += escaped;
  out += '#';
  append_byte_hex(out, rsp_checksum(escaped));
  return out;
}

void RspReader::finish() {
  const int hi = hex_digit(sum_[0]);
  const int lo = hex_digit(sum_[1]);
  const bool good = hi >= 0 && lo >= 0 && rsp_checksum(payload_) == hi * 16 + lo;
  items_.push_back(
      RspItem{good ? RspItem::Kind::kPacket : RspItem::Kind::kBadChecksum, std::move(payload_)});
  payload_.clear();
  state_ = State::kIdle;
}

void RspReader::feed(std::string_view bytes) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    switch (state_) {
      case State::kSkip:
      case State::kIdle:
        if (c == '$') {
          payload_.clear();
          state_ = State::kPayload;
        } else if (state_ == State::kIdle) {
          if (c == '+') items_.push_back(RspItem{RspItem::Kind::kAck, {}});
          if (c == '-') items_.push_back(RspItem{RspItem::Kind::kNack, {}});
          if (c == '\x03') items_.push_back(RspItem{RspItem::Kind::kInterrupt, {}});
        }
        break;
      case State::kPayload: {
        // Take the run of payload bytes up to the next '#' or '$' at once.
        const std::size_t end = bytes.find_first_of("#$", i);
        const std::size_t stop = end == std::string_view::npos ? bytes.size() : end;
        const std::size_t room = kRspMaxPacket - payload_.size();
        if (stop - i > room) {
          payload_.append(bytes.substr(i, room));
          items_.push_back(RspItem{RspItem::Kind::kBadChecksum, std::move(payload_)});
          payload_.clear();
          state_ = State::kSkip;
          // bytes[i + room] is neither '#' nor '$' (stop lies beyond it): the loop may skip it.
          i += room;
          break;
        }
        payload_.append(bytes.substr(i, stop - i));
        i = stop;
        if (stop == bytes.size()) break;
        if (bytes[stop] == '$') {
          payload_.clear();  // a new packet starts: the unfinished one is abandoned
        } else {
          state_ = State::kSum1;
        }
        break;
      }
      case State::kSum1:
        sum_[0] = c;
        state_ = State::kSum2;
        break;
      case State::kSum2:
        sum_[1] = c;
        finish();
        break;
    }
  }
}

std::optional<RspItem> RspReader::next() {
  if (items_.empty()) return std::nullopt;
  RspItem item = std::move(items_.front());
  items_.pop_front();
  return item;
}

bool RspReader::take_interrupts() {
  const auto before = items_.size();
  std::erase_if(items_, [](const RspItem& i) { return i.kind == RspItem::Kind::kInterrupt; });
  return items_.size() != before;
}

std::string to_hex(std::span<const std::uint8_t> bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (std::uint8_t b : bytes) append_byte_hex(out, b);
  return out;
}

Result<std::vector<std::uint8_t>> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) {
    return make_error(ErrorCode::kInval, "hex: odd length " + std::to_string(hex.size()) + " of '" +
                                             std::string(hex.substr(0, 64)) + "'");
  }
  std::vector<std::uint8_t> out(hex.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = hex_digit(hex[2 * i]);
    const int lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return make_error(ErrorCode::kInval, "hex: not a hex digit at offset " +
                                               std::to_string(2 * i + (hi < 0 ? 0 : 1)));
    }
    out[i] = static_cast<std::uint8_t>(hi * 16 + lo);
  }
  return out;
}

Result<std::uint64_t> parse_hex_u64(std::string_view hex) {
  if (hex.empty()) return make_error(ErrorCode::kInval, "hex: empty number");
  std::uint64_t value = 0;
  for (char c : hex) {
    const int d = hex_digit(c);
    if (d < 0) {
      return make_error(ErrorCode::kInval,
                        "hex: '" + std::string(hex.substr(0, 64)) + "' is not a hex number");
    }
    if (value >> 60 != 0) {
      return make_error(ErrorCode::kInval,
                        "hex: '" + std::string(hex.substr(0, 64)) + "' does not fit in 64 bits");
    }
    value = value << 4 | static_cast<std::uint64_t>(d);
  }
  return value;
}

std::string hex_u64(std::uint64_t value) {
  std::string out;
  do {
    out += kDigits[value & 0xf];
    value >>= 4;
  } while (value != 0);
  std::reverse(out.begin(), out.end());
  return out;
}

std::string hex_le(std::uint64_t value, int bytes) {
  bytes = std::clamp(bytes, 0, 8);
  std::string out;
  out.reserve(static_cast<std::size_t>(bytes) * 2);
  for (int i = 0; i < bytes; ++i) append_byte_hex(out, static_cast<std::uint8_t>(value >> (8 * i)));
  return out;
}

}  // namespace hwarb::gdb
