// Rollback under fault injection: for every operation and every k, making the k-th fallible
// internal step fail must return an error and leave dump() exactly as before.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "hwarb/arbiter/arbiter.h"

namespace hwarb::arbiter {
namespace {

Request req(std::optional<int> task, std::optional<int> cpu, int weight = 1, bool pinned = true) {
  Request r;
  if (task) r.task = TaskId(*task);
  if (cpu) r.cpu = CpuId(*cpu);
  r.weight = weight;
  r.pinned = pinned;
  return r;
}

struct Fixture {
  std::unique_ptr<Arbiter> arbiter;
  std::vector<Reservation> held;
};

// A populated arbiter: CPU-bound, task on one CPU, task on all CPUs, flexible, BTS.
Fixture populated() {
  Fixture f;
  f.arbiter = std::move(*Arbiter::create({ArchProfile::x86_64(), 3}));
  for (const Request& r : {req(std::nullopt, 0), req(1, 1), req(1, std::nullopt), req(2, 2),
                           req(3, std::nullopt, 1, false)}) {
    auto res = f.arbiter->reserve(r);
    EXPECT_TRUE(res.has_value());
    f.held.push_back(std::move(*res));
  }
  Request bts;
  bts.kind = ResourceKind::kBts;
  bts.task = TaskId(1);
  f.held.push_back(std::move(*f.arbiter->reserve(bts)));
  return f;
}

using Op = std::function<bool(Fixture&)>;  // true when the operation succeeded

void sweep(const std::string& name, const Op& op) {
  int failures = 0;
  for (int k = 1; k < 64; ++k) {
    Fixture f = populated();
    std::string before = f.arbiter->dump();
    f.arbiter->inject_fault_at(k);
    bool ok = op(f);
    f.arbiter->inject_fault_at(0);
    if (ok) {
      EXPECT_GT(k, 1) << name << ": no fallible step at all";
      return;
    }
    ++failures;
    EXPECT_EQ(f.arbiter->dump(), before) << name << ": state changed when step " << k << " failed";
    auto c = f.arbiter->check_consistency();
    EXPECT_TRUE(c.has_value()) << name << " step " << k << ": " << c.error().to_string();
  }
  ADD_FAILURE() << name << ": still failing after 63 injected steps (" << failures << ")";
}

bool reserve(Fixture& f, const Request& r) {
  auto res = f.arbiter->reserve(r);
  if (!res) {
    EXPECT_EQ(res.error().code(), ErrorCode::kNoMem) << res.error().to_string();
    return false;
  }
  f.held.push_back(std::move(*res));
  return true;
}

TEST(FaultInjectionTest, ReserveNewTaskOnCpu) {
  sweep("reserve new task on cpu", [](Fixture& f) { return reserve(f, req(9, 0)); });
}
TEST(FaultInjectionTest, ReserveExistingTaskNewCpu) {
  sweep("reserve existing task new cpu", [](Fixture& f) { return reserve(f, req(1, 2)); });
}
TEST(FaultInjectionTest, ReserveNewTaskAllCpus) {
  sweep("reserve new task all cpus", [](Fixture& f) { return reserve(f, req(9, std::nullopt)); });
}
TEST(FaultInjectionTest, ReserveCpuBound) {
  sweep("reserve cpu-bound", [](Fixture& f) { return reserve(f, req(std::nullopt, 1)); });
}
TEST(FaultInjectionTest, ReserveFlexibleNewTask) {
  sweep("reserve flexible", [](Fixture& f) { return reserve(f, req(8, 1, 1, false)); });
}
TEST(FaultInjectionTest, ReserveExclusiveKind) {
  sweep("reserve bts", [](Fixture& f) {
    Request bts;
    bts.kind = ResourceKind::kBts;
    bts.cpu = CpuId(2);
    return reserve(f, bts);
  });
}

TEST(FaultInjectionTest, ReserveAll) {
  sweep("reserve_all", [](Fixture& f) {
    std::vector<Request> batch = {req(std::nullopt, 0), req(7, 1), req(7, 2), req(8, std::nullopt),
                                  req(1, 2)};
    auto res = f.arbiter->reserve_all(batch);
    if (!res) {
      EXPECT_EQ(res.error().code(), ErrorCode::kNoMem) << res.error().to_string();
      return false;
    }
    for (auto& r : *res) f.held.push_back(std::move(r));
    return true;
  });
}

TEST(FaultInjectionTest, ModifyToNewCpu) {
  sweep("modify", [](Fixture& f) {
    // held[1] is task 1 on cpu 1: move it to cpu 2 (a new per-CPU entry for task 1).
    auto m = f.arbiter->modify(f.held[1], req(1, 2));
    if (!m) {
      EXPECT_EQ(m.error().code(), ErrorCode::kNoMem) << m.error().to_string();
      EXPECT_EQ(f.held[1].request().cpu, CpuId(1));
    }
    return m.has_value();
  });
}

// Refusals are rollbacks too: a refused reserve_all after partial admission changes nothing.
TEST(FaultInjectionTest, RefusedOperationsChangeNothing) {
  Fixture f = populated();
  std::string before = f.arbiter->dump();
  std::vector<Request> batch = {req(5, 0), req(5, std::nullopt, 2), req(std::nullopt, 0, 3)};
  EXPECT_FALSE(f.arbiter->reserve_all(batch).has_value());
  EXPECT_FALSE(f.arbiter->reserve(req(std::nullopt, 1, 4)).has_value());
  EXPECT_FALSE(f.arbiter->modify(f.held[0], req(std::nullopt, 0, 4)).has_value());
  EXPECT_EQ(f.arbiter->dump(), before);
}

}  // namespace
}  // namespace hwarb::arbiter
