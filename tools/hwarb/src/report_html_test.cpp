#include "report_html.h"

#include <gtest/gtest.h>

#include <string>

#include "json_reader.h"

namespace hwarb::cli {
namespace {

constexpr std::string_view kRun =
    R"JSON({"event":"watch","expr":"target:w","addr":"0x4010","len":4,"type":"w","placement":"software","why":"no hits delivered","registers":0}
program output line
{"event":"hit","expr":"target:w","tid":11,"ip":"0x1","addr":"0x4010","access":"w","old":"0x0","new":"0x1","time":0.001,"symbol":"set_target+0x4 (writer.c:21)"}
{"event":"hit","expr":"target:w","tid":12,"ip":"0x1","addr":"0x4010","access":"w","old":"0x1","new":"0x2","time":0.002,"symbol":"set_target+0x4 (writer.c:21)"}
{"event":"hit","expr":"target:w","tid":12,"ip":"0x2","addr":"0x4010","access":"w","old":"0x2","new":"0x0","time":0.004,"symbol":"main+0x10 (writer.c:40) <&>"}
{"event":"note","expr":"target:w","text":"unmapped"}
{"event":"summary","hits":{"target:w":3},"mode":"software","method":"page protection (1 page)","target":{"pid":10,"exit":3}}
)JSON";

TEST(ReportHtml, SitesThreadsPlacementsAndNoUrls) {
  auto html = render_report(kRun, "run.json");
  ASSERT_TRUE(html.has_value()) << html.error().to_string();
  const std::string& h = *html;
  EXPECT_NE(h.find("<td><code>set_target+0x4 (writer.c:21)</code></td><td><code>target:w</code>"
                   "</td><td>w</td><td class=\"num\">2</td><td class=\"num\">2</td>"),
            std::string::npos)
      << h;
  EXPECT_NE(h.find("main+0x10 (writer.c:40) &lt;&amp;&gt;"), std::string::npos);
  EXPECT_NE(h.find("<span class=\"software\">software</span></td><td>no hits delivered"),
            std::string::npos);
  EXPECT_NE(h.find(">tid 11 (1)</text>"), std::string::npos);
  EXPECT_NE(h.find(">tid 12 (2)</text>"), std::string::npos);
  EXPECT_NE(h.find("exited with status 3"), std::string::npos);
  EXPECT_NE(h.find("<li>target:w unmapped</li>"), std::string::npos);
  EXPECT_NE(h.find("1 input lines were not records"), std::string::npos);
  EXPECT_NE(h.find("table.sortable"), std::string::npos);
  EXPECT_EQ(h.find("http:"), std::string::npos);
  EXPECT_EQ(h.find("https:"), std::string::npos);
  EXPECT_EQ(h.find("src="), std::string::npos);
}

TEST(ReportHtml, NoRecordsIsAnError) {
  auto html = render_report("hello\n{\"a\":1}\n", "x.json");
  ASSERT_FALSE(html.has_value());
  EXPECT_EQ(html.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(html.error().message().starts_with("no hwarb watch --json records in x.json"));
}

TEST(JsonReader, ValuesAndErrors) {
  auto v = parse_json(R"( {"a":[1,-2.5e1,true,false,null],"s":"x\"\u00e9\ud83d\ude00\n"} )");
  ASSERT_TRUE(v.has_value()) << v.error().message();
  ASSERT_EQ(v->find("a")->items.size(), 5u);
  EXPECT_EQ(v->find("a")->items[1].number, -25);
  EXPECT_EQ(v->string_of("s"), "x\"\xc3\xa9\xf0\x9f\x98\x80\n");
  EXPECT_EQ(parse_json("{\"a\":}").error().message(), "column 6: not a JSON value");
  EXPECT_EQ(parse_json("[1] x").error().message(), "column 5: text after the value");
  EXPECT_FALSE(parse_json(std::string(100, '[') + std::string(100, ']')).has_value());
  EXPECT_FALSE(parse_json("\"a\nb\"").has_value());
}

}  // namespace
}  // namespace hwarb::cli
