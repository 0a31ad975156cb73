// hwarb/gdb/rsp.h — the framing of GDB's Remote Serial Protocol, without any I/O: checksums,
// packets, escapes, and the hex encodings the packets carry.
//
// Contract:
//  - A packet on the wire is "$" payload "#" cc: cc is two hex digits of the sum of the payload
//    bytes modulo 256 (rsp_checksum). Outside packets, '+' acknowledges the last packet, '-' asks
//    for it again, and the byte 0x03 interrupts the target.
//  - rsp_frame(payload) builds one packet the stub sends: the payload escaped with
//    rsp_escape_binary (each '$', '#', '}' and '*' becomes '}' followed by the byte XOR 0x20; gdb
//    undoes this in every reply and would take a bare '*' for run-length encoding) and the
//    checksum of the escaped bytes in lowercase hex. Do not escape a payload before framing it:
//    rsp_escape_binary is public for callers that must know an escaped length beforehand (a
//    qXfer or vFile reply bounded by PacketSize).
//  - RspReader parses what gdb sends, in pieces of any size: feed() takes the bytes as they
//    arrive (a packet may be split across feeds, several may come in one), next() returns the
//    items in order, nullopt when none is complete yet.
//      '+' kAck, '-' kNack, 0x03 kInterrupt (only between packets: inside one it is payload);
//      "$payload#cc" kPacket with the payload exactly as it was between '$' and '#', escapes
//      still in (gdb escapes only the binary data of X and vFile:pwrite packets, which the
//      handler unescapes with rsp_unescape);
//      a packet whose checksum does not match, or whose cc is not two hex digits, is
//      kBadChecksum with its payload kept (for a diagnostic, or to use anyway once acks are off);
//      a payload longer than kRspMaxPacket bytes is kBadChecksum (with the first kRspMaxPacket
//      bytes) and everything up to the next '$' is skipped.
//    Every other byte between packets is skipped; a '$' inside a packet abandons the packet
//    (nothing is reported for it) and starts a new one, as gdb does.
//  - Hex: to_hex and hex_u64 write lowercase; the parsers take either case. from_hex: EINVAL
//    naming `hex` for an odd length or a non-hex digit. parse_hex_u64: EINVAL naming `hex` for an
//    empty string, a non-hex digit or a value above 2^64-1 (leading zeros are fine). hex_u64 has
//    no leading zeros ("0" for 0). hex_le(value, bytes) is the low `bytes` bytes of `value`
//    least significant first (`bytes` clamped to 0..8), as register values travel.
// Thread-safety: the functions are pure; an RspReader belongs to one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/base/error.h"

namespace hwarb::gdb {

inline constexpr std::size_t kRspMaxPacket = std::size_t{1} << 20;  // payload bytes

[[nodiscard]] std::uint8_t rsp_checksum(std::string_view bytes);
[[nodiscard]] std::string rsp_frame(std::string_view payload);
[[nodiscard]] std::string rsp_escape_binary(std::string_view bytes);
// '}' x becomes x ^ 0x20; a lone '}' at the end (a truncated escape) is dropped.
[[nodiscard]] std::string rsp_unescape(std::string_view bytes);

struct RspItem {
  enum class Kind { kPacket, kAck, kNack, kInterrupt, kBadChecksum };
  Kind kind = Kind::kPacket;
  std::string payload;  // kPacket and kBadChecksum only
  friend bool operator==(const RspItem&, const RspItem&) = default;
};

class RspReader {
 public:
  void feed(std::string_view bytes);
  [[nodiscard]] std::optional<RspItem> next();
  // Takes every interrupt (0x03) parsed and not taken yet out of the items, the others left in
  // their order; whether there was one. (A Ctrl-C read in one read with the resume before it.)
  [[nodiscard]] bool take_interrupts();

 private:
  enum class State { kIdle, kPayload, kSum1, kSum2, kSkip };
  void finish();
  State state_ = State::kIdle;
  std::string payload_;
  char sum_[2] = {0, 0};
  std::deque<RspItem> items_;
};

[[nodiscard]] std::string to_hex(std::span<const std::uint8_t> bytes);
Result<std::vector<std::uint8_t>> from_hex(std::string_view hex);
Result<std::uint64_t> parse_hex_u64(std::string_view hex);
[[nodiscard]] std::string hex_u64(std::uint64_t value);
[[nodiscard]] std::string hex_le(std::uint64_t value, int bytes);

}  // namespace hwarb::gdb
