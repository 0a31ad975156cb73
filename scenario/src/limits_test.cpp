// The limits of the scenario language (scenario.h, Limits) and the bad input they stop: each
// case here is one a mutation fuzzer found (an abort out of memory, minutes of work, an
// internal error, exit 0 on an unreadable file).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "hwarb/scenario/scenario.h"

namespace hwarb::scenario {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kSlow = 20;
#else
constexpr double kSlow = 1;
#endif

std::string parse_error(std::string_view text, const Limits& limits = {}) {
  auto s = parse_scenario(text, "t.scn", limits);
  EXPECT_FALSE(s.has_value());
  return s ? "" : s.error().message();
}

std::string repeat(std::string_view line, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += line;
  return s;
}

// n lines made by `line(i)`, i = 1 .. n.
template <typename F>
std::string lines(int n, F line) {
  std::string s;
  for (int i = 1; i <= n; ++i) s += line(i) + "\n";
  return s;
}

struct Timed {
  std::vector<std::string> lines;
  double seconds = 0;
};
Timed run_timed(std::string_view text) {
  const auto start = std::chrono::steady_clock::now();
  Timed t;
  auto s = parse_scenario(text, "t.scn");
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().message());
  if (s) {
    auto out = run_scenario(*s, {});
    EXPECT_TRUE(out.has_value()) << (out ? "" : out.error().to_string());
    if (out) t.lines = std::move(*out);
  }
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return t;
}

// ---- reading the file ----

TEST(Input, ADirectoryIsUnreadable) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  auto t = read_scenario_file(dir);
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().message(), "cannot read " + dir + ": Is a directory");
}

TEST(Input, AReadErrorIsUnreadable) {
  auto t = read_scenario_file("/proc/self/mem");
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().message(), "cannot read /proc/self/mem: Input/output error");
  auto missing = read_scenario_file("/nonexistent/x.scn");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().message(), "cannot read /nonexistent/x.scn: No such file or directory");
}

TEST(Input, AnEndlessFileIsReadUpToTheLimitAndRefusedAtItsLine) {
  auto t = read_scenario_file("/dev/zero");
  ASSERT_TRUE(t.has_value()) << t.error().message();
  EXPECT_EQ(t->size(), Limits{}.file_bytes + 1);
  EXPECT_EQ(parse_error(*t), "t.scn:1: line longer than the limit of 4096 bytes");
}

// ---- the size of the file ----

TEST(Limits, FileSize) {
  Limits l;
  l.file_bytes = 20;
  EXPECT_TRUE(parse_scenario("task a\ntask b\ntask c", "t.scn", l).has_value());  // 20 bytes
  // Byte 20 is line 3's newline.
  EXPECT_EQ(parse_error("task a\ntask b\ntask c\ntask d\n", l),
            "t.scn:3: file longer than the limit of 20 bytes");
}

TEST(Limits, LineCount) {
  EXPECT_TRUE(parse_scenario(repeat("\n", 100'000), "t.scn").has_value());
  EXPECT_EQ(parse_error(repeat("\n", 100'001)), "t.scn:100001: over the limit of 100000 lines");
}

TEST(Limits, LineLength) {
  const std::string longest = "#" + std::string(4095, 'x');
  EXPECT_TRUE(parse_scenario(longest + "\n" + longest, "t.scn").has_value());
  EXPECT_EQ(parse_error("task t\n" + longest + "x\n"),
            "t.scn:2: line longer than the limit of 4096 bytes");
}

// ---- syntax ----

TEST(Syntax, OnlySpacesAndTabsSeparateWords) {
  const std::string why = " (words are separated by spaces and tabs only)";
  EXPECT_EQ(parse_error("bp\va cpu=0\n"), "t.scn:1: bad character 0xb at column 3" + why);
  EXPECT_EQ(parse_error("bp a\fcpu=0\n"), "t.scn:1: bad character 0xc at column 5" + why);
  EXPECT_EQ(parse_error("bp a\rcpu=0\n"), "t.scn:1: bad character 0xd at column 5" + why);
  EXPECT_EQ(parse_error(std::string("bp a cpu=0\0\n", 12)),
            "t.scn:1: bad character 0x0 at column 11" + why);
  EXPECT_EQ(parse_error("bp a cpu=0\x7f\n"), "t.scn:1: bad character 0x7f at column 11" + why);
  // Tabs, a CR LF line end and anything in a comment are fine.
  auto s = parse_scenario("bp\ta \t cpu=0\r\nbp b cpu=1 # \v\f\r\x01\n", "t.scn");
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->commands.size(), 2u);
}

// ---- values ----

TEST(Values, WeightAndEnomemNameTheirRange) {
  EXPECT_EQ(parse_error("bp a cpu=0 weight=4294967297\n"),
            "t.scn:1: bp: bad weight '4294967297' (expected 1 .. 2147483647)");
  EXPECT_EQ(parse_error("bp a cpu=0 weight=2147483648\n"),
            "t.scn:1: bp: bad weight '2147483648' (expected 1 .. 2147483647)");
  EXPECT_EQ(parse_error("inject enomem=0\n"),
            "t.scn:1: inject: bad enomem '0' (expected 1 .. 2147483647)");
  auto s = parse_scenario("bp a cpu=0 weight=2147483647\n", "t.scn");
  ASSERT_TRUE(s.has_value()) << s.error().message();
  EXPECT_EQ(s->commands[0].weight, 2147483647);
}

TEST(Values, AnAccessThatWrapsPast2To64IsAScenarioError) {
  const std::string head = "machine cpus=1\ntask t\nswitch cpu=0 task=t\n";
  EXPECT_EQ(parse_error(head + "access task=t cpu=0 w addr=0xffffffffffffffff len=8\n"),
            "t.scn:4: access: addr 0xffffffffffffffff + len 8 wraps past 2^64");
  EXPECT_EQ(parse_error(head + "access task=t cpu=0 r addr=0xfffffffffffffffe len=4\n"),
            "t.scn:4: access: addr 0xfffffffffffffffe + len 4 wraps past 2^64");
  // The last byte is fine.
  EXPECT_TRUE(
      run_timed(head + "access task=t cpu=0 w addr=0xffffffffffffffff len=1\n").lines.empty());
}

// ---- what a scenario may ask for ----

TEST(Limits, WatchLength) {
  EXPECT_EQ(parse_error("task t\nwatch w task=t addr=0x1000 len=4294967295\n"),
            "t.scn:2: watch: len 4294967295 is over the limit of 1048576 bytes");
  // The longest watch is refused for registers, in time linear in its 131072 pieces.
  const Timed t = run_timed("task t\nwatch w task=t addr=0x1000 len=1048576\n");
  EXPECT_EQ(t.lines, std::vector<std::string>{"w ENOSPC"});
  EXPECT_LT(t.seconds, 5 * kSlow);
}

TEST(Limits, Branches) {
  const std::string head = "machine cpus=1\ntask t\nswitch cpu=0 task=t\n";
  EXPECT_EQ(parse_error(head + "run task=t cpu=0 branches=18446744073709551615 seed=1\n"),
            "t.scn:4: run: over the limit of 16777216 branches in a scenario (this line needs "
            "18446744073709551615, the lines before it used 0)");
  EXPECT_EQ(parse_error(head + "run task=t cpu=0 branches=10000000 seed=1\n"
                               "run task=t cpu=0 branches=10000000 seed=2\n"),
            "t.scn:5: run: over the limit of 16777216 branches in a scenario (this line needs "
            "10000000, the lines before it used 10000000)");
}

TEST(Limits, WideTimesCpus) {
  // Each wide is one event per CPU: 8 of them on 65536 CPUs fill the 524288 events.
  const std::string text =
      "machine cpus=65536\n" + lines(100, [](int i) { return "wide w" + std::to_string(i); });
  EXPECT_EQ(parse_error(text),
            "t.scn:10: wide: over the limit of 524288 breakpoint events in a scenario (this line "
            "needs 65536, the lines before it used 524288)");
}

TEST(Limits, CpuSteps) {
  // A show at 65536 CPUs is 65536 lines: 16 of them are the limit.
  const std::string text = "machine cpus=65536\n" + repeat("show\n", 17);
  EXPECT_EQ(parse_error(text),
            "t.scn:18: show: over the limit of 1048576 CPU steps in a scenario (this line needs "
            "65536, the lines before it used 1048576)");
  EXPECT_EQ(
      parse_error(
          "machine cpus=65536\ntask t\n" +
          lines(17, [](int i) { return "bp b" + std::to_string(i) + " task=t cpu=any flexible"; })),
      "t.scn:19: bp: over the limit of 1048576 CPU steps in a scenario (this line needs "
      "65536, the lines before it used 1048576)");
}

TEST(Limits, FlexibleBreakpoints) {
  // 200000 flexible breakpoints took minutes (perf core: each install walked the CPU's flexible
  // list); the 5001st is refused before anything runs.
  const auto start = std::chrono::steady_clock::now();
  const std::string error = parse_error(
      lines(200'000, [](int i) { return "bp b" + std::to_string(i) + " cpu=0 flexible"; }));
  EXPECT_EQ(error,
            "t.scn:5001: bp: over the limit of 5000 flexible breakpoints in a scenario (this "
            "line needs 1, the lines before it used 5000)");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
            2 * kSlow);
}

TEST(Limits, InheritedCopiesCountAtEachFork) {
  const std::string text =
      "task t\n" +
      lines(2500,
            [](int i) { return "bp b" + std::to_string(i) + " task=t cpu=0 flexible inherit"; }) +
      "fork c1 parent=t\nfork c2 parent=t\n";
  EXPECT_EQ(parse_error(text),
            "t.scn:2503: fork: over the limit of 5000 flexible breakpoints in a scenario (this "
            "line needs 2500, the lines before it used 5000)");
}

TEST(Limits, BtsBuffers) {
  EXPECT_EQ(parse_error("task t\nbts open c task=t size=1073741808\n"),
            "t.scn:2: bts open: over the limit of 268435456 bytes of BTS buffers in a scenario "
            "(this line needs 1073741808, the lines before it used 0)");
  // A size the tracer refuses (above its maximum) allocates nothing: EINVAL, as before.
  EXPECT_EQ(run_timed("task t\nbts open c task=t size=2000000000\n").lines,
            std::vector<std::string>{"c EINVAL"});
  // A perf BTS event holds 98304 bytes of AUX area.
  const std::string events =
      "task t\n" + lines(2731, [](int i) { return "bts b" + std::to_string(i) + " task=t"; });
  EXPECT_EQ(parse_error(events),
            "t.scn:2732: bts: over the limit of 268435456 bytes of BTS buffers in a scenario "
            "(this line needs 98304, the lines before it used 268369920)");
}

TEST(Limits, OutputIsARunTimeScenarioError) {
  Limits l;
  l.output_bytes = 100;
  auto s = parse_scenario("bp a cpu=0\nshow\nshow\n", "t.scn", l);
  ASSERT_TRUE(s.has_value()) << s.error().message();
  auto out = run_scenario(*s, {});
  ASSERT_FALSE(out.has_value());
  EXPECT_FALSE(is_internal_error(out.error()));
  EXPECT_EQ(out.error().message(), "t.scn:2: show: output over the limit of 100 bytes");
}

// Within the limits, the costliest patterns stay linear: a full flexible list under every tick,
// under every install, under every context switch.
TEST(Cost, TheWorstCasesWithinTheLimitsRunInBoundedTime) {
  const std::string flexible = "machine cpus=1\ntask t\n" + lines(999, [](int i) {
                                 return "bp f" + std::to_string(i) + " cpu=0 flexible";
                               });
  const Timed ticks = run_timed(flexible + repeat("tick\n", 98'000));
  EXPECT_EQ(ticks.lines.size(), 999u);
  EXPECT_LT(ticks.seconds, 10 * kSlow);
  const Timed installs = run_timed(flexible + repeat("bp p cpu=0\ndel p\n", 49'000));
  EXPECT_EQ(installs.lines.size(), 999u + 49'000u);
  EXPECT_LT(installs.seconds, 10 * kSlow);
  const Timed switches =
      run_timed(flexible + repeat("switch cpu=0 task=t\nswitch cpu=0 task=idle\n", 49'000));
  EXPECT_LT(switches.seconds, 10 * kSlow);
}

}  // namespace
}  // namespace hwarb::scenario
