#include "hwarb/linux/probe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/user.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include "hwarb/linux/fd.h"
#include "hwarb/linux/stopped_child.h"
#include "hwarb/linux/syscalls.h"
#include "test_support.h"

namespace hwarb::native {
namespace {

using ::testing::HasSubstr;

alignas(8) std::uint64_t g_watched = 0;

bool sysfs(const char* device) {
  return std::filesystem::exists(std::string("/sys/bus/event_source/devices/") + device);
}

std::optional<int> read_int(const char* path) {
  std::ifstream in(path);
  int v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

// probe() once for the suite (it forks and counts; the answers do not change).
class ProbeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto r = probe();
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    report_ = new ProbeReport(std::move(*r));
  }
  static void TearDownTestSuite() {
    delete report_;
    report_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(report_, nullptr); }
  static const ProbeReport& report() { return *report_; }

 private:
  static inline ProbeReport* report_ = nullptr;
};

TEST_F(ProbeTest, SysfsAndProcFindingsMatchTheFiles) {
  EXPECT_EQ(report().breakpoint_pmu, sysfs("breakpoint"));
  EXPECT_EQ(report().intel_bts, sysfs("intel_bts"));
  EXPECT_EQ(report().intel_pt, sysfs("intel_pt"));
  EXPECT_EQ(report().perf_event_paranoid, read_int("/proc/sys/kernel/perf_event_paranoid"));
  EXPECT_EQ(report().ptrace_scope, read_int("/proc/sys/kernel/yama/ptrace_scope"));
}

TEST_F(ProbeTest, SlotCountMatchesOpeningEventsDirectly) {
  auto child = StoppedChild::spawn();
  if (!child && testing::refused(child.error())) {
    GTEST_SKIP() << testing::skip_reason("tracing a child", child.error());
  }
  ASSERT_TRUE(child.has_value()) << child.error().to_string();
  std::vector<Fd> held;
  std::optional<Error> end;
  while (held.size() < 64) {
    auto fd = perf_breakpoint_open(child->pid(), reinterpret_cast<std::uint64_t>(&g_watched), 8,
                                   BpType::kW);
    if (!fd) {
      end = fd.error();
      break;
    }
    held.push_back(std::move(*fd));
  }
  EXPECT_EQ(report().breakpoint_slots, static_cast<int>(held.size()));
  if (report().breakpoint_pmu && !held.empty()) {
    EXPECT_GT(report().breakpoint_slots, 0);
    ASSERT_TRUE(end.has_value());
    EXPECT_EQ(report().slots_error, errno_name(end->code()));
  }
  if (held.empty()) {
    EXPECT_FALSE(report().slots_error.empty());
  }
}

TEST_F(ProbeTest, HitsVerdictFollowsTheCanaryCounts) {
  const ProbeReport& r = report();
  EXPECT_EQ(r.hits_delivered, r.canary_writes > 0 && r.canary_hits == r.canary_writes);
  if (r.breakpoint_slots > 0) {
    EXPECT_EQ(r.canary_writes, kCanaryWrites);
    EXPECT_LE(r.canary_hits, r.canary_writes);
  } else {
    EXPECT_EQ(r.canary_writes, 0u);
    EXPECT_FALSE(r.hits_delivered);
  }
  if (r.breakpoint_slots > 0 && !r.hits_delivered) {
    bool noted = false;
    for (const std::string& n : r.notes) noted |= n.find("hits are not delivered") != n.npos;
    EXPECT_TRUE(noted);
  }
}

TEST_F(ProbeTest, SingleStepWorksWhereTracingIsAllowed) {
  const ProbeReport& r = report();
  if (!r.ptrace_allowed) {
    EXPECT_FALSE(r.singlestep_works);
    EXPECT_FALSE(r.singleblock_steps_blocks);
    return;
  }
  EXPECT_TRUE(r.singlestep_works);
  EXPECT_FALSE(r.singleblock_detail.empty());
  EXPECT_EQ(r.singleblock_steps_blocks, r.singleblock_detail.starts_with("reached"))
      << r.singleblock_detail;
}

TEST_F(ProbeTest, JsonIsOneObjectWithEveryKey) {
  const std::string json = probe_to_json(report());
  EXPECT_EQ(json.find('\n'), std::string::npos);
  ASSERT_FALSE(json.empty());
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
  for (const char* key :
       {"perf_event_paranoid", "breakpoint_pmu", "breakpoint_slots", "slots_error",
        "hits_delivered", "canary_writes", "canary_hits", "canary_runs", "intel_bts", "intel_pt",
        "ptrace_scope", "ptrace_allowed", "singlestep_works", "singleblock_steps_blocks",
        "singleblock_detail", "notes"}) {
    EXPECT_THAT(json, HasSubstr(std::string("\"") + key + "\":")) << key;
  }
  EXPECT_THAT(json, HasSubstr("\"breakpoint_slots\":" + std::to_string(report().breakpoint_slots)));
  EXPECT_THAT(json, HasSubstr(std::string("\"hits_delivered\":") +
                              (report().hits_delivered ? "true" : "false")));
}

ProbeReport synthetic() {
  ProbeReport r;
  r.perf_event_paranoid = 2;
  r.breakpoint_pmu = true;
  r.breakpoint_slots = 4;
  r.slots_error = "ENOSPC";
  r.canary_writes = 1000;
  r.canary_hits = 0;
  r.ptrace_allowed = true;
  r.singlestep_works = true;
  r.singleblock_detail = "stopped after 1 instruction of a 5-instruction block";
  r.notes = {"a \"quoted\"\nnote\\"};
  return r;
}

TEST(ProbeFormat, JsonEscapesStringsAndWritesNulls) {
  ProbeReport r = synthetic();
  r.perf_event_paranoid.reset();
  const std::string json = probe_to_json(r);
  EXPECT_EQ(json.find('\n'), std::string::npos);
  EXPECT_THAT(json, HasSubstr("\"perf_event_paranoid\":null"));
  EXPECT_THAT(json, HasSubstr("\"ptrace_scope\":null"));
  EXPECT_THAT(json, HasSubstr("\"notes\":[\"a \\\"quoted\\\"\\nnote\\\\\"]"));
  EXPECT_THAT(json, HasSubstr("\"canary_writes\":1000,\"canary_hits\":0"));
}

TEST(ProbeFormat, TextNamesEachFindingAndTheChosenPaths) {
  ProbeReport r = synthetic();
  std::string text = probe_to_text(r);
  EXPECT_THAT(text, HasSubstr("breakpoint PMU: yes (4 slots per thread)\n"));
  EXPECT_THAT(text, HasSubstr("hits delivered: NO (0 of 1000 canary writes)\n"));
  EXPECT_THAT(text, HasSubstr("BTS: no\n"));
  EXPECT_THAT(text, HasSubstr("intel_pt: no\n"));
  EXPECT_THAT(text, HasSubstr("ptrace: allowed (yama ptrace_scope: absent)\n"));
  EXPECT_THAT(text, HasSubstr("PTRACE_SINGLEBLOCK: steps single instructions, not blocks\n"));
  EXPECT_THAT(text, HasSubstr("watch: software"));
  EXPECT_THAT(text, HasSubstr("trace: software"));

  r.canary_hits = 1000;
  r.hits_delivered = true;
  r.intel_bts = true;
  r.ptrace_scope = 1;
  r.singleblock_steps_blocks = true;
  text = probe_to_text(r);
  EXPECT_THAT(text, HasSubstr("hits delivered: yes (1000 of 1000 canary writes)\n"));
  EXPECT_THAT(text, HasSubstr("watch: hardware (perf breakpoints, 4 slots per thread)\n"));
  EXPECT_THAT(text, HasSubstr("trace: hardware (intel_bts)\n"));
  EXPECT_THAT(text, HasSubstr("ptrace: allowed (yama ptrace_scope: 1)\n"));
  EXPECT_THAT(text, HasSubstr("PTRACE_SINGLEBLOCK: steps blocks\n"));
}

// Injected canaries: a run that writes nothing counts 0 and must not decide.
void silent_first_run(volatile std::uint64_t* canary, int run) {
  if (run == 1) return;
  for (std::uint64_t i = 1; i <= kCanaryWrites; ++i) *canary = i;
}

void always_silent(volatile std::uint64_t*, int) {}

TEST_F(ProbeTest, ACanaryThatCountedNothingIsRunAgain) {
  if (report().breakpoint_slots == 0) {
    GTEST_SKIP() << "no breakpoint event opens here (" << report().slots_error
                 << "): no canary runs";
  }
  auto r = probe({.canary = silent_first_run});
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  // The second run decides where hits arrive; where they do not, it counts 0 too and every run
  // allowed is made, as with the default canary.
  const int runs = report().hits_delivered ? 2 : kCanaryRuns;
  EXPECT_EQ(r->canary_runs, runs);
  EXPECT_EQ(r->canary_writes, kCanaryWrites);
  EXPECT_EQ(r->hits_delivered, report().hits_delivered);
  EXPECT_EQ(r->canary_hits, report().canary_hits);
  EXPECT_THAT(probe_to_json(*r), HasSubstr("\"canary_runs\":" + std::to_string(runs)));
}

TEST_F(ProbeTest, CanariesThatNeverCountDecideNotDelivered) {
  if (report().breakpoint_slots == 0) {
    GTEST_SKIP() << "no breakpoint event opens here (" << report().slots_error
                 << "): no canary runs";
  }
  auto r = probe({.canary = always_silent, .canary_runs = 3});
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  EXPECT_EQ(r->canary_runs, 3);
  EXPECT_EQ(r->canary_hits, 0u);
  EXPECT_FALSE(r->hits_delivered);
  bool noted = false;
  for (const std::string& n : r->notes) noted |= n.find("0 writes in 3 runs") != n.npos;
  EXPECT_TRUE(noted) << probe_to_json(*r);
}

TEST_F(ProbeTest, TheDefaultCanaryDecidesInOneRunWhereHitsArrive) {
  if (!report().hits_delivered) {
    HWARB_SKIP_UNLESS_REQUIRED(
        "hits", std::string("breakpoint hits are not delivered here: the canary may run again"));
  }
  EXPECT_EQ(report().canary_runs, 1);
}

// The register wrappers of syscalls.h that probe() relies on.
TEST(ProbeSyscalls, SetRegsThenGetRegsRoundTrips) {
  auto child = StoppedChild::spawn();
  if (!child && testing::refused(child.error())) {
    GTEST_SKIP() << testing::skip_reason("tracing a child", child.error());
  }
  ASSERT_TRUE(child.has_value()) << child.error().to_string();
  user_regs_struct regs;
  ASSERT_TRUE(ptrace_getregs(child->pid(), regs).has_value());
  regs.r15 = 0x1234567890abcdefULL;
  ASSERT_TRUE(ptrace_setregs(child->pid(), regs).has_value());
  user_regs_struct back;
  ASSERT_TRUE(ptrace_getregs(child->pid(), back).has_value());
  EXPECT_EQ(back.r15, 0x1234567890abcdefULL);
  EXPECT_EQ(back.rip, regs.rip);

  auto not_traced = ptrace_getregs(1, regs);
  ASSERT_FALSE(not_traced.has_value());
  EXPECT_THAT(not_traced.error().message(), ::testing::StartsWith("pid: "));
  auto step = ptrace_singleblock(1);
  ASSERT_FALSE(step.has_value());
  EXPECT_EQ(step.error().code(), ErrorCode::kSrch);
}

}  // namespace
}  // namespace hwarb::native
