#include "hwarb/pmu/core.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "test_pmu.h"

namespace hwarb::pmu {
namespace {

using testing::TestPmu;

EventAttr attr(bool pinned, bool inherit = false, bool disabled = false) {
  EventAttr a;
  a.type = EventType::kBreakpoint;
  a.bp_type = BpType::kRw;
  a.pinned = pinned;
  a.inherit = inherit;
  a.disabled = disabled;
  return a;
}
EventOwner on_cpu(int c) {
  return {std::nullopt, CpuId(c)};
}
EventOwner of_task(int t, std::optional<int> c = std::nullopt) {
  EventOwner o{TaskId(t), std::nullopt};
  if (c) o.cpu = CpuId(*c);
  return o;
}

struct Fixture {
  explicit Fixture(int counters = 4, int cpus = 2) : pmu(cpus, counters) {
    arb = std::move(*arbiter::Arbiter::create({arbiter::ArchProfile::x86_64(), cpus}));
    core = std::make_unique<Core>(*arb, clock);
    EXPECT_TRUE(core->register_pmu(EventType::kBreakpoint, pmu).has_value());
  }
  ~Fixture() { core.reset(); }
  EventHandle open(const EventAttr& a, EventOwner o, OverflowHandler h = {}) {
    auto r = core->open(a, o, std::move(h));
    EXPECT_TRUE(r.has_value()) << r.error().to_string();
    return r ? std::move(*r) : EventHandle();
  }
  EventState state(const EventHandle& h) const { return h.event()->state(); }
  ReadValue read(const EventHandle& h) const { return *h.read(); }

  ManualClock clock;
  TestPmu pmu;
  std::unique_ptr<arbiter::Arbiter> arb;
  std::unique_ptr<Core> core;
};

TEST(CoreTest, OpenValidatesOwnerCpuWeightAndType) {
  Fixture f;
  auto r = f.core->open(attr(true), {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_NE(r.error().message().find("owner"), std::string::npos);
  r = f.core->open(attr(true), on_cpu(2));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_NE(r.error().message().find("cpu"), std::string::npos);
  EventAttr w = attr(true);
  w.weight = 0;
  r = f.core->open(w, on_cpu(0));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("weight"), std::string::npos);
  EventAttr bts = attr(true);
  bts.type = EventType::kBts;
  r = f.core->open(bts, on_cpu(0));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoEnt);
  EXPECT_FALSE(f.arb->is_used());
  EXPECT_TRUE(f.core->events().empty());
  EXPECT_EQ(f.core->register_pmu(EventType::kBreakpoint, f.pmu).error().code(), ErrorCode::kExist);
}

TEST(CoreTest, ArbiterRefusalAndInitFailureLeaveNothing) {
  Fixture f;
  std::vector<EventHandle> hs;
  for (int i = 0; i < 4; ++i) hs.push_back(f.open(attr(true), on_cpu(0)));
  EXPECT_EQ(f.pmu.active(CpuId(0)), 4);
  auto r = f.core->open(attr(true), on_cpu(0));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoSpc);
  EXPECT_EQ(f.core->events().size(), 4u);
  hs.clear();
  EXPECT_FALSE(f.arb->is_used());
  EXPECT_EQ(f.pmu.active(CpuId(0)), 0);

  f.pmu.fail_init = true;
  r = f.core->open(attr(true), on_cpu(1));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_FALSE(f.arb->is_used());
  EXPECT_TRUE(f.core->events().empty());
}

TEST(CoreTest, EventIdIsTheArbiterRequestId) {
  Fixture f;
  auto a = f.open(attr(true), on_cpu(0));
  auto b = f.open(attr(false), of_task(7));
  EXPECT_EQ(a.id(), 1u);
  EXPECT_EQ(b.id(), 2u);
  arbiter::Request big;
  big.cpu = CpuId(0);
  big.weight = 4;
  auto e = f.arb->explain(big);
  ASSERT_FALSE(e.admitted);
  ASSERT_EQ(e.cpu_holders.size(), 1u);
  EXPECT_EQ(e.cpu_holders[0], RequestId(1));
}

TEST(CoreTest, PinnedFirstAndPinnedErrorWhenPmuFull) {
  Fixture f(/*counters=*/2);
  auto flex = f.open(attr(false), of_task(1));
  auto p1 = f.open(attr(true), of_task(1));
  auto p2 = f.open(attr(true), of_task(1));
  auto p3 = f.open(attr(true), of_task(1));
  ASSERT_TRUE(f.core->sched_in(CpuId(0), TaskId(1)));
  EXPECT_EQ(f.state(p1), EventState::kActive);
  EXPECT_EQ(f.state(p2), EventState::kActive);
  EXPECT_EQ(f.state(p3), EventState::kError);
  EXPECT_EQ(f.state(flex), EventState::kInactive);
  // ERROR sticks across switches; enable() brings it back.
  ASSERT_TRUE(f.core->sched_out(CpuId(0), TaskId(1)));
  ASSERT_TRUE(p1.close());
  ASSERT_TRUE(f.core->sched_in(CpuId(0), TaskId(1)));
  EXPECT_EQ(f.state(p3), EventState::kError);
  EXPECT_EQ(f.state(flex), EventState::kActive);
  ASSERT_TRUE(p3.enable());
  EXPECT_EQ(f.state(p3), EventState::kActive);  // pinned goes before the flexible one
  EXPECT_EQ(f.state(flex), EventState::kInactive);
  EXPECT_EQ(f.read(p3).time_enabled, 0u);
}

TEST(CoreTest, FlexibleFillAndRotationFairness) {
  Fixture f;
  auto pinned = f.open(attr(true), on_cpu(0));
  std::vector<EventHandle> flex;
  for (int i = 0; i < 5; ++i) flex.push_back(f.open(attr(false), on_cpu(0)));
  EXPECT_EQ(f.pmu.active(CpuId(0)), 4);  // 1 pinned + 3 flexible
  const int kTicks = 997;                // not a multiple of 5
  for (int t = 0; t < kTicks; ++t) {
    f.clock.advance(1000);
    ASSERT_TRUE(f.core->tick(CpuId(0)));
    EXPECT_EQ(f.pmu.active(CpuId(0)), 4);
  }
  ReadValue pv = f.read(pinned);
  EXPECT_EQ(pv.time_enabled, 997000u);
  EXPECT_EQ(pv.time_running, pv.time_enabled);
  // Equal share 3/5; round robin keeps every event within one tick of it over each 5 ticks.
  for (auto& h : flex) {
    ReadValue v = f.read(h);
    EXPECT_EQ(v.time_enabled, 997000u);
    double share = static_cast<double>(v.time_running) / static_cast<double>(v.time_enabled);
    EXPECT_LE(std::abs(share - 0.6), 2.0 / kTicks) << share;
  }
}

TEST(CoreTest, TimeAccountingOnAScriptedTimeline) {
  Fixture f(/*counters=*/1);
  auto a = f.open(attr(false), of_task(1));  // t=0, task not running: nothing accrues
  auto b = f.open(attr(false), of_task(1));
  f.clock.set(10);
  ASSERT_TRUE(f.core->sched_in(CpuId(0), TaskId(1)));  // a runs
  f.clock.set(20);
  ASSERT_TRUE(f.core->tick(CpuId(0)));  // b runs
  f.clock.set(35);
  ASSERT_TRUE(f.core->sched_out(CpuId(0), TaskId(1)));
  f.clock.set(100);
  EXPECT_EQ(f.read(a), (ReadValue{0, 25, 10}));
  EXPECT_EQ(f.read(b), (ReadValue{0, 25, 15}));
  ASSERT_TRUE(f.core->sched_in(CpuId(1), TaskId(1)));  // b is first now
  f.clock.set(104);
  EXPECT_EQ(f.read(a), (ReadValue{0, 29, 10}));
  EXPECT_EQ(f.read(b), (ReadValue{0, 29, 19}));
  ASSERT_TRUE(a.disable());
  f.clock.set(110);
  EXPECT_EQ(f.read(a), (ReadValue{0, 29, 10}));
  EXPECT_EQ(f.read(b), (ReadValue{0, 35, 25}));
}

TEST(CoreTest, DisabledEventsHoldSlotsButNeverRun) {
  Fixture f;
  std::vector<EventHandle> hs;
  for (int i = 0; i < 4; ++i) hs.push_back(f.open(attr(true, false, true), on_cpu(0)));
  auto r = f.core->open(attr(true), on_cpu(0));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoSpc);
  f.clock.advance(50);
  ASSERT_TRUE(f.core->tick(CpuId(0)));
  for (auto& h : hs) {
    EXPECT_EQ(f.state(h), EventState::kOff);
    EXPECT_EQ(f.read(h), (ReadValue{0, 0, 0}));
  }
  EXPECT_EQ(f.pmu.active(CpuId(0)), 0);
  ASSERT_TRUE(hs[2].enable());
  EXPECT_EQ(f.state(hs[2]), EventState::kActive);
  f.clock.advance(5);
  EXPECT_EQ(f.read(hs[2]), (ReadValue{0, 5, 5}));
}

TEST(CoreTest, TaskEventsRunOnlyOnTheirCpuAndWhileTheTaskRuns) {
  Fixture f;
  auto on1 = f.open(attr(true), of_task(1, 1));
  auto any = f.open(attr(true), of_task(1));
  auto other = f.open(attr(true), of_task(2));
  ASSERT_TRUE(f.core->sched_in(CpuId(0), TaskId(1)));
  EXPECT_EQ(f.state(on1), EventState::kInactive);
  EXPECT_EQ(f.state(any), EventState::kActive);
  EXPECT_EQ(f.state(other), EventState::kInactive);
  f.pmu.fire(CpuId(0), Sample{});
  f.clock.advance(10);
  EXPECT_EQ(f.read(on1), (ReadValue{0, 0, 0}));
  EXPECT_EQ(f.read(any), (ReadValue{1, 10, 10}));
  // switch cpu 0 to task 2; task 1 moves to cpu 1
  ASSERT_TRUE(f.core->sched_out(CpuId(0), TaskId(1)));
  ASSERT_TRUE(f.core->sched_in(CpuId(0), TaskId(2)));
  ASSERT_TRUE(f.core->sched_in(CpuId(1), TaskId(1)));
  EXPECT_EQ(f.state(on1), EventState::kActive);
  EXPECT_EQ(f.state(any), EventState::kActive);
  EXPECT_EQ(f.state(other), EventState::kActive);
  EXPECT_EQ(f.pmu.active(CpuId(0)), 1);
  EXPECT_EQ(f.pmu.active(CpuId(1)), 2);
  f.pmu.fire(CpuId(1), Sample{});
  f.clock.advance(3);
  EXPECT_EQ(f.read(on1), (ReadValue{1, 3, 3}));
  EXPECT_EQ(f.read(any), (ReadValue{2, 13, 13}));
  EXPECT_EQ(f.read(other), (ReadValue{0, 3, 3}));
}

TEST(CoreTest, SchedErrors) {
  Fixture f;
  ASSERT_TRUE(f.core->sched_in(CpuId(0), TaskId(1)));
  EXPECT_EQ(f.core->sched_in(CpuId(0), TaskId(2)).error().code(), ErrorCode::kBusy);
  EXPECT_EQ(f.core->sched_in(CpuId(1), TaskId(1)).error().code(), ErrorCode::kBusy);
  EXPECT_EQ(f.core->sched_out(CpuId(1), TaskId(1)).error().code(), ErrorCode::kInval);
  EXPECT_EQ(f.core->sched_in(CpuId(9), TaskId(3)).error().code(), ErrorCode::kInval);
  EXPECT_EQ(f.core->tick(CpuId(-1)).error().code(), ErrorCode::kInval);
  EXPECT_EQ(f.core->current(CpuId(0)), TaskId(1));
}

TEST(CoreTest, InheritCopiesEachReservingAndFoldsCountsAtExit) {
  Fixture f;
  int calls = 0;
  EventAttr ia = attr(true, /*inherit=*/true);
  ia.sample_period = 1;
  ia.ring_capacity = 8;
  auto inh = f.open(ia, of_task(1), [&](Event&, const Sample&) { ++calls; });
  auto plain = f.open(attr(true), of_task(1));
  ASSERT_TRUE(f.core->fork(TaskId(1), TaskId(2)));
  auto kids = f.core->task_events(TaskId(2));
  ASSERT_EQ(kids.size(), 1u);
  const Event* copy = f.core->find(kids[0]);
  EXPECT_EQ(copy->parent(), inh.id());
  EXPECT_TRUE(copy->attr().inherit);
  // grandchild copies point at the user's event
  ASSERT_TRUE(f.core->fork(TaskId(2), TaskId(3)));
  EXPECT_EQ(f.core->find(f.core->task_events(TaskId(3))[0])->parent(), inh.id());
  ASSERT_TRUE(f.core->sched_in(CpuId(1), TaskId(2)));
  Sample s;
  s.task = TaskId(2);
  f.pmu.fire(CpuId(1), s);
  f.pmu.fire(CpuId(1), s);
  f.clock.advance(7);
  ASSERT_TRUE(f.core->exit(TaskId(2)));
  EXPECT_TRUE(f.core->task_events(TaskId(2)).empty());
  EXPECT_EQ(f.read(inh), (ReadValue{2, 7, 7}));
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(inh.event()->ring()->size(), 2u);  // the copy wrote into the user's ring
  ASSERT_TRUE(f.core->exit(TaskId(3)));
  ASSERT_TRUE(f.core->exit(TaskId(1)));
  EXPECT_FALSE(f.arb->is_used());
  EXPECT_EQ(f.state(inh), EventState::kExit);
  EXPECT_EQ(f.state(plain), EventState::kExit);
}

TEST(CoreTest, ClosingTheUserEventClosesItsCopies) {
  Fixture f;
  auto inh = f.open(attr(false, true), of_task(1));
  ASSERT_TRUE(f.core->fork(TaskId(1), TaskId(2)));
  EXPECT_EQ(f.core->events().size(), 2u);
  ASSERT_TRUE(inh.close());
  EXPECT_TRUE(f.core->events().empty());
  EXPECT_FALSE(f.arb->is_used());
}

TEST(CoreTest, ForkFailureLeavesNothingOfTheChild) {
  Fixture f;
  auto a = f.open(attr(true, true), of_task(1));
  auto b = f.open(attr(false, true), of_task(1));
  // The arbiter refuses (fault injected into reserve_all).
  f.arb->inject_fault_at(1);
  auto r = f.core->fork(TaskId(1), TaskId(2));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoMem);
  EXPECT_TRUE(f.core->task_events(TaskId(2)).empty());
  EXPECT_EQ(f.core->events().size(), 2u);
  // The driver refuses a copy.
  f.arb->inject_fault_at(0);
  f.pmu.fail_init = true;
  r = f.core->fork(TaskId(1), TaskId(2));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(f.core->task_events(TaskId(2)).empty());
  EXPECT_EQ(f.core->events().size(), 2u);
  a.close().value();
  b.close().value();
  EXPECT_FALSE(f.arb->is_used());
  // Without faults a copy fits even next to a full CPU: the arbiter never lets tasks compete,
  // so a child needs exactly what its parent holds.
  f.pmu.fail_init = false;
  auto t = f.open(attr(true, true), of_task(5, 0));
  auto c1 = f.open(attr(true), on_cpu(0));
  auto c2 = f.open(attr(true), on_cpu(0));
  auto c3 = f.open(attr(true), on_cpu(0));  // CP=3 + TP(5)=1 = 4
  ASSERT_TRUE(t.disable());
  ASSERT_TRUE(f.core->fork(TaskId(5), TaskId(6)));  // the copy fits: tasks do not compete
  EXPECT_EQ(f.core->task_events(TaskId(6)).size(), 1u);
  EXPECT_EQ(f.core->find(f.core->task_events(TaskId(6))[0])->state(), EventState::kOff);
  ASSERT_TRUE(f.core->exit(TaskId(6)));
  EXPECT_EQ(f.core->events().size(), 4u);
}

TEST(CoreTest, ExitReleasesEverything) {
  Fixture f;
  auto a = f.open(attr(true), of_task(1));
  auto b = f.open(attr(false), of_task(1, 0));
  ASSERT_TRUE(f.core->sched_in(CpuId(0), TaskId(1)));
  f.pmu.fire(CpuId(0), Sample{});
  f.clock.advance(4);
  ASSERT_TRUE(f.core->exit(TaskId(1)));
  EXPECT_EQ(f.state(a), EventState::kExit);
  EXPECT_EQ(f.state(b), EventState::kExit);
  EXPECT_FALSE(f.arb->is_used());
  EXPECT_EQ(f.pmu.active(CpuId(0)), 0);
  EXPECT_FALSE(f.core->current(CpuId(0)).has_value());
  f.clock.advance(100);
  EXPECT_EQ(f.read(a), (ReadValue{1, 4, 4}));  // frozen
  EXPECT_EQ(a.enable().error().code(), ErrorCode::kInval);
  ASSERT_TRUE(a.close());
  ASSERT_TRUE(b.close());
  EXPECT_TRUE(f.core->events().empty());
  EXPECT_EQ(f.pmu.destroys, 2);
  EXPECT_TRUE(f.core->exit(TaskId(42)));  // no events: fine
}

TEST(CoreTest, RingBufferAndOverflowHandler) {
  Fixture f;
  std::vector<std::uint64_t> seen;
  EventAttr a = attr(true);
  a.sample_period = 2;
  a.ring_capacity = 2;
  a.ring_mode = RingMode::kStopWhenFull;
  auto h = f.open(a, on_cpu(1), [&](Event&, const Sample& s) { seen.push_back(s.ip); });
  for (std::uint64_t ip = 1; ip <= 9; ++ip) {
    Sample s;
    s.ip = ip;
    s.access = AccessKind::kWrite;
    f.pmu.fire(CpuId(1), s);
  }
  EXPECT_EQ(f.read(h).count, 9u);
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{2, 4, 6, 8}));
  const SampleRing* ring = h.event()->ring();
  EXPECT_EQ(ring->size(), 2u);
  EXPECT_EQ(ring->lost(), 2u);
  EXPECT_EQ(ring->at(0).ip, 2u);
  EXPECT_EQ(ring->at(0).cpu, CpuId(1));
  EXPECT_EQ(ring->at(0).access, AccessKind::kWrite);
  // Not delivered while not ACTIVE.
  ASSERT_TRUE(h.disable());
  Event* ev = const_cast<Event*>(h.event());
  EXPECT_FALSE(ev->deliver(Sample{}));
  EXPECT_EQ(f.read(h).count, 9u);
}

TEST(CoreTest, ClosingAnActiveEventLetsAWaitingFlexibleOneRun) {
  Fixture f(/*counters=*/1);
  auto a = f.open(attr(false), on_cpu(0));
  auto b = f.open(attr(false), on_cpu(0));
  EXPECT_EQ(f.state(a), EventState::kActive);
  EXPECT_EQ(f.state(b), EventState::kInactive);
  ASSERT_TRUE(a.close());
  EXPECT_EQ(f.state(b), EventState::kActive);
  EXPECT_EQ(f.pmu.adds - f.pmu.dels, 1);
}

std::string run_script() {
  Fixture f(3, 2);
  std::vector<EventHandle> hs;
  hs.push_back(f.open(attr(true, true), of_task(1)));
  for (int i = 0; i < 4; ++i) hs.push_back(f.open(attr(false, true), of_task(1, i % 2)));
  hs.push_back(f.open(attr(false), on_cpu(1)));
  std::ostringstream out;
  for (int step = 0; step < 200; ++step) {
    f.clock.advance(100 + step % 7);
    int cpu = step % 2;
    if (step % 11 == 0) {
      if (f.core->current(CpuId(0))) {
        (void)f.core->sched_out(CpuId(0), TaskId(1));
        (void)f.core->sched_in(CpuId(1), TaskId(1));
      } else {
        (void)f.core->sched_out(CpuId(1), TaskId(1));
        (void)f.core->sched_in(CpuId(0), TaskId(1));
      }
    }
    if (step == 50) (void)f.core->fork(TaskId(1), TaskId(2));
    f.pmu.fire(CpuId(cpu), Sample{});
    (void)f.core->tick(CpuId(cpu));
  }
  for (auto& h : hs) {
    ReadValue v = f.read(h);
    out << v.count << ' ' << v.time_enabled << ' ' << v.time_running << ' ' << to_string(f.state(h))
        << '\n';
  }
  return out.str();
}

TEST(CoreTest, Deterministic) {
  std::string a = run_script();
  EXPECT_EQ(a, run_script());
  EXPECT_FALSE(a.empty());
}

}  // namespace
}  // namespace hwarb::pmu
