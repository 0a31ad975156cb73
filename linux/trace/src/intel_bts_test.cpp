// intel_bts_test — hardware branch tracing through the kernel's intel_bts PMU. What every machine
// can check: the PMU's presence agrees with sysfs and its absence is a clear error. Where the
// kernel has intel_bts: the taken branches of a function traced by the hardware equal those the
// software BranchTracer finds (itself checked against single-stepping in branch_tracer_test).
#include "hwarb/linux/intel_bts.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "hwarb/linux/branch_tracer.h"
#include "hwarb/linux/inferior.h"
#include "hwarb/linux/symbols.h"
#include "test_programs.h"
#include "test_support.h"

namespace hwarb::native {
namespace {

using testing::Capture;
using testing::program;

constexpr const char* kPmuDir = "/sys/bus/event_source/devices/intel_bts";

TEST(IntelBts, PresenceAgreesWithSysfs) {
  const auto type = intel_bts_type();
  if (std::filesystem::exists(kPmuDir)) {
    ASSERT_TRUE(type.has_value()) << type.error().to_string();
    std::ifstream in(std::string(kPmuDir) + "/type");
    std::uint32_t want = 0;
    in >> want;
    EXPECT_EQ(*type, want);
  } else {
    ASSERT_FALSE(type.has_value());
    EXPECT_EQ(type.error().code(), ErrorCode::kNoEnt);
    const std::string text = type.error().to_string();
    EXPECT_NE(text.find("intel_bts: no intel_bts PMU on this machine"), std::string::npos) << text;
    EXPECT_NE(text.find(kPmuDir), std::string::npos) << text;
    const auto trace = IntelBtsTrace::open();
    ASSERT_FALSE(trace.has_value());
    EXPECT_EQ(trace.error().code(), ErrorCode::kNoEnt);
  }
}

TEST(IntelBts, OpenChecksTheOptionsFirst) {
  auto r = IntelBtsTrace::open({.data_pages = 8, .aux_pages = 3});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_NE(r.error().to_string().find("aux_pages"), std::string::npos);
  r = IntelBtsTrace::open({.data_pages = 0, .aux_pages = 8});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().to_string().find("data_pages"), std::string::npos);
}

// Branches taken inside `fn` by prog_branches, traced by `trace` while the process runs to its
// end; the program's output is returned in `out`.
std::uint64_t hardware_count(const char* fn, std::string& out, IntelBtsStats& stats) {
  Capture capture;
  auto inf = Inferior::spawn({program("branches"), "100"}, {.stdout_fd = capture.fd()});
  EXPECT_TRUE(inf.has_value()) << inf.error().to_string();
  if (!inf) return 0;
  auto table = SymbolTable::load(inf->pid());
  EXPECT_TRUE(table.has_value());
  const auto sym = table->find(fn);
  EXPECT_TRUE(sym.has_value());
  auto trace = IntelBtsTrace::open();
  EXPECT_TRUE(trace.has_value()) << trace.error().to_string();
  if (!trace || !sym) return 0;
  EXPECT_TRUE(trace->add_thread(inf->pid()).has_value());
  std::uint64_t n = 0;
  const auto sink = [&](pid_t, const x86::BtsRecord& b) {
    if (b.from >= sym->address && b.from < sym->address + sym->size) ++n;
  };
  EXPECT_TRUE(inf->resume_all(Resume::kCont).has_value());
  for (;;) {
    auto ev = inf->wait();
    EXPECT_TRUE(ev.has_value()) << ev.error().to_string();
    if (!ev) break;
    EXPECT_TRUE(trace->drain(sink).has_value());
    if (ev->kind == EventKind::kExited || ev->kind == EventKind::kKilled) break;
    if (ev->kind == EventKind::kThreadExit) continue;
    EXPECT_TRUE(
        inf->resume(ev->tid, Resume::kCont, ev->kind == EventKind::kSignal ? ev->signal : 0));
  }
  EXPECT_TRUE(trace->drain(sink).has_value());
  stats = trace->stats();
  out = capture.text();
  return n;
}

std::uint64_t software_count(const char* fn) {
  Capture sink;
  auto inf = Inferior::spawn({program("branches"), "100"}, {.stdout_fd = sink.fd()});
  EXPECT_TRUE(inf.has_value());
  if (!inf) return 0;
  auto table = SymbolTable::load(inf->pid());
  const auto sym = table->find(fn);
  EXPECT_TRUE(sym.has_value());
  if (!sym) return 0;
  std::uint64_t n = 0;
  BranchTracerOptions options;
  options.only = std::pair{sym->address, sym->address + sym->size};
  auto tracer = BranchTracer::start(*inf, options, [&](const BranchRecord&) { ++n; });
  EXPECT_TRUE(tracer.has_value());
  if (!tracer) return 0;
  EXPECT_TRUE(inf->resume_all(tracer->resume_mode()).has_value());
  for (;;) {
    auto ev = inf->wait();
    if (!ev) break;
    auto mine = tracer->handle(*ev);
    EXPECT_TRUE(mine.has_value());
    if (ev->kind == EventKind::kExited || ev->kind == EventKind::kKilled) break;
    if (!mine || *mine || ev->kind == EventKind::kThreadExit) continue;
    (void)inf->resume(ev->tid, tracer->resume_mode(),
                      ev->kind == EventKind::kSignal ? ev->signal : 0);
  }
  return n;
}

TEST(IntelBts, HardwareFindsTheSameTakenBranchesAsTheSoftwareTracer) {
  if (auto type = intel_bts_type(); !type) {
    HWARB_SKIP_UNLESS_REQUIRED("bts", testing::skip_reason("intel_bts", type.error()));
  }
  std::string out;
  IntelBtsStats stats;
  const std::uint64_t hw = hardware_count("classify", out, stats);
  EXPECT_EQ(out.rfind("classify(100)=", 0), 0u) << out;
  EXPECT_EQ(stats.truncations, 0u);
  const std::uint64_t sw = software_count("classify");
  EXPECT_GT(sw, 100u);
  EXPECT_EQ(hw, sw);
  std::printf("classify: %llu taken branches by intel_bts, %llu by the software tracer\n",
              static_cast<unsigned long long>(hw), static_cast<unsigned long long>(sw));
}

}  // namespace
}  // namespace hwarb::native
