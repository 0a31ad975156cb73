#include "hwarb/arbiter/arbiter.h"

#include <gtest/gtest.h>

#include <iterator>
#include <thread>
#include <vector>

namespace hwarb::arbiter {
namespace {

std::unique_ptr<Arbiter> make(int cpus, ArchProfile profile = ArchProfile::x86_64(),
                              FlexiblePolicy policy = FlexiblePolicy::kMultiplexed) {
  auto a = Arbiter::create({profile, cpus, policy});
  EXPECT_TRUE(a.has_value());
  return std::move(*a);
}

Request cpu_bp(int cpu, int weight = 1) {
  Request r;
  r.cpu = CpuId(cpu);
  r.weight = weight;
  return r;
}
Request task_bp(int task, std::optional<int> cpu, int weight = 1) {
  Request r;
  r.task = TaskId(task);
  if (cpu) r.cpu = CpuId(*cpu);
  r.weight = weight;
  return r;
}
Request flexible(Request r) {
  r.pinned = false;
  return r;
}

// Reserves and keeps the reservations alive; returns whether every one succeeded.
struct Holder {
  std::vector<Reservation> held;
  Result<void> take(Arbiter& a, const Request& r) {
    auto res = a.reserve(r);
    if (!res) return std::unexpected(res.error());
    held.push_back(std::move(*res));
    return {};
  }
};

ErrorCode code_of(const Result<Reservation>& r) {
  return r.has_value() ? static_cast<ErrorCode>(0) : r.error().code();
}

void expect_consistent(const Arbiter& a) {
  auto c = a.check_consistency();
  EXPECT_TRUE(c.has_value()) << c.error().to_string();
}

TEST(ArbiterTest, CreateValidatesCpus) {
  auto bad = Arbiter::create({ArchProfile::x86_64(), 0});
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), ErrorCode::kInval);
  EXPECT_NE(bad.error().message().find("cpus"), std::string::npos);
}

// Case 1: CPU-bound requests fill a CPU's pool; other CPUs are independent.
TEST(ArbiterTest, CpuBoundFillsOnlyItsCpu) {
  auto a = make(2);
  Holder h;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(h.take(*a, cpu_bp(0)));
  EXPECT_EQ(code_of(a->reserve(cpu_bp(0))), ErrorCode::kNoSpc);
  EXPECT_TRUE(h.take(*a, cpu_bp(1)));
  expect_consistent(*a);
}

// Case 1 vs 2: CPU-bound and a task's pinned requests on the same CPU add up.
TEST(ArbiterTest, CpuBoundPlusTaskOnCpu) {
  auto a = make(2);
  Holder h;
  ASSERT_TRUE(h.take(*a, cpu_bp(0, 2)));
  ASSERT_TRUE(h.take(*a, task_bp(1, 0, 2)));
  EXPECT_EQ(code_of(a->reserve(task_bp(1, 0))), ErrorCode::kNoSpc);
  EXPECT_EQ(code_of(a->reserve(cpu_bp(0))), ErrorCode::kNoSpc);
  // Task 1 on cpu 1 is free: only cpu 0 is full.
  EXPECT_TRUE(h.take(*a, task_bp(1, 1, 4)));
}

// Tasks never compete with each other: each gets the whole pool minus CPU-bound use.
TEST(ArbiterTest, TasksAreIndependent) {
  auto a = make(1);
  Holder h;
  ASSERT_TRUE(h.take(*a, cpu_bp(0, 1)));
  ASSERT_TRUE(h.take(*a, task_bp(1, 0, 3)));
  ASSERT_TRUE(h.take(*a, task_bp(2, std::nullopt, 3)));
  EXPECT_EQ(code_of(a->reserve(task_bp(2, 0))), ErrorCode::kNoSpc);
  // A CPU-bound request must fit next to the heaviest task.
  EXPECT_EQ(code_of(a->reserve(cpu_bp(0))), ErrorCode::kNoSpc);
}

// Case 3: a task-on-all-CPUs request must fit on every possible CPU.
TEST(ArbiterTest, TaskOnAllCpusChecksEveryCpu) {
  auto a = make(4);
  Holder h;
  ASSERT_TRUE(h.take(*a, cpu_bp(3, 4)));
  EXPECT_EQ(code_of(a->reserve(task_bp(1, std::nullopt))), ErrorCode::kNoSpc);
  EXPECT_TRUE(h.take(*a, task_bp(1, 2)));
  h.held.erase(h.held.begin());  // releases cpu 3
  EXPECT_TRUE(h.take(*a, task_bp(1, std::nullopt, 3)));
  // Now task 1 uses 3 on every CPU and 4 on cpu 2.
  EXPECT_EQ(code_of(a->reserve(task_bp(1, 2))), ErrorCode::kNoSpc);
  EXPECT_TRUE(h.take(*a, task_bp(1, 1)));
  EXPECT_EQ(code_of(a->reserve(cpu_bp(0, 2))), ErrorCode::kNoSpc);
  EXPECT_TRUE(h.take(*a, cpu_bp(0, 1)));
  expect_consistent(*a);
}

// A task going from all-CPU-only to mixed and back keeps exact accounting.
TEST(ArbiterTest, MixedTransitionsBothWays) {
  auto a = make(3);
  Holder h;
  ASSERT_TRUE(h.take(*a, task_bp(1, std::nullopt, 2)));  // all-only
  ASSERT_TRUE(h.take(*a, task_bp(1, 1, 2)));             // mixed: 4 on cpu 1, 2 elsewhere
  EXPECT_EQ(code_of(a->reserve(cpu_bp(1))), ErrorCode::kNoSpc);
  ASSERT_TRUE(h.take(*a, cpu_bp(0, 2)));
  expect_consistent(*a);
  h.held.erase(h.held.begin() + 1);  // back to all-only
  expect_consistent(*a);
  EXPECT_TRUE(h.take(*a, cpu_bp(1, 2)));
  EXPECT_EQ(code_of(a->reserve(task_bp(1, std::nullopt))), ErrorCode::kNoSpc);
  expect_consistent(*a);
}

TEST(ArbiterTest, ReleaseUndoesAccountingExactly) {
  auto a = make(2);
  std::string empty = a->dump();
  {
    Holder h;
    ASSERT_TRUE(h.take(*a, cpu_bp(0, 2)));
    ASSERT_TRUE(h.take(*a, task_bp(5, std::nullopt, 1)));
    ASSERT_TRUE(h.take(*a, task_bp(5, 1, 1)));
    ASSERT_TRUE(h.take(*a, flexible(task_bp(6, 0))));
    EXPECT_TRUE(a->is_used());
  }
  EXPECT_FALSE(a->is_used());
  EXPECT_EQ(a->dump(), empty);
}

TEST(ArbiterTest, ExplicitReleaseEmptiesTheHandle) {
  auto a = make(1);
  auto r = a->reserve(cpu_bp(0, 4));
  ASSERT_TRUE(r.has_value());
  r->release();
  EXPECT_FALSE(r->valid());
  r->release();  // no-op
  EXPECT_FALSE(a->is_used());
  Reservation moved;
  {
    auto r2 = a->reserve(cpu_bp(0, 4));
    ASSERT_TRUE(r2.has_value());
    moved = std::move(*r2);
  }
  EXPECT_TRUE(a->is_used());
  EXPECT_EQ(moved.request().weight, 4);
}

TEST(ArbiterTest, ValidationErrorsNameTheField) {
  auto a = make(2);
  Request none;
  auto r1 = a->reserve(none);
  ASSERT_FALSE(r1.has_value());
  EXPECT_EQ(r1.error().code(), ErrorCode::kInval);
  EXPECT_NE(r1.error().message().find("cpu"), std::string::npos);

  auto r2 = a->reserve(cpu_bp(2));
  ASSERT_FALSE(r2.has_value());
  EXPECT_EQ(r2.error().code(), ErrorCode::kInval);
  EXPECT_NE(r2.error().message().find("not a possible CPU"), std::string::npos);

  auto r3 = a->reserve(cpu_bp(0, 0));
  ASSERT_FALSE(r3.has_value());
  EXPECT_EQ(r3.error().code(), ErrorCode::kInval);
  EXPECT_NE(r3.error().message().find("weight"), std::string::npos);

  auto r4 = a->reserve(cpu_bp(0, 5));
  ASSERT_FALSE(r4.has_value());
  EXPECT_EQ(r4.error().code(), ErrorCode::kNoSpc);
  EXPECT_NE(r4.error().message().find("exceeds"), std::string::npos);
  EXPECT_FALSE(a->is_used());
}

TEST(ArbiterTest, Arm64PoolsAreSeparate) {
  auto a = make(1, ArchProfile::arm64());
  Holder h;
  Request inst = cpu_bp(0, 6);
  inst.type = SlotType::kInst;
  ASSERT_TRUE(h.take(*a, inst));
  Request data = cpu_bp(0, 4);
  ASSERT_TRUE(h.take(*a, data));
  EXPECT_EQ(code_of(a->reserve(cpu_bp(0))), ErrorCode::kNoSpc);
  inst.weight = 1;
  EXPECT_EQ(code_of(a->reserve(inst)), ErrorCode::kNoSpc);
  expect_consistent(*a);
}

TEST(ArbiterTest, X86InstAndDataShareThePool) {
  auto a = make(1);
  Holder h;
  Request inst = cpu_bp(0, 2);
  inst.type = SlotType::kInst;
  ASSERT_TRUE(h.take(*a, inst));
  ASSERT_TRUE(h.take(*a, cpu_bp(0, 2)));
  EXPECT_EQ(code_of(a->reserve(inst)), ErrorCode::kNoSpc);
}

// Cases 4/5: flexible requests keep one slot between them; pinned ones must leave it.
TEST(ArbiterTest, FlexibleMultiplexed) {
  auto a = make(1);
  Holder h;
  ASSERT_TRUE(h.take(*a, cpu_bp(0, 3)));
  ASSERT_TRUE(h.take(*a, flexible(cpu_bp(0))));
  // Any number of flexible ones join the party.
  for (int t = 1; t <= 5; ++t) ASSERT_TRUE(h.take(*a, flexible(task_bp(t, 0))));
  ASSERT_TRUE(h.take(*a, flexible(task_bp(9, std::nullopt))));
  // The pinned load may not take the reserved slot.
  EXPECT_EQ(code_of(a->reserve(task_bp(1, 0))), ErrorCode::kNoSpc);
  EXPECT_EQ(code_of(a->reserve(cpu_bp(0))), ErrorCode::kNoSpc);
  expect_consistent(*a);
}

TEST(ArbiterTest, FlexibleNeedsAFreeSlotWhenNoneExists) {
  auto a = make(1);
  Holder h;
  ASSERT_TRUE(h.take(*a, cpu_bp(0, 4)));
  EXPECT_EQ(code_of(a->reserve(flexible(cpu_bp(0)))), ErrorCode::kNoSpc);
  EXPECT_EQ(code_of(a->reserve(flexible(task_bp(1, std::nullopt)))), ErrorCode::kNoSpc);
}

TEST(ArbiterTest, FlexibleWeightNeedsThatManyFreeSlots) {
  auto a = make(1);
  Holder h;
  ASSERT_TRUE(h.take(*a, cpu_bp(0, 2)));
  ASSERT_TRUE(h.take(*a, flexible(cpu_bp(0, 2))));
  EXPECT_EQ(code_of(a->reserve(flexible(cpu_bp(0, 3)))), ErrorCode::kNoSpc);
  EXPECT_EQ(code_of(a->reserve(cpu_bp(0))), ErrorCode::kNoSpc);
  EXPECT_TRUE(h.take(*a, flexible(cpu_bp(0, 1))));
}

TEST(ArbiterTest, AsPinnedCountsFlexibleAsPinned) {
  auto a = make(1, ArchProfile::x86_64(), FlexiblePolicy::kAsPinned);
  Holder h;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(h.take(*a, flexible(cpu_bp(0))));
  EXPECT_EQ(code_of(a->reserve(flexible(cpu_bp(0)))), ErrorCode::kNoSpc);
  expect_consistent(*a);
}

TEST(ArbiterTest, ExclusiveKinds) {
  auto a = make(2);
  Request bts;
  bts.kind = ResourceKind::kBts;
  bts.cpu = CpuId(0);
  Request pt = bts;
  pt.kind = ResourceKind::kPt;
  pt.cpu = CpuId(1);
  Holder h;
  ASSERT_TRUE(h.take(*a, bts));
  ASSERT_TRUE(h.take(*a, bts));
  auto busy = a->reserve(pt);
  ASSERT_FALSE(busy.has_value());
  EXPECT_EQ(busy.error().code(), ErrorCode::kBusy);
  Explanation x = a->explain(pt);
  EXPECT_FALSE(x.admitted);
  EXPECT_EQ(x.busy_kind, ResourceKind::kBts);
  // Exclusive kinds use no slots.
  EXPECT_TRUE(h.take(*a, cpu_bp(0, 4)));
  h.held.clear();
  EXPECT_TRUE(h.take(*a, pt));
  Request lbr = pt;
  lbr.kind = ResourceKind::kLbr;
  EXPECT_EQ(code_of(a->reserve(lbr)), ErrorCode::kBusy);
}

TEST(ArbiterTest, ReserveAllIsAllOrNothing) {
  auto a = make(3);
  Holder h;
  ASSERT_TRUE(h.take(*a, cpu_bp(2, 4)));
  std::string before = a->dump();
  std::vector<Request> wide = {cpu_bp(0), cpu_bp(1), cpu_bp(2)};
  auto r = a->reserve_all(wide);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ErrorCode::kNoSpc);
  EXPECT_NE(r.error().message().find("request 2"), std::string::npos);
  EXPECT_EQ(a->dump(), before);
  wide.pop_back();
  auto ok = a->reserve_all(wide);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->size(), 2u);
  expect_consistent(*a);
}

TEST(ArbiterTest, ReserveAllSeesEarlierRequestsOfTheBatch) {
  auto a = make(1);
  std::vector<Request> batch = {task_bp(1, 0, 2), task_bp(1, std::nullopt, 2), task_bp(1, 0)};
  auto r = a->reserve_all(batch);
  ASSERT_FALSE(r.has_value());
  EXPECT_FALSE(a->is_used());
  batch.pop_back();
  EXPECT_TRUE(a->reserve_all(batch).has_value());
}

TEST(ArbiterTest, ModifyChangesOrRollsBack) {
  auto a = make(2);
  Holder h;
  ASSERT_TRUE(h.take(*a, cpu_bp(1, 3)));
  auto r = a->reserve(task_bp(1, 0, 2));
  ASSERT_TRUE(r.has_value());
  std::string before = a->dump();
  // Moving to all CPUs with weight 2 would need 5 on cpu 1.
  auto m = a->modify(*r, task_bp(1, std::nullopt, 2));
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.error().code(), ErrorCode::kNoSpc);
  EXPECT_EQ(a->dump(), before);
  EXPECT_EQ(r->request().cpu, CpuId(0));
  // Weight 1 fits.
  ASSERT_TRUE(a->modify(*r, task_bp(1, std::nullopt, 1)).has_value());
  EXPECT_FALSE(r->request().cpu.has_value());
  expect_consistent(*a);
  // Task and kind cannot change.
  auto t = a->modify(*r, task_bp(2, 0));
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().code(), ErrorCode::kInval);
  EXPECT_NE(t.error().message().find("task"), std::string::npos);
}

TEST(ArbiterTest, ModifyCanReuseItsOwnSlots) {
  auto a = make(1);
  auto r = a->reserve(cpu_bp(0, 4));
  ASSERT_TRUE(r.has_value());
  // Same slots, new type: fits only because the old ones are released first.
  Request inst = cpu_bp(0, 4);
  inst.type = SlotType::kInst;
  EXPECT_TRUE(a->modify(*r, inst).has_value());
  Request flex = flexible(cpu_bp(0, 1));
  EXPECT_TRUE(a->modify(*r, flex).has_value());
  EXPECT_FALSE(r->request().pinned);
  expect_consistent(*a);
}

TEST(ArbiterTest, ModifyMovesCpuBoundBetweenCpus) {
  auto a = make(2);
  auto r = a->reserve(cpu_bp(0, 4));
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(a->modify(*r, cpu_bp(1, 4)).has_value());
  EXPECT_TRUE(a->reserve(cpu_bp(0, 4)).has_value());
  expect_consistent(*a);
}

TEST(ArbiterTest, HotplugKeepsAccounting) {
  auto a = make(2);
  Holder h;
  ASSERT_TRUE(h.take(*a, cpu_bp(1, 4)));
  ASSERT_TRUE(a->set_cpu_online(CpuId(1), false));
  EXPECT_FALSE(a->cpu_online(CpuId(1)));
  EXPECT_EQ(a->online_cpus(), std::vector<CpuId>{CpuId(0)});
  // CPU-bound on an offline CPU: ENODEV.
  EXPECT_EQ(code_of(a->reserve(cpu_bp(1))), ErrorCode::kNoDev);
  // Task requests still count the offline CPU.
  EXPECT_EQ(code_of(a->reserve(task_bp(1, std::nullopt))), ErrorCode::kNoSpc);
  ASSERT_TRUE(a->set_cpu_online(CpuId(1), true));
  EXPECT_EQ(code_of(a->reserve(cpu_bp(1))), ErrorCode::kNoSpc);
  h.held.clear();
  EXPECT_TRUE(a->reserve(cpu_bp(1)).has_value());
  auto bad = a->set_cpu_online(CpuId(9), false);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), ErrorCode::kInval);
}

TEST(ArbiterTest, ExplainNamesCpuPoolAndHolders) {
  auto a = make(2);
  Holder h;
  Request c = cpu_bp(1, 1);
  c.id = RequestId(11);
  ASSERT_TRUE(h.take(*a, c));
  ASSERT_TRUE(h.take(*a, task_bp(7, std::nullopt, 2)));
  ASSERT_TRUE(h.take(*a, task_bp(8, 1, 1)));
  Request want = cpu_bp(1, 1);
  Explanation x = a->explain(want);
  EXPECT_TRUE(x.admitted);
  want.weight = 2;
  x = a->explain(want);
  EXPECT_FALSE(x.admitted);
  EXPECT_EQ(x.code, ErrorCode::kNoSpc);
  EXPECT_EQ(x.cpu, CpuId(1));
  EXPECT_EQ(x.cpu_pinned, 1);
  EXPECT_EQ(x.cpu_holders, std::vector<RequestId>{RequestId(11)});
  EXPECT_EQ(x.heaviest_task, TaskId(7));
  EXPECT_EQ(x.heaviest_task_use, 2);
  EXPECT_NE(x.reason.find("#11"), std::string::npos);
  EXPECT_NE(x.reason.find("task 7"), std::string::npos);
  // The refusal from reserve carries the same reason.
  auto r = a->reserve(want);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().message(), x.reason);
  // Explain of invalid requests reports the code, not an error.
  EXPECT_EQ(a->explain(cpu_bp(5)).code, ErrorCode::kInval);
}

TEST(ArbiterTest, SnapshotRecomputesUsage) {
  auto a = make(2);
  Holder h;
  ASSERT_TRUE(h.take(*a, cpu_bp(0, 1)));
  ASSERT_TRUE(h.take(*a, task_bp(3, std::nullopt, 1)));
  ASSERT_TRUE(h.take(*a, task_bp(3, 0, 1)));
  ASSERT_TRUE(h.take(*a, flexible(cpu_bp(1))));
  Snapshot s = a->snapshot();
  EXPECT_EQ(s.live, 4);
  EXPECT_EQ(s.usage[0][0].cpu_pinned, 1);
  EXPECT_EQ(s.usage[0][0].max_task_pinned, 2);
  EXPECT_EQ(s.usage[0][0].pinned_load(), 3);
  EXPECT_EQ(s.usage[1][0].max_task_pinned, 1);
  EXPECT_EQ(s.usage[1][0].flexible_reserve, 1);
  EXPECT_EQ(s.usage[1][0].flexible_count, 1);
}

TEST(ArbiterTest, ManyTasksAndCpusScale) {
  auto a = make(4096);
  std::vector<Reservation> held;
  for (int t = 0; t < 2000; ++t) {
    auto r = a->reserve(task_bp(t, std::nullopt, 1 + t % 4));
    ASSERT_TRUE(r.has_value());
    held.push_back(std::move(*r));
  }
  // Every CPU now has a task using 4: no CPU-bound request fits anywhere.
  EXPECT_EQ(code_of(a->reserve(cpu_bp(4095))), ErrorCode::kNoSpc);
  expect_consistent(*a);
  held.clear();
  EXPECT_FALSE(a->is_used());
}

// Reservation nodes come from a per-thread cache: nodes reserved on one thread and released on
// others (more than a cache holds), threads that exit with cached nodes, and the nodes reused
// afterwards. The accounting stays exact and, after the last release, nothing is held.
TEST(ArbiterTest, ReservationsReleasedOnOtherThreads) {
  auto a = make(64);
  std::vector<Reservation> held;
  for (int i = 0; i < 200; ++i) {
    auto r = a->reserve(i % 2 == 0 ? cpu_bp(i / 2 % 64) : task_bp(i, std::nullopt));
    ASSERT_TRUE(r.has_value()) << i;
    held.push_back(std::move(*r));
  }
  std::vector<Reservation> first(std::make_move_iterator(held.begin()),
                                 std::make_move_iterator(held.begin() + 100));
  std::vector<Reservation> second(std::make_move_iterator(held.begin() + 100),
                                  std::make_move_iterator(held.end()));
  held.clear();
  std::thread t1([&] { first.clear(); });
  t1.join();
  std::thread t2([&] {
    for (auto& r : second) r.release();
    // This thread's cache is full now; what it reserves comes from it.
    for (int i = 0; i < 40; ++i) {
      auto r = a->reserve(cpu_bp(i % 64));
      ASSERT_TRUE(r.has_value());
      held.push_back(std::move(*r));
    }
  });
  t2.join();
  expect_consistent(*a);
  EXPECT_EQ(a->snapshot().live, 40);
  held.clear();
  EXPECT_FALSE(a->is_used());
  EXPECT_EQ(a->snapshot().live, 0);
}

}  // namespace
}  // namespace hwarb::arbiter
