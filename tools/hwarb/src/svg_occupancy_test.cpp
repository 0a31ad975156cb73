#include "svg_occupancy.h"

#include <gtest/gtest.h>

#include <string>

#include "hwarb/scenario/scenario.h"

namespace hwarb::cli {
namespace {

std::string svg_of(std::string_view text) {
  auto s = scenario::parse_scenario(text, "t.scn");
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().message());
  if (!s) return "";
  OccupancyChart chart;
  scenario::RunOptions options;
  options.on_step = [&](const scenario::SlotStep& step) { chart.add(step); };
  auto lines = scenario::run_scenario(*s, options);
  EXPECT_TRUE(lines.has_value());
  return chart.svg("t.scn");
}

std::size_t count(const std::string& text, std::string_view what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(OccupancyChart, RotationsAreSeparateRects) {
  // One register left for two flexible events: each tick swaps them.
  const std::string svg = svg_of(
      "machine cpus=1\ntask t\nbp p1 task=t cpu=any\nbp p2 task=t cpu=any\nbp p3 task=t cpu=any\n"
      "bp f1 task=t cpu=any flexible\nbp f2 task=t cpu=any flexible\nswitch cpu=0 task=t\n"
      "tick\ntick\ntick\n");
  EXPECT_EQ(count(svg, "<title>f1: "), 2u) << svg;  // lines 8 and 10
  EXPECT_EQ(count(svg, "<title>f2: "), 2u);         // lines 9 and 11
  EXPECT_NE(svg.find("<title>f1: line 8</title>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("<title>f2: line 9</title>"), std::string::npos);
  EXPECT_NE(svg.find("<title>f1: line 10</title>"), std::string::npos);
  EXPECT_NE(svg.find("<title>f2: line 11 to the end</title>"), std::string::npos);
  EXPECT_EQ(count(svg, "stroke-dasharray"), 3u);  // the ticks
  EXPECT_EQ(count(svg, ">DR0<"), 1u);
  EXPECT_EQ(count(svg, ">BTS<"), 1u);
}

TEST(OccupancyChart, RefusalsCarryTheirReasonOnTheirCpu) {
  const std::string svg = svg_of(
      "machine cpus=2\nbp a cpu=1\nbp b cpu=1\nbp c cpu=1\nbp d cpu=1\nbp e cpu=1\n"
      "task app\nbts t1 task=app cpu=any\npt t2 cpu=0\n");
  EXPECT_NE(svg.find("<title>e ENOSPC — cpu 1 shared pool: 4 slots; held: cpu-bound 4 (a, b, c, "
                     "d); needs 1 (line 6)</title>"),
            std::string::npos)
      << svg;
  EXPECT_NE(svg.find("<title>t2 EBUSY — bts in use by t1 (line 9)</title>"), std::string::npos);
  EXPECT_EQ(count(svg, "class=\"refusal\""), 2u);  // each on its one CPU
  EXPECT_NE(svg.find("<title>bts t1: line 8 to the end</title>"), std::string::npos);
  EXPECT_EQ(count(svg, "<title>bts t1: "), 2u);  // on both CPUs
  EXPECT_EQ(count(svg, ">BTS/PT/LBR<"), 0u);     // t2 was refused: no PT holder
}

TEST(OccupancyChart, OfflineCpusAreGrey) {
  const std::string svg = svg_of("machine cpus=2\ncpu 1 offline\nbp xy cpu=0\ncpu 1 online\n");
  EXPECT_EQ(count(svg, "class=\"offline\""), 1u) << svg;
}

TEST(OccupancyChart, SameStepsSameBytes) {
  const std::string text = "machine cpus=2\nbp a cpu=0\nbp b cpu=1 flexible\ntick\n";
  EXPECT_EQ(svg_of(text), svg_of(text));
}

}  // namespace
}  // namespace hwarb::cli
