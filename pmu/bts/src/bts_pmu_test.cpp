#include "hwarb/bts/bts_pmu.h"

#include <gtest/gtest.h>

#include <memory>

#include "hwarb/bts/software_bts.h"
#include "hwarb/pmu/core.h"

namespace hwarb::bts {
namespace {

constexpr std::uint64_t kKernel = 0xffffffff81000000;

struct Fixture {
  explicit Fixture(int cpus = 2) : hw(cpus, x86::BtsFormat::k64) {
    arb = std::move(*arbiter::Arbiter::create({arbiter::ArchProfile::x86_64(), cpus}));
    TracerConfig tc;
    tc.cpus = cpus;
    tc.ds_records = 4;
    tracer = std::move(*Tracer::create(tc, hw, arb.get()));
    hw.set_interrupt_handler([this](CpuId c) { (void)tracer->on_interrupt(c); });
    pmu = std::make_unique<BtsPmu>(*tracer);
    core = std::make_unique<pmu::Core>(*arb, clock);
    EXPECT_TRUE(core->register_pmu(pmu::EventType::kBts, *pmu).has_value());
  }
  ~Fixture() {
    core.reset();
    pmu.reset();
    tracer.reset();
  }
  static pmu::EventAttr attr(std::size_t records = 16) {
    pmu::EventAttr a;
    a.type = pmu::EventType::kBts;
    a.aux_size = records * kTraceRecordSize;
    return a;
  }
  // A context switch as sim::System does it.
  void switch_to(int cpu, std::optional<int> task) {
    const CpuId c(cpu);
    const std::optional<TaskId> prev = core->current(c);
    if (prev) {
      ASSERT_TRUE(core->sched_out(c, *prev).has_value());
    }
    std::optional<TaskId> next;
    if (task) next = TaskId(*task);
    ASSERT_TRUE(tracer->on_switch(c, prev, next, clock.now()).has_value());
    if (next) {
      ASSERT_TRUE(core->sched_in(c, *next).has_value());
    }
  }
  void branch(int cpu, std::uint64_t from, std::uint64_t to) {
    ASSERT_TRUE(hw.branch(CpuId(cpu), from, to, false, from >= tracer->config().kernel_start));
  }
  std::vector<TraceRecord> drain(const pmu::EventHandle& h) {
    auto ctx = pmu->context(h.id());
    EXPECT_TRUE(ctx.has_value());
    auto d = tracer->drain(*ctx);
    EXPECT_TRUE(d.has_value());
    return d ? d->records : std::vector<TraceRecord>{};
  }

  pmu::ManualClock clock;
  SoftwareBts hw;
  std::unique_ptr<arbiter::Arbiter> arb;
  std::unique_ptr<Tracer> tracer;
  std::unique_ptr<BtsPmu> pmu;
  std::unique_ptr<pmu::Core> core;
};

TEST(BtsPmuTest, PerTaskAndCpuWideEventsAreNotMixed) {
  Fixture f;
  auto t = f.core->open(Fixture::attr(), {TaskId(1), std::nullopt});
  ASSERT_TRUE(t.has_value()) << t.error().to_string();
  auto t2 = f.core->open(Fixture::attr(), {TaskId(2), CpuId(1)});
  ASSERT_TRUE(t2.has_value());
  auto c = f.core->open(Fixture::attr(), {std::nullopt, CpuId(0)});
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code(), ErrorCode::kBusy);
  EXPECT_NE(c.error().message().find("2 per-task"), std::string::npos) << c.error().message();
  EXPECT_EQ(f.pmu->cpu_wide_events(), 0);
  EXPECT_EQ(f.tracer->contexts().size(), 2u);
  // Closing the per-task events lets a CPU-wide one in, and then per-task ones are refused.
  *t = pmu::EventHandle();
  *t2 = pmu::EventHandle();
  EXPECT_EQ(f.pmu->per_task_events(), 0);
  auto c2 = f.core->open(Fixture::attr(), {std::nullopt, CpuId(0)});
  ASSERT_TRUE(c2.has_value());
  auto t3 = f.core->open(Fixture::attr(), {TaskId(1), std::nullopt});
  ASSERT_FALSE(t3.has_value());
  EXPECT_EQ(t3.error().code(), ErrorCode::kBusy);
}

TEST(BtsPmuTest, BtsEventsAndPtAreExclusiveKindsInTheArbiter) {
  Fixture f;
  auto t = f.core->open(Fixture::attr(), {TaskId(1), std::nullopt});
  ASSERT_TRUE(t.has_value());
  arbiter::Request pt;
  pt.kind = arbiter::ResourceKind::kPt;
  pt.cpu = CpuId(0);
  auto r = f.arb->reserve(pt);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ErrorCode::kBusy);
  *t = pmu::EventHandle();
  auto held = f.arb->reserve(pt);
  ASSERT_TRUE(held.has_value());
  auto t2 = f.core->open(Fixture::attr(), {TaskId(1), std::nullopt});
  ASSERT_FALSE(t2.has_value());
  EXPECT_EQ(t2.error().code(), ErrorCode::kBusy);
  EXPECT_TRUE(f.tracer->contexts().empty());
}

TEST(BtsPmuTest, BadAttributesAreEinvalAndLeaveNothing) {
  Fixture f;
  pmu::EventAttr a = Fixture::attr();
  a.exclude_user = a.exclude_kernel = true;
  auto r = f.core->open(a, {TaskId(1), std::nullopt});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_NE(r.error().message().find("exclude_user"), std::string::npos);
  a = Fixture::attr(0);
  r = f.core->open(a, {TaskId(1), std::nullopt});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(f.tracer->contexts().empty());
  EXPECT_FALSE(f.arb->is_used());
  EXPECT_EQ(f.pmu->per_task_events(), 0);
}

TEST(BtsPmuTest, ATaskEventTracesItsTaskOnlyWhileScheduledAndCountsRecords) {
  Fixture f;
  auto h = f.core->open(Fixture::attr(), {TaskId(1), std::nullopt});
  ASSERT_TRUE(h.has_value());
  f.switch_to(0, 2);
  f.branch(0, 0x1000, 0x2000);  // task 2: not traced
  f.switch_to(0, 1);
  EXPECT_EQ(h->event()->state(), pmu::EventState::kActive);
  f.branch(0, 0x1100, 0x1200);
  for (int i = 0; i < 9; ++i) f.branch(0, 0x1300 + i, 0x1400 + i);  // past the 4-record DS buffer
  f.switch_to(0, std::nullopt);
  f.branch(0, 0x5000, 0x6000);  // idle CPU: nothing
  EXPECT_EQ(h->event()->state(), pmu::EventState::kInactive);
  EXPECT_EQ(f.tracer->programmed_debugctl(CpuId(0)), 0u);
  auto v = h->read();
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->count, 10u);
  const auto recs = f.drain(*h);
  ASSERT_EQ(recs.size(), 10u);
  EXPECT_EQ(recs[0], TraceRecord::branch(0x1100, 0x1200));
  EXPECT_EQ(recs[9], TraceRecord::branch(0x1308, 0x1408));
}

TEST(BtsPmuTest, ExcludeKernelFiltersAndCpuWideEventsSeeEveryTaskOfTheirCpu) {
  Fixture f;
  pmu::EventAttr a = Fixture::attr();
  a.exclude_kernel = true;
  auto h = f.core->open(a, {std::nullopt, CpuId(1)});
  ASSERT_TRUE(h.has_value());
  f.switch_to(1, 1);
  f.branch(1, 0x1000, 0x1010);
  f.branch(1, kKernel, kKernel + 0x10);
  f.switch_to(1, 2);
  f.branch(1, 0x2000, 0x2010);
  f.switch_to(0, 3);
  f.branch(0, 0x3000, 0x3010);  // another CPU
  const auto recs = f.drain(*h);
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].from, 0x1000u);
  EXPECT_EQ(recs[1].from, 0x2000u);
  EXPECT_TRUE(x86::debugctl::bts_off_os(f.tracer->programmed_debugctl(CpuId(1))));
}

TEST(BtsPmuTest, DisablingAnEventStopsItsTracingAndSnapshotModeKeepsTheNewest) {
  Fixture f;
  pmu::EventAttr a = Fixture::attr(3);
  a.aux_snapshot = true;
  auto h = f.core->open(a, {TaskId(1), std::nullopt});
  ASSERT_TRUE(h.has_value());
  f.switch_to(0, 1);
  for (int i = 0; i < 5; ++i) f.branch(0, 0x100 + i, 0x200 + i);
  ASSERT_TRUE(f.core->disable(h->id()).has_value());
  f.branch(0, 0x999, 0x998);
  const auto recs = f.drain(*h);
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_EQ(recs[0].from, 0x102u);
  EXPECT_EQ(recs[2].from, 0x104u);
}

}  // namespace
}  // namespace hwarb::bts
