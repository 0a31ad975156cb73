#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hwarb/scenario/scenario.h"

namespace hwarb::scenario {
namespace {

using ::testing::ElementsAre;

Result<std::vector<std::string>> run_text(std::string_view text) {
  auto s = parse_scenario(text, "g.scn");
  if (!s) return std::unexpected(s.error());
  return run_scenario(*s, {});
}

std::string parse_error(std::string_view text) {
  auto s = parse_scenario(text, "g.scn");
  return s ? "" : s.error().message();
}

TEST(ScenarioGuest, ParsesRegistersAccessesAndRestore) {
  auto s = parse_scenario(
      "task t\nswitch cpu=1 task=t\nguest enter cpu=1 dr2=0x30 dr7=0x10\n"
      "guest access cpu=1 x addr=0x30\nguest access cpu=1 w addr=0x8 len=8\n"
      "guest exit cpu=1 restore=tif_debug\n",
      "g.scn");
  ASSERT_TRUE(s) << s.error().message();
  const auto& c = s->commands;
  ASSERT_EQ(c.size(), 6u);
  EXPECT_EQ(c[2].kind, CommandKind::kGuestEnter);
  EXPECT_EQ(c[2].guest_dr[2], 0x30u);
  EXPECT_EQ(c[2].guest_dr[0], 0u);
  EXPECT_EQ(c[2].guest_dr7, 0x10u);
  EXPECT_TRUE(c[3].guest_exec);
  EXPECT_FALSE(c[4].guest_exec);
  EXPECT_TRUE(c[4].write);
  EXPECT_EQ(c[4].len, 8u);
  EXPECT_TRUE(c[5].guest_tif_debug);
}

TEST(ScenarioGuest, SyntaxErrorsNameTheCommand) {
  EXPECT_EQ(parse_error("guest enter dr7=0x1\n"), "g.scn:1: guest enter: cpu= is required");
  EXPECT_EQ(parse_error("guest enter cpu=any\n"),
            "g.scn:1: guest enter: expected a CPU number, not any");
  EXPECT_EQ(parse_error("guest enter cpu=0 dr7=xyz\n"),
            "g.scn:1: guest enter: bad dr7 'xyz' (expected a 64-bit hex number)");
  EXPECT_EQ(parse_error("guest access cpu=0 r\n"), "g.scn:1: guest access: addr= is required");
  EXPECT_EQ(parse_error("guest access cpu=0 r addr=0x10 len=3\n"),
            "g.scn:1: guest access: bad len 3 (expected 1, 2, 4 or 8)");
  EXPECT_EQ(parse_error("guest access cpu=0 w addr=0xfffffffffffffffe len=4\n"),
            "g.scn:1: guest access: addr 0xfffffffffffffffe + len 4 wraps past 2^64");
  EXPECT_EQ(parse_error("guest exit cpu=0 restore=some\n"),
            "g.scn:1: guest exit: bad restore 'some' (expected all or tif_debug)");
  EXPECT_TRUE(parse_error("machine arch=arm64\nguest exit cpu=0\n")
                  .starts_with("g.scn:2: guest exit: arch arm64 models slot accounting only"));
}

TEST(ScenarioGuest, GuestHitsAndHostHits) {
  auto out = run_text(
      "task t\nswitch cpu=0 task=t\nbp h cpu=0 type=w len=4 addr=0x100\n"
      "guest enter cpu=0 dr0=0x100 dr7=0xf0001\n"
      "guest access cpu=0 r addr=0x102 len=2\nguest access cpu=0 r addr=0x200\n"
      "guest exit cpu=0\naccess task=t cpu=0 w addr=0x100 len=4\n"
      "access task=t cpu=0 r addr=0x100 len=4\n");
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_THAT(
      *out,
      ElementsAre("h ok", "guest enter cpu=0 ok", "guest hit cpu=0 addr=0x102 access=r dr6=0x1",
                  "guest exit cpu=0 ok", "hit h task=t cpu=0 ip=0x0 addr=0x100 access=w"));
}

TEST(ScenarioGuest, HostWorkOnTheGuestCpuIsARunTimeError) {
  for (const char* work :
       {"exit t", "exec task=t cpu=0 addr=0x10", "branch task=t cpu=0 from=0x1 to=0x2",
        "run task=t cpu=0 branches=1 seed=1"}) {
    auto out =
        run_text(std::string("task t\nswitch cpu=0 task=t\nguest enter cpu=0\n") + work + "\n");
    ASSERT_FALSE(out) << work;
    EXPECT_FALSE(is_internal_error(out.error())) << out.error().message();
    EXPECT_NE(out.error().message().find("g.scn:4: "), std::string::npos);
    EXPECT_NE(out.error().message().find("cpu 0 is running a guest"), std::string::npos);
  }
  // After the exit, and on other CPUs meanwhile, the host works.
  auto out = run_text(
      "task t\ntask u\nswitch cpu=0 task=t\nguest enter cpu=0\nswitch cpu=1 task=u\ntick\n"
      "guest exit cpu=0\nswitch cpu=0 task=idle\nexit t\n");
  ASSERT_TRUE(out) << out.error().message();
}

}  // namespace
}  // namespace hwarb::scenario
