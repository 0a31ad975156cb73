// Machine::access_many against access(): the same effects, access by access, and its own
// all-or-nothing checks.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hwarb/sim/machine.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::sim {
namespace {

using x86::DrLen;
using x86::DrType;

std::unique_ptr<Machine> make(int cpus) {
  auto m = Machine::create(cpus);
  EXPECT_TRUE(m.has_value());
  return std::move(*m);
}

// Records every exception; optionally stops the task or clears DR7 at the n-th one.
class Handler : public DebugExceptionHandler {
 public:
  explicit Handler(Machine& m) : m_(m) {}
  std::vector<DebugException> seen;
  int stop_at = 0;    // 1-based: stop the task at this exception
  int disarm_at = 0;  // 1-based: write DR7 = 0 at this exception
  bool clear_dr6 = true;
  void on_debug_exception(const DebugException& e) override {
    seen.push_back(e);
    const int n = static_cast<int>(seen.size());
    if (n == stop_at) {
      EXPECT_TRUE(m_.set_stopped(e.task, true));
    }
    if (n == disarm_at) {
      EXPECT_TRUE(m_.set_dr7(e.cpu, 0));
    }
    if (clear_dr6) {
      EXPECT_TRUE(m_.set_dr6(e.cpu, 0));
    }
  }

 private:
  Machine& m_;
};

// Four slots of every type and length, two of them next to a page boundary.
void arm(Machine& m, CpuId cpu) {
  std::uint64_t dr7 = 0;
  const std::uint64_t addr[4] = {0x1000, 0x1ffe, 0x2004, 0x3001};
  const DrType type[4] = {DrType::kReadWrite, DrType::kWrite, DrType::kReadWrite, DrType::kWrite};
  const DrLen len[4] = {DrLen::k8, DrLen::k2, DrLen::k4, DrLen::k1};
  for (int s = 0; s < 4; ++s) {
    ASSERT_TRUE(m.set_debug_address(cpu, s, addr[s]));
    dr7 = x86::dr7::install(dr7, s, type[s], len[s]);
  }
  ASSERT_TRUE(m.set_dr7(cpu, dr7));
}

// A deterministic stream in [0x0ff0, 0x3010), half of it within 8 bytes of a watched address:
// hits, near misses and accesses across the page boundary at 0x2000.
std::vector<AccessOp> stream(int n, std::uint64_t seed) {
  std::vector<AccessOp> out;
  std::uint64_t x = seed;
  auto next = [&x] {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x >> 33;
  };
  for (int i = 0; i < n; ++i) {
    AccessOp op;
    op.size = 1 << (next() % 4);
    op.kind = next() % 3 == 0 ? AccessKind::kWrite : AccessKind::kRead;
    const std::uint64_t near[4] = {0x1000, 0x1ffe, 0x2004, 0x3001};
    op.addr = next() % 2 == 0 ? near[next() % 4] - 8 + next() % 17 : 0x0ff0 + next() % 0x2020;
    op.value = next() * 0x9e3779b97f4a7c15ull;
    out.push_back(op);
  }
  return out;
}

struct Rig {
  std::unique_ptr<Machine> m = make(2);
  TaskId task{0};
  Handler handler{*m};
  explicit Rig(bool single_step) {
    task = *m->create_task();
    EXPECT_TRUE(m->switch_to(CpuId(1), task));
    arm(*m, CpuId(1));
    EXPECT_TRUE(m->set_single_step(task, single_step));
    EXPECT_TRUE(m->set_debug_handler(&handler));
    EXPECT_TRUE(m->exec(CpuId(1), task, 0x401000));  // a non-zero ip for the exceptions
  }
};

void expect_same_as_access(bool single_step) {
  Rig one(single_step), many(single_step);
  const std::vector<AccessOp> ops = stream(3000, single_step ? 11 : 7);
  std::vector<Outcome> want;
  for (const AccessOp& op : ops) {
    auto r = one.m->access(CpuId(1), one.task, op.kind, op.addr, op.size, op.value);
    ASSERT_TRUE(r);
    want.push_back(*r);
  }
  std::vector<Outcome> got(ops.size());
  std::size_t at = 0;
  int exceptions = 0;
  for (std::size_t chunk : {1u, 7u, 256u, 2736u}) {  // uneven batches, 3000 in all
    auto r = many.m->access_many(CpuId(1), many.task, std::span(ops).subspan(at, chunk),
                                 std::span(got).subspan(at, chunk));
    ASSERT_TRUE(r) << r.error().to_string();
    EXPECT_EQ(r->done, chunk);
    exceptions += r->exceptions;
    at += chunk;
  }
  ASSERT_EQ(at, ops.size());
  int want_exceptions = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(got[i].old_value, want[i].old_value) << i;
    EXPECT_EQ(got[i].new_value, want[i].new_value) << i;
    EXPECT_EQ(got[i].dr6, want[i].dr6) << i;
    EXPECT_EQ(got[i].exceptions, want[i].exceptions) << i;
    want_exceptions += want[i].exceptions;
  }
  EXPECT_EQ(exceptions, want_exceptions);
  EXPECT_GT(want_exceptions, 100);                        // the stream really hits
  EXPECT_LT(want_exceptions, single_step ? 3001 : 1500);  // and really misses
  EXPECT_EQ(many.handler.seen, one.handler.seen);
  EXPECT_EQ(many.m->now(), one.m->now());
  for (std::uint64_t a = 0x0ff0; a < 0x3018; a += 8) {
    EXPECT_EQ(*many.m->read_memory(many.task, a, 8), *one.m->read_memory(one.task, a, 8)) << a;
  }
}

TEST(AccessMany, SameAsAccessOneByOne) {
  expect_same_as_access(false);
}

TEST(AccessMany, SameAsAccessWithSingleStep) {
  expect_same_as_access(true);
}

TEST(AccessMany, WithoutOutcomesReportsTheTotals) {
  Rig rig(false);
  const std::vector<AccessOp> ops = {{AccessKind::kWrite, 8, 0x1000, 5},  // slot 0
                                     {AccessKind::kRead, 4, 0x5000, 0},   // outside the hull
                                     {AccessKind::kWrite, 1, 0x3001, 6},  // slot 3
                                     {AccessKind::kRead, 1, 0x3001, 0}};  // slot 3 is W only
  auto r = rig.m->access_many(CpuId(1), rig.task, ops);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->done, 4u);
  EXPECT_EQ(r->exceptions, 2);
  EXPECT_EQ(r->dr6, x86::dr6::trap_bit(0) | x86::dr6::trap_bit(3));
  EXPECT_EQ(*rig.m->read_memory(rig.task, 0x3001, 1), 6u);
}

TEST(AccessMany, ChecksEverythingBeforeTheFirstAccess) {
  Rig rig(false);
  const std::uint64_t t0 = rig.m->now();
  std::vector<AccessOp> ops = {{AccessKind::kWrite, 8, 0x1000, 5},
                               {AccessKind::kWrite, 4, 0x2000, 6},
                               {AccessKind::kRead, 16, 0x2000, 0}};
  auto r = rig.m->access_many(CpuId(1), rig.task, ops);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), ErrorCode::kInval);
  EXPECT_EQ(r.error().message(), "ops[2]: size: 16 is not 1, 2, 4 or 8");
  ops[2] = {AccessKind::kExec, 1, 0x2000, 0};
  EXPECT_EQ(rig.m->access_many(CpuId(1), rig.task, ops).error().message(),
            "ops[2]: kind: an access is a read or a write (use exec)");
  ops[2] = {AccessKind::kRead, 4, 0xffff'ffff'ffff'fffe, 0};
  EXPECT_EQ(rig.m->access_many(CpuId(1), rig.task, ops).error().message(),
            "ops[2]: addr: 0xfffffffffffffffe + 4 wraps past 2^64");
  ops[2] = {AccessKind::kRead, 4, 0x2000, 0};
  std::vector<Outcome> short_out(2);
  EXPECT_EQ(rig.m->access_many(CpuId(1), rig.task, ops, short_out).error().message(),
            "outcomes: 2 entries for 3 accesses (give none or at least one per access)");
  EXPECT_EQ(rig.m->access_many(CpuId(0), rig.task, ops).error().message(),
            "task: 1 is not running on cpu 0 (running: idle)");
  EXPECT_EQ(rig.m->access_many(CpuId(1), TaskId(9), ops).error().code(), ErrorCode::kSrch);
  ASSERT_TRUE(rig.m->set_stopped(rig.task, true));
  EXPECT_EQ(rig.m->access_many(CpuId(1), rig.task, ops).error().code(), ErrorCode::kBusy);
  // Nothing happened: no memory, no clock, no exception.
  EXPECT_EQ(*rig.m->read_memory(rig.task, 0x1000, 8), 0u);
  EXPECT_EQ(*rig.m->read_memory(rig.task, 0x2000, 4), 0u);
  EXPECT_EQ(rig.m->now(), t0);
  EXPECT_TRUE(rig.handler.seen.empty());
  ASSERT_TRUE(rig.m->set_stopped(rig.task, false));
  auto empty = rig.m->access_many(CpuId(1), rig.task, {});
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->done, 0u);
  EXPECT_EQ(rig.m->now(), t0);
}

TEST(AccessMany, AHandlerThatStopsTheTaskEndsTheBatch) {
  Rig rig(false);
  rig.handler.stop_at = 2;
  const std::vector<AccessOp> ops = {{AccessKind::kWrite, 8, 0x1000, 1},   // exception 1
                                     {AccessKind::kRead, 8, 0x0800, 0},    // miss
                                     {AccessKind::kWrite, 2, 0x1ffe, 2},   // exception 2: stop
                                     {AccessKind::kWrite, 8, 0x0900, 3}};  // not done
  std::vector<Outcome> out(ops.size());
  auto r = rig.m->access_many(CpuId(1), rig.task, ops, out);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->done, 3u);
  EXPECT_EQ(r->exceptions, 2);
  EXPECT_EQ(out[2].dr6, x86::dr6::trap_bit(1));
  EXPECT_EQ(*rig.m->read_memory(rig.task, 0x1ffe, 2), 2u);  // the stopping access completed
  EXPECT_EQ(*rig.m->read_memory(rig.task, 0x0900, 8), 0u);  // the next one did not happen
  EXPECT_EQ(*rig.m->stopped(rig.task), true);
}

TEST(AccessMany, RegisterWritesByTheHandlerApplyToTheNextAccess) {
  Rig rig(false);
  rig.handler.disarm_at = 1;
  const std::vector<AccessOp> ops = {{AccessKind::kWrite, 8, 0x1000, 1},
                                     {AccessKind::kWrite, 8, 0x1000, 2},
                                     {AccessKind::kWrite, 1, 0x3001, 3}};
  auto r = rig.m->access_many(CpuId(1), rig.task, ops);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->done, 3u);
  EXPECT_EQ(r->exceptions, 1);
  EXPECT_EQ(rig.handler.seen.size(), 1u);
}

class Reenter : public DebugExceptionHandler {
 public:
  Machine* m = nullptr;
  std::optional<Error> error;
  void on_debug_exception(const DebugException& e) override {
    const AccessOp op{AccessKind::kRead, 1, 0x10, 0};
    auto r = m->access_many(e.cpu, e.task, std::span(&op, 1));
    if (!r) error = r.error();
  }
};

TEST(AccessMany, RefusedFromACallback) {
  auto m = make(1);
  TaskId t = *m->create_task();
  ASSERT_TRUE(m->switch_to(CpuId(0), t));
  arm(*m, CpuId(0));
  Reenter h;
  h.m = m.get();
  ASSERT_TRUE(m->set_debug_handler(&h));
  ASSERT_TRUE(m->access(CpuId(0), t, AccessKind::kWrite, 0x1000, 8, 1));
  ASSERT_TRUE(h.error.has_value());
  EXPECT_EQ(h.error->code(), ErrorCode::kBusy);
}

}  // namespace
}  // namespace hwarb::sim
