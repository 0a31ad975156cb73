#include "hwarb/gdb/rsp.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hwarb::gdb {
namespace {

using Kind = RspItem::Kind;

std::vector<RspItem> drain(RspReader& r) {
  std::vector<RspItem> items;
  while (auto item = r.next()) items.push_back(std::move(*item));
  return items;
}

RspItem packet(std::string payload) {
  return RspItem{Kind::kPacket, std::move(payload)};
}
RspItem bad(std::string payload) {
  return RspItem{Kind::kBadChecksum, std::move(payload)};
}
RspItem ack() {
  return RspItem{Kind::kAck, {}};
}
RspItem nack() {
  return RspItem{Kind::kNack, {}};
}
RspItem interrupt() {
  return RspItem{Kind::kInterrupt, {}};
}

TEST(Rsp, ChecksumIsTheByteSumModulo256) {
  EXPECT_EQ(rsp_checksum(""), 0);
  EXPECT_EQ(rsp_checksum("OK"), 0x9a);
  EXPECT_EQ(rsp_checksum("g"), 0x67);
  EXPECT_EQ(rsp_checksum(std::string(3, '\xff')), 0xfd);
}

TEST(Rsp, FramesWithLowercaseChecksum) {
  EXPECT_EQ(rsp_frame("OK"), "$OK#9a");
  EXPECT_EQ(rsp_frame(""), "$#00");
  EXPECT_EQ(rsp_frame("S05"), "$S05#b8");
  EXPECT_EQ(rsp_frame("qSupported:multiprocess+;swbreak+"),
            "$qSupported:multiprocess+;swbreak+#" +
                std::string(hex_le(rsp_checksum("qSupported:multiprocess+;swbreak+"), 1)));
}

TEST(Rsp, FrameEscapesTheFourSpecialBytesAndSumsTheEscapedOnes) {
  // '$' 0x24 -> '}' 0x04, '#' 0x23 -> '}' 0x03, '}' 0x7d -> '}' ']', '*' 0x2a -> '}' '\n'.
  const std::string escaped = std::string("a}\x04}\x03}]}\x0a") + "b";
  EXPECT_EQ(rsp_escape_binary("a$#}*b"), escaped);
  EXPECT_EQ(rsp_frame("a$#}*b"), "$" + escaped + "#" + hex_le(rsp_checksum(escaped), 1));
  EXPECT_EQ(rsp_unescape(escaped), "a$#}*b");
  EXPECT_EQ(rsp_unescape("abc"), "abc");
  EXPECT_EQ(rsp_unescape("ab}"), "ab");  // a truncated escape is dropped
}

TEST(Rsp, EscapeRoundTripsEveryByte) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  const std::string escaped = rsp_escape_binary(all);
  EXPECT_EQ(escaped.size(), 256u + 4u);
  for (char c : std::string_view(escaped)) {
    EXPECT_NE(c, '$');
    EXPECT_NE(c, '#');
    EXPECT_NE(c, '*');
  }
  EXPECT_EQ(rsp_unescape(escaped), all);
}

TEST(Rsp, ReaderRoundTripsFramesKeepingEscapes) {
  RspReader r;
  r.feed(rsp_frame("OK"));
  r.feed(rsp_frame("X1000,4:a$#}"));
  auto items = drain(r);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0], packet("OK"));
  EXPECT_EQ(items[1].kind, Kind::kPacket);
  EXPECT_EQ(items[1].payload, rsp_escape_binary("X1000,4:a$#}"));
  EXPECT_EQ(rsp_unescape(items[1].payload), "X1000,4:a$#}");
  EXPECT_FALSE(r.next());
}

TEST(Rsp, AcksNacksAndInterruptsBetweenPackets) {
  RspReader r;
  r.feed("+");
  r.feed("$g#67-\x03+");
  auto items = drain(r);
  ASSERT_EQ(items.size(), 5u);
  EXPECT_EQ(items[0], ack());
  EXPECT_EQ(items[1], packet("g"));
  EXPECT_EQ(items[2], nack());
  EXPECT_EQ(items[3], interrupt());
  EXPECT_EQ(items[4], ack());
}

TEST(Rsp, ControlBytesInsideAPacketArePayload) {
  const std::string payload = std::string("X0,3:+-\x03");
  RspReader r;
  r.feed("$" + payload + "#" + hex_le(rsp_checksum(payload), 1));
  auto items = drain(r);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0], packet(payload));
}

TEST(Rsp, PacketsSplitAtEveryByte) {
  const std::string wire = "+" + rsp_frame("vCont;c") + rsp_frame("m7fff0000,40") + "\x03";
  RspReader r;
  std::vector<RspItem> items;
  for (char c : wire) {
    r.feed(std::string_view(&c, 1));
    for (auto i = drain(r); auto& item : i) items.push_back(std::move(item));
  }
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[0], ack());
  EXPECT_EQ(items[1], packet("vCont;c"));
  EXPECT_EQ(items[2], packet("m7fff0000,40"));
  EXPECT_EQ(items[3], interrupt());
}

TEST(Rsp, NothingIsReturnedUntilTheChecksumIsComplete) {
  RspReader r;
  r.feed("$OK");
  EXPECT_FALSE(r.next());
  r.feed("#");
  EXPECT_FALSE(r.next());
  r.feed("9");
  EXPECT_FALSE(r.next());
  r.feed("a");
  EXPECT_EQ(r.next(), packet("OK"));
  EXPECT_FALSE(r.next());
}

TEST(Rsp, WrongOrMalformedChecksumIsBadChecksumWithThePayload) {
  RspReader r;
  r.feed("$OK#9b$OK#9A$OK#zz$OK#9a");
  auto items = drain(r);
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[0], bad("OK"));
  EXPECT_EQ(items[1], packet("OK"));  // uppercase digits are accepted
  EXPECT_EQ(items[2], bad("OK"));
  EXPECT_EQ(items[3], packet("OK"));
}

TEST(Rsp, GarbageBetweenPacketsIsSkipped) {
  RspReader r;
  r.feed("junk\r\n#00 9a");
  r.feed(rsp_frame("s") + "trailing" + rsp_frame("c"));
  auto items = drain(r);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0], packet("s"));
  EXPECT_EQ(items[1], packet("c"));
}

TEST(Rsp, ADollarInsideAPacketStartsANewOne) {
  RspReader r;
  r.feed("$mbroken");
  r.feed("$g#67");
  auto items = drain(r);
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0], packet("g"));
}

TEST(Rsp, APacketAtTheLimitIsAcceptedOneByteMoreIsNot) {
  const std::string at_limit(kRspMaxPacket, 'a');
  RspReader r;
  r.feed(rsp_frame(at_limit));
  auto first = r.next();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->kind, Kind::kPacket);
  EXPECT_EQ(first->payload.size(), kRspMaxPacket);

  // Too long, in pieces; the rest of it (with bytes that would be acks between packets) is
  // skipped up to the next '$'.
  const std::string too_long = "$" + std::string(kRspMaxPacket - 10, 'b');
  r.feed(too_long);
  EXPECT_FALSE(r.next());
  r.feed(std::string(20, 'c') + "+-\x03#00+");
  auto second = r.next();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->kind, Kind::kBadChecksum);
  EXPECT_EQ(second->payload.size(), kRspMaxPacket);
  EXPECT_FALSE(r.next());
  r.feed(rsp_frame("?") + "+");
  auto items = drain(r);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0], packet("?"));
  EXPECT_EQ(items[1], ack());
}

TEST(Rsp, ExactlyAtTheLimitAcrossFeedsThenOverflow) {
  RspReader r;
  r.feed("$" + std::string(kRspMaxPacket, 'a'));  // full, no '#' yet
  EXPECT_FALSE(r.next());
  r.feed("x$g#67");  // one byte over: bad, then resync at '$'
  auto items = drain(r);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].kind, Kind::kBadChecksum);
  EXPECT_EQ(items[1], packet("g"));
}

TEST(Rsp, HexBytes) {
  const std::vector<std::uint8_t> bytes = {0x00, 0x01, 0xab, 0xff, 0x7f};
  EXPECT_EQ(to_hex(bytes), "0001abff7f");
  EXPECT_EQ(to_hex({}), "");
  auto back = from_hex("0001ABff7f");
  ASSERT_TRUE(back) << back.error().to_string();
  EXPECT_EQ(*back, bytes);
  auto empty = from_hex("");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());

  auto odd = from_hex("abc");
  ASSERT_FALSE(odd);
  EXPECT_EQ(odd.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(odd.error().message().starts_with("hex: ")) << odd.error().to_string();
  auto digit = from_hex("0g");
  ASSERT_FALSE(digit);
  EXPECT_EQ(digit.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(digit.error().message().starts_with("hex: ")) << digit.error().to_string();
}

TEST(Rsp, HexNumbers) {
  EXPECT_EQ(hex_u64(0), "0");
  EXPECT_EQ(hex_u64(0x1f), "1f");
  EXPECT_EQ(hex_u64(0x7fff12345678), "7fff12345678");
  EXPECT_EQ(hex_u64(~std::uint64_t{0}), "ffffffffffffffff");

  for (std::uint64_t v : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{0xdeadbeef},
                          ~std::uint64_t{0}, std::uint64_t{1} << 63}) {
    auto parsed = parse_hex_u64(hex_u64(v));
    ASSERT_TRUE(parsed);
    EXPECT_EQ(*parsed, v);
  }
  EXPECT_EQ(parse_hex_u64("00000000000000000000FF").value_or(0), 0xffu);
  EXPECT_EQ(parse_hex_u64("DeadBeef").value_or(0), 0xdeadbeefu);
  for (std::string_view bad_input : {"", "x", "12 ", "-1", "10000000000000000", "0x10"}) {
    auto r = parse_hex_u64(bad_input);
    ASSERT_FALSE(r) << bad_input;
    EXPECT_EQ(r.error().code(), ErrorCode::kInval);
    EXPECT_TRUE(r.error().message().starts_with("hex: ")) << r.error().to_string();
  }
}

TEST(Rsp, HexLittleEndian) {
  EXPECT_EQ(hex_le(0x0011223344556677, 8), "7766554433221100");
  EXPECT_EQ(hex_le(0x401000, 8), "0010400000000000");
  EXPECT_EQ(hex_le(0x246, 4), "46020000");
  EXPECT_EQ(hex_le(0xabcd, 2), "cdab");
  EXPECT_EQ(hex_le(0xff, 1), "ff");
  EXPECT_EQ(hex_le(0xff, 0), "");
  EXPECT_EQ(hex_le(1, 12), "0100000000000000");  // clamped to 8 bytes
}

}  // namespace
}  // namespace hwarb::gdb
