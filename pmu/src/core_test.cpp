#include "hwarb/pmu/core.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// ---- open_all ----

TEST(CoreOpenAll, HandlesComeBackInRequestOrder) {
  Fixture f;
  std::vector<int> calls;
  auto recorder = [&calls](int n) {
    return [&calls, n](Event&, const Sample&) { calls.push_back(n); };
  };
  std::vector<Core::OpenRequest> reqs = {
      {attr(true), on_cpu(1), recorder(0)},
      {attr(false), of_task(3), recorder(1)},
      {attr(true), on_cpu(0), recorder(2)},
      {attr(true), of_task(3, 1), recorder(3)},
  };
  for (auto& r : reqs) r.attr.sample_period = 1;
  auto hs = f.core->open_all(reqs);
  ASSERT_TRUE(hs) << hs.error().to_string();
  ASSERT_EQ(hs->size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    const Event* e = (*hs)[i].event();
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->id(), i + 1);
    EXPECT_EQ(e->task(), reqs[i].owner.task);
    EXPECT_EQ(e->cpu(), reqs[i].owner.cpu);
    EXPECT_EQ(e->attr().pinned, reqs[i].attr.pinned);
  }
  EXPECT_EQ(f.state((*hs)[0]), EventState::kActive);
  EXPECT_EQ(f.state((*hs)[1]), EventState::kInactive);  // task 3 does not run
  EXPECT_EQ(f.state((*hs)[2]), EventState::kActive);
  EXPECT_EQ(f.pmu.inits, 4);
  // Each event got its own handler.
  f.pmu.fire(CpuId(1), Sample{});
  f.pmu.fire(CpuId(0), Sample{});
  EXPECT_EQ(calls, (std::vector<int>{0, 2}));
  ASSERT_TRUE(f.core->sched_in(CpuId(1), TaskId(3)));
  calls.clear();
  f.pmu.fire(CpuId(1), Sample{});
  std::sort(calls.begin(), calls.end());
  EXPECT_EQ(calls, (std::vector<int>{0, 1, 3}));
  // Ids go on after the batch.
  auto next = f.open(attr(false), on_cpu(0));
  EXPECT_EQ(next.id(), 5u);
  // An empty batch is fine.
  auto none = f.core->open_all({});
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(f.core->events().size(), 5u);
}

TEST(CoreOpenAll, ArbiterRefusalLeavesNothing) {
  Fixture f;
  std::vector<EventHandle> fill;
  for (int i = 0; i < 4; ++i) fill.push_back(f.open(attr(true), on_cpu(1)));
  const std::string dump = f.arb->dump();
  const int inits = f.pmu.inits, adds = f.pmu.adds;
  std::vector<Core::OpenRequest> reqs = {
      {attr(true), on_cpu(0), {}}, {attr(true), of_task(2), {}}, {attr(true), on_cpu(1), {}}};
  auto r = f.core->open_all(reqs);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoSpc);
  EXPECT_EQ(f.arb->dump(), dump);
  EXPECT_EQ(f.core->events().size(), 4u);
  EXPECT_EQ(f.pmu.inits, inits);  // no driver ever saw them
  EXPECT_EQ(f.pmu.adds, adds);
  EXPECT_EQ(f.pmu.active(CpuId(0)), 0);
  EXPECT_TRUE(f.core->task_events(TaskId(2)).empty());
  // The ids were not used up.
  auto next = f.open(attr(true), on_cpu(0));
  EXPECT_EQ(next.id(), 5u);
}

TEST(CoreOpenAll, BadRequestLeavesNothing) {
  Fixture f;
  auto keep = f.open(attr(true), on_cpu(0));
  const std::string dump = f.arb->dump();
  // No owner at index 1.
  std::vector<Core::OpenRequest> reqs = {{attr(true), on_cpu(1), {}}, {attr(true), {}, {}}};
  auto r = f.core->open_all(reqs);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(r.error().message().starts_with("owner"));
  // A CPU out of range, a zero weight.
  reqs[1] = {attr(true), on_cpu(7), {}};
  r = f.core->open_all(reqs);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  reqs[1] = {attr(true), on_cpu(0), {}};
  reqs[1].attr.weight = 0;
  r = f.core->open_all(reqs);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  // No PMU for the type.
  reqs[1] = {attr(true), on_cpu(0), {}};
  reqs[1].attr.type = EventType::kBts;
  r = f.core->open_all(reqs);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoEnt);
  EXPECT_EQ(f.arb->dump(), dump);
  EXPECT_EQ(f.core->events(), (std::vector<EventId>{keep.id()}));
  EXPECT_EQ(f.pmu.active(CpuId(1)), 0);
}

TEST(CoreOpenAll, DriverRefusalOfALaterEventDestroysTheEarlierOnes) {
  Fixture f;
  TestPmu raw(2, 4);
  raw.fail_init = true;
  ASSERT_TRUE(f.core->register_pmu(EventType::kRaw, raw));
  EventAttr ra = attr(true);
  ra.type = EventType::kRaw;
  std::vector<Core::OpenRequest> reqs = {
      {attr(true), on_cpu(0), {}}, {attr(false), of_task(4), {}}, {ra, on_cpu(1), {}}};
  auto r = f.core->open_all(reqs);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_EQ(f.pmu.inits, 2);
  EXPECT_EQ(f.pmu.destroys, 2);  // the two made before the refusal
  EXPECT_EQ(raw.inits, 1);
  EXPECT_EQ(raw.destroys, 0);
  EXPECT_EQ(f.pmu.adds, 0);
  EXPECT_TRUE(f.core->events().empty());
  EXPECT_TRUE(f.core->task_events(TaskId(4)).empty());
  EXPECT_FALSE(f.arb->is_used());
  raw.fail_init = false;
  auto ok = f.core->open_all(reqs);
  ASSERT_TRUE(ok);
  EXPECT_EQ((*ok)[2].event()->pmu().name(), "test");
  EXPECT_EQ(raw.active(CpuId(1)), 1);
  EXPECT_EQ(f.pmu.active(CpuId(0)), 1);
  ok->clear();
  EXPECT_FALSE(f.arb->is_used());
}

// ---- modify ----

TEST(CoreModify, TypeAndTaskCannotChange) {
  Fixture f;
  auto t = f.open(attr(true), of_task(1));
  auto c = f.open(attr(true), on_cpu(0));
  EventAttr other = attr(true);
  other.type = EventType::kRaw;
  auto r = f.core->modify(t.id(), other, of_task(1));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(r.error().message().starts_with("type"));
  r = f.core->modify(t.id(), attr(true), of_task(2));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(r.error().message().starts_with("task"));
  r = f.core->modify(t.id(), attr(true), on_cpu(0));  // task -> CPU-bound
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().message().starts_with("task"));
  r = f.core->modify(c.id(), attr(true), of_task(1, 0));  // CPU-bound -> task
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().message().starts_with("task"));
  r = f.core->modify(c.id(), attr(true), on_cpu(5));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(r.error().message().starts_with("cpu"));
  EventAttr w0 = attr(true);
  w0.weight = 0;
  r = f.core->modify(c.id(), w0, on_cpu(0));
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().message().starts_with("weight"));
  r = f.core->modify(99, attr(true), on_cpu(0));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoEnt);
  EXPECT_EQ(f.core->find(t.id())->task(), TaskId(1));
  EXPECT_EQ(f.core->find(c.id())->cpu(), CpuId(0));
  EXPECT_EQ(f.state(c), EventState::kActive);
  // An exited event cannot change.
  ASSERT_TRUE(f.core->exit(TaskId(1)));
  r = f.core->modify(t.id(), attr(true), of_task(1));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_EQ(f.state(t), EventState::kExit);
}

TEST(CoreModify, ValidateErrorLeavesEverythingEvenOnAFullCpu) {
  Fixture f;
  std::vector<EventHandle> fill;
  for (int i = 0; i < 4; ++i) fill.push_back(f.open(attr(true), on_cpu(0)));
  auto e = f.open(attr(true), on_cpu(1));
  ASSERT_EQ(f.state(e), EventState::kActive);
  const std::string dump = f.arb->dump();
  const int adds = f.pmu.adds, dels = f.pmu.dels, stops = f.pmu.stops;
  f.pmu.fail_validate = true;
  EventAttr next = attr(false);
  next.bp_addr = 0x1234;
  // Moving to the full cpu 0 would be ENOSPC; the field check comes first.
  auto r = f.core->modify(e.id(), next, on_cpu(0));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(r.error().message().starts_with("config"));
  EXPECT_GE(f.pmu.validates, 1);
  EXPECT_EQ(f.arb->dump(), dump);
  EXPECT_EQ(f.pmu.adds, adds);
  EXPECT_EQ(f.pmu.dels, dels);
  EXPECT_EQ(f.pmu.stops, stops);
  EXPECT_EQ(f.state(e), EventState::kActive);
  EXPECT_EQ(e.event()->active_cpu(), CpuId(1));
  EXPECT_EQ(e.event()->cpu(), CpuId(1));
  EXPECT_TRUE(e.event()->attr().pinned);
  EXPECT_EQ(e.event()->attr().bp_addr, 0u);
  // Without the validation error the arbiter decides: ENOSPC, still nothing changes.
  f.pmu.fail_validate = false;
  r = f.core->modify(e.id(), next, on_cpu(0));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoSpc);
  EXPECT_EQ(f.arb->dump(), dump);
  EXPECT_EQ(f.pmu.adds, adds);
  EXPECT_EQ(f.pmu.dels, dels);
  EXPECT_EQ(f.state(e), EventState::kActive);
  EXPECT_EQ(e.event()->cpu(), CpuId(1));
  EXPECT_EQ(e.event()->attr().bp_addr, 0u);
  EXPECT_EQ(f.pmu.active(CpuId(1)), 1);
  f.pmu.fire(CpuId(1), Sample{});
  EXPECT_EQ(f.read(e).count, 1u);
}

TEST(CoreModify, ArbiterRefusalKeepsTheReservation) {
  Fixture f;
  std::vector<EventHandle> fill;
  for (int i = 0; i < 3; ++i) fill.push_back(f.open(attr(true), on_cpu(1)));
  auto e = f.open(attr(true), on_cpu(1));
  const std::string dump = f.arb->dump();
  EventAttr heavy = attr(true);
  heavy.weight = 2;
  auto r = f.core->modify(e.id(), heavy, on_cpu(1));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoSpc);
  EXPECT_EQ(f.arb->dump(), dump);
  EXPECT_EQ(e.event()->attr().weight, 1);
  EXPECT_EQ(f.state(e), EventState::kActive);
  // The reservation is still held: cpu 1 stays full.
  auto more = f.core->open(attr(true), on_cpu(1));
  ASSERT_FALSE(more);
  EXPECT_EQ(more.error().code(), ErrorCode::kNoSpc);
  // Moving to the free cpu 0 works and frees cpu 1's slot.
  ASSERT_TRUE(f.core->modify(e.id(), heavy, on_cpu(0)));
  EXPECT_EQ(e.event()->cpu(), CpuId(0));
  EXPECT_EQ(e.event()->active_cpu(), CpuId(0));
  EXPECT_EQ(f.state(e), EventState::kActive);
  EXPECT_EQ(f.pmu.active(CpuId(0)), 1);
  EXPECT_EQ(f.pmu.active(CpuId(1)), 3);
  auto again = f.core->open(attr(true), on_cpu(1));
  ASSERT_TRUE(again);
  EXPECT_EQ(f.pmu.active(CpuId(1)), 4);
  // It lives in cpu 0's context now: cpu 0's scheduling sees it, cpu 1's does not.
  ASSERT_TRUE(f.core->set_cpu_online(CpuId(1), false));
  EXPECT_EQ(f.state(e), EventState::kActive);
  ASSERT_TRUE(f.core->set_cpu_online(CpuId(1), true));
  ASSERT_TRUE(f.core->set_cpu_online(CpuId(0), false));
  EXPECT_EQ(f.state(e), EventState::kInactive);
  EXPECT_EQ(f.pmu.active(CpuId(0)), 0);
  ASSERT_TRUE(f.core->set_cpu_online(CpuId(0), true));
  EXPECT_EQ(f.state(e), EventState::kActive);
  // And back to cpu 1 as a flexible event, which cpu 1's ticks rotate.
  fill.clear();
  ASSERT_TRUE(f.core->modify(e.id(), attr(false), on_cpu(1)));
  EXPECT_EQ(e.event()->active_cpu(), CpuId(1));
  EXPECT_EQ(f.pmu.active(CpuId(0)), 0);
  ASSERT_TRUE(e.close());
  EXPECT_EQ(f.pmu.active(CpuId(1)), 1);
  again->close().value();
  EXPECT_FALSE(f.arb->is_used());
}

TEST(CoreModify, ActiveEventIsReinstalled) {
  Fixture f;
  auto e = f.open(attr(true), on_cpu(0));
  f.pmu.fire(CpuId(0), Sample{});
  f.clock.advance(10);
  const int adds = f.pmu.adds, dels = f.pmu.dels;
  EventAttr next = attr(true);
  next.bp_addr = 0x42;
  next.bp_len = 8;
  ASSERT_TRUE(f.core->modify(e.id(), next, on_cpu(0)));
  EXPECT_EQ(f.pmu.dels, dels + 1);
  EXPECT_EQ(f.pmu.adds, adds + 1);
  EXPECT_EQ(f.state(e), EventState::kActive);
  EXPECT_EQ(e.event()->attr().bp_addr, 0x42u);
  EXPECT_EQ(e.event()->attr().bp_len, 8u);
  EXPECT_EQ(e.event()->active_cpu(), CpuId(0));
  // Count and times carry on.
  f.pmu.fire(CpuId(0), Sample{});
  f.clock.advance(5);
  EXPECT_EQ(f.read(e), (ReadValue{2, 15, 15}));
  // An event that is not installed is changed without touching the PMU.
  auto t = f.open(attr(true), of_task(9));
  const int adds2 = f.pmu.adds, dels2 = f.pmu.dels;
  ASSERT_TRUE(f.core->modify(t.id(), next, of_task(9, 1)));
  EXPECT_EQ(f.pmu.adds, adds2);
  EXPECT_EQ(f.pmu.dels, dels2);
  EXPECT_EQ(t.event()->cpu(), CpuId(1));
  ASSERT_TRUE(f.core->sched_in(CpuId(0), TaskId(9)));
  EXPECT_EQ(f.state(t), EventState::kInactive);  // bound to cpu 1 now
  ASSERT_TRUE(f.core->sched_out(CpuId(0), TaskId(9)));
  ASSERT_TRUE(f.core->sched_in(CpuId(1), TaskId(9)));
  EXPECT_EQ(f.state(t), EventState::kActive);
}

TEST(CoreModify, PinnedAndFlexibleMove) {
  Fixture f(/*counters=*/1);
  auto p = f.open(attr(true), of_task(1));
  auto x = f.open(attr(false), of_task(1));
  ASSERT_TRUE(f.core->sched_in(CpuId(0), TaskId(1)));
  EXPECT_EQ(f.core->task_events(TaskId(1)), (std::vector<EventId>{p.id(), x.id()}));
  EXPECT_EQ(f.state(p), EventState::kActive);
  EXPECT_EQ(f.state(x), EventState::kInactive);
  // pinned -> flexible: goes to the end of the flexible list; x runs first now.
  ASSERT_TRUE(f.core->modify(p.id(), attr(false), of_task(1)));
  EXPECT_FALSE(p.event()->attr().pinned);
  EXPECT_EQ(f.core->task_events(TaskId(1)), (std::vector<EventId>{x.id(), p.id()}));
  EXPECT_EQ(f.state(x), EventState::kActive);
  EXPECT_EQ(f.state(p), EventState::kInactive);
  auto usage = f.arb->snapshot().usage[0][0];
  EXPECT_EQ(usage.max_task_pinned, 0);
  EXPECT_EQ(usage.flexible_count, 2);
  // Both rotate now.
  ASSERT_TRUE(f.core->tick(CpuId(0)));
  EXPECT_EQ(f.state(p), EventState::kActive);
  EXPECT_EQ(f.state(x), EventState::kInactive);
  // flexible -> pinned: goes before the flexible ones and takes the counter.
  ASSERT_TRUE(f.core->modify(x.id(), attr(true), of_task(1)));
  EXPECT_EQ(f.core->task_events(TaskId(1)), (std::vector<EventId>{x.id(), p.id()}));
  EXPECT_TRUE(x.event()->attr().pinned);
  EXPECT_EQ(f.state(x), EventState::kActive);
  EXPECT_EQ(f.state(p), EventState::kInactive);
  usage = f.arb->snapshot().usage[0][0];
  EXPECT_EQ(usage.max_task_pinned, 1);
  EXPECT_EQ(usage.flexible_count, 1);
  // Ticks no longer move the pinned one.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(f.core->tick(CpuId(0)));
    EXPECT_EQ(f.state(x), EventState::kActive);
  }
}

TEST(CoreModify, DisabledAndEnabled) {
  Fixture f;
  auto e = f.open(attr(true), on_cpu(0));
  f.clock.advance(10);
  ASSERT_TRUE(f.core->modify(e.id(), attr(true, false, /*disabled=*/true), on_cpu(0)));
  EXPECT_EQ(f.state(e), EventState::kOff);
  EXPECT_EQ(f.pmu.active(CpuId(0)), 0);
  EXPECT_TRUE(f.arb->is_used());  // holds its reservation
  f.clock.advance(100);
  EXPECT_EQ(f.read(e), (ReadValue{0, 10, 10}));
  // Disabled again: still OFF.
  ASSERT_TRUE(f.core->modify(e.id(), attr(true, false, true), on_cpu(0)));
  EXPECT_EQ(f.state(e), EventState::kOff);
  ASSERT_TRUE(f.core->modify(e.id(), attr(true), on_cpu(0)));
  EXPECT_EQ(f.state(e), EventState::kActive);
  f.clock.advance(5);
  EXPECT_EQ(f.read(e), (ReadValue{0, 15, 15}));
  // Opened disabled, enabled by modify.
  auto d = f.open(attr(false, false, true), on_cpu(1));
  EXPECT_EQ(f.state(d), EventState::kOff);
  ASSERT_TRUE(f.core->modify(d.id(), attr(false), on_cpu(1)));
  EXPECT_EQ(f.state(d), EventState::kActive);
}

TEST(CoreModify, EnablingBringsAnErrorEventBackToInactive) {
  Fixture f(/*counters=*/1);
  auto a = f.open(attr(true), of_task(1));
  auto b = f.open(attr(true), of_task(1));
  ASSERT_TRUE(f.core->sched_in(CpuId(0), TaskId(1)));
  ASSERT_EQ(f.state(a), EventState::kActive);
  ASSERT_EQ(f.state(b), EventState::kError);
  ASSERT_TRUE(f.core->sched_out(CpuId(0), TaskId(1)));
  EXPECT_EQ(f.state(b), EventState::kError);
  ASSERT_TRUE(f.core->modify(b.id(), attr(true), of_task(1)));
  EXPECT_EQ(f.state(b), EventState::kInactive);
  ASSERT_TRUE(a.close());
  ASSERT_TRUE(f.core->sched_in(CpuId(0), TaskId(1)));
  EXPECT_EQ(f.state(b), EventState::kActive);
  // ERROR -> OFF with disabled set.
  auto c = f.open(attr(true), of_task(1));
  EXPECT_EQ(f.state(c), EventState::kError);
  ASSERT_TRUE(f.core->modify(c.id(), attr(true, false, true), of_task(1)));
  EXPECT_EQ(f.state(c), EventState::kOff);
}

// ---- CPU hotplug ----

TEST(CoreHotplug, OfflineNeedsAnIdleCpuAndTakesItsEventsOff) {
  Fixture f;
  auto p = f.open(attr(true), on_cpu(1));
  auto x = f.open(attr(false), on_cpu(1));
  auto t = f.open(attr(true), of_task(5));
  EXPECT_EQ(f.pmu.active(CpuId(1)), 2);
  ASSERT_TRUE(f.core->sched_in(CpuId(1), TaskId(5)));
  auto r = f.core->set_cpu_online(CpuId(1), false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kBusy);
  EXPECT_TRUE(f.core->cpu_online(CpuId(1)));
  EXPECT_EQ(f.pmu.active(CpuId(1)), 3);
  ASSERT_TRUE(f.core->sched_out(CpuId(1), TaskId(5)));
  f.clock.set(10);
  ASSERT_TRUE(f.core->set_cpu_online(CpuId(1), false));
  EXPECT_FALSE(f.core->cpu_online(CpuId(1)));
  EXPECT_EQ(f.pmu.active(CpuId(1)), 0);
  EXPECT_EQ(f.state(p), EventState::kInactive);
  EXPECT_EQ(f.state(x), EventState::kInactive);
  f.clock.set(50);
  EXPECT_EQ(f.read(p), (ReadValue{0, 10, 10}));  // time_enabled stops
  EXPECT_EQ(f.read(x), (ReadValue{0, 10, 10}));
  // Nothing runs there while offline.
  r = f.core->sched_in(CpuId(1), TaskId(5));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kNoDev);
  EXPECT_FALSE(f.core->current(CpuId(1)).has_value());
  ASSERT_TRUE(f.core->tick(CpuId(1)));
  EXPECT_EQ(f.pmu.active(CpuId(1)), 0);
  // A CPU-bound event opened meanwhile waits (the arbiter's online set is the caller's).
  auto late = f.open(attr(true), on_cpu(1));
  EXPECT_EQ(f.state(late), EventState::kInactive);
  // Already offline.
  r = f.core->set_cpu_online(CpuId(1), false);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  // The task runs elsewhere meanwhile.
  ASSERT_TRUE(f.core->sched_in(CpuId(0), TaskId(5)));
  EXPECT_EQ(f.state(t), EventState::kActive);
  ASSERT_TRUE(f.core->sched_out(CpuId(0), TaskId(5)));
  // Online: scheduled again, time accrues again.
  f.clock.set(60);
  ASSERT_TRUE(f.core->set_cpu_online(CpuId(1), true));
  EXPECT_TRUE(f.core->cpu_online(CpuId(1)));
  EXPECT_EQ(f.state(p), EventState::kActive);
  EXPECT_EQ(f.state(x), EventState::kActive);
  EXPECT_EQ(f.state(late), EventState::kActive);
  EXPECT_EQ(f.pmu.active(CpuId(1)), 3);
  f.clock.set(65);
  EXPECT_EQ(f.read(p), (ReadValue{0, 15, 15}));
  EXPECT_EQ(f.read(late), (ReadValue{0, 5, 5}));
  r = f.core->set_cpu_online(CpuId(1), true);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  ASSERT_TRUE(f.core->sched_in(CpuId(1), TaskId(5)));
}

TEST(CoreHotplug, CpuOutOfRange) {
  Fixture f;
  EXPECT_EQ(f.core->set_cpu_online(CpuId(2), false).error().code(), ErrorCode::kInval);
  EXPECT_EQ(f.core->set_cpu_online(CpuId(-1), true).error().code(), ErrorCode::kInval);
  EXPECT_FALSE(f.core->cpu_online(CpuId(2)));
  EXPECT_TRUE(f.core->cpu_online(CpuId(0)));
}

TEST(CoreHotplug, OfflineCpuKeepsPinnedEventsOutOfError) {
  Fixture f(/*counters=*/2);
  std::vector<EventHandle> hs;
  for (int i = 0; i < 3; ++i) hs.push_back(f.open(attr(true), on_cpu(0)));
  EXPECT_EQ(f.state(hs[2]), EventState::kError);  // the PMU has 2 counters
  ASSERT_TRUE(f.core->set_cpu_online(CpuId(0), false));
  EXPECT_EQ(f.state(hs[0]), EventState::kInactive);
  EXPECT_EQ(f.state(hs[1]), EventState::kInactive);
  EXPECT_EQ(f.state(hs[2]), EventState::kError);  // sticks until enabled
  ASSERT_TRUE(f.core->set_cpu_online(CpuId(0), true));
  EXPECT_EQ(f.state(hs[0]), EventState::kActive);
  EXPECT_EQ(f.state(hs[1]), EventState::kActive);
  EXPECT_EQ(f.state(hs[2]), EventState::kError);
}

}  // namespace
}  // namespace hwarb::pmu
