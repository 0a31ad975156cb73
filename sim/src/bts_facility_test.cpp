// The simulated CPU's Branch Trace Store: Machine::branch()/run() against x86::store_bts's rules,
// the PMI handler and the per-CPU BTS state.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hwarb/sim/branch_walk.h"
#include "hwarb/sim/machine.h"
#include "hwarb/x86/bts.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::sim {
namespace {

using x86::BtsFormat;
using x86::BtsRecord;
using x86::DsArea;

constexpr std::uint64_t kOn = x86::debugctl::kTr | x86::debugctl::kBts;
constexpr std::uint64_t kOnInt = kOn | x86::debugctl::kBtint;
constexpr std::uint64_t kBase = 0x7f0000010000;
constexpr std::uint64_t kUser = 0x401000;
constexpr std::uint64_t kKernel = 0xffffffff81001000;

// A DS area of `records` records at kBase with the threshold after `threshold` records.
DsArea area_of(BtsFormat f, std::uint64_t records, std::uint64_t threshold) {
  const std::uint64_t size = x86::bts::record_size(f);
  DsArea a;
  a.bts_buffer_base = kBase;
  a.bts_index = kBase;
  a.bts_absolute_maximum = kBase + records * size;
  a.bts_interrupt_threshold = kBase + threshold * size;
  return a;
}

// The n-th user branch: distinct, fits both formats, alternating predicted.
BtsRecord user_branch(int n) {
  const auto v = static_cast<std::uint64_t>(n);
  return {kUser + 0x10 * v, kUser + 0x10 * v + 0x800, n % 2 == 1};
}

// Calls a function on each PMI.
class OnPmi : public BtsInterruptHandler {
 public:
  std::function<void(CpuId)> act;
  std::vector<CpuId> seen;
  void on_bts_interrupt(CpuId cpu) override {
    seen.push_back(cpu);
    if (act) act(cpu);
  }
};

struct Fixture {
  std::unique_ptr<Machine> m;
  TaskId task;
  CpuId cpu{0};
  std::vector<std::byte> memory;
  OnPmi pmi;

  Fixture() {
    m = std::move(*Machine::create(2));
    task = *m->create_task();
    EXPECT_TRUE(m->switch_to(cpu, task));
    EXPECT_TRUE(m->set_bts_interrupt_handler(&pmi));
  }
  // Installs `area` over fresh memory filled with 0xaa.
  void install(const DsArea& area, std::uint64_t debugctl) {
    memory.assign(area.bts_absolute_maximum - area.bts_buffer_base, std::byte{0xaa});
    auto ok = m->set_ds_area(cpu, area, memory);
    ASSERT_TRUE(ok.has_value()) << ok.error().message();
    ASSERT_TRUE(m->set_debugctl(cpu, debugctl));
  }
  BranchOutcome take(const BtsRecord& r) {
    auto out = m->branch(cpu, task, r.from, r.to, r.predicted);
    EXPECT_TRUE(out.has_value()) << out.error().message();
    return out.value_or(BranchOutcome{});
  }
  // The records between the base and the index, oldest first.
  std::vector<BtsRecord> held() const {
    const DsArea a = *m->ds_area(cpu);
    const std::size_t size = x86::bts::record_size(m->bts_format());
    std::vector<BtsRecord> out;
    for (std::uint64_t at = 0; at < a.bts_index - a.bts_buffer_base; at += size) {
      out.push_back(
          *x86::bts::decode(m->bts_format(), std::span<const std::byte>(memory).subspan(at, size)));
    }
    return out;
  }
  std::uint64_t index() const { return m->ds_area(cpu)->bts_index; }
};

std::string flags(const BranchOutcome& o) {
  std::string s;
  if (o.stored) s += "s";
  if (o.wrapped) s += "w";
  if (o.dropped) s += "d";
  if (o.interrupt) s += "i";
  return s;
}

template <typename T>
void expect_error(const Result<T>& r, ErrorCode code, const std::string& field) {
  ASSERT_FALSE(r.has_value()) << field;
  EXPECT_EQ(r.error().code(), code) << r.error().message();
  EXPECT_TRUE(r.error().message().starts_with(field + ":")) << r.error().message();
}

TEST(BtsFacility, Defaults) {
  Fixture f;
  EXPECT_EQ(f.m->bts_format(), BtsFormat::k64);
  EXPECT_EQ(f.m->kernel_start(), 0x00007ffffffff000u);
  for (int c = 0; c < 2; ++c) {
    EXPECT_EQ(*f.m->debugctl(CpuId(c)), 0u);
    EXPECT_EQ(*f.m->bts_dropped(CpuId(c)), 0u);
    EXPECT_EQ(f.m->ds_area(CpuId(c)).error().code(), ErrorCode::kNoEnt);
  }
  EXPECT_EQ(f.m->debugctl(CpuId(2)).error().code(), ErrorCode::kInval);
  EXPECT_EQ(f.m->bts_dropped(CpuId(-1)).error().code(), ErrorCode::kInval);
  expect_error(f.m->set_debugctl(CpuId(2), kOn), ErrorCode::kInval, "cpu");
  // DEBUGCTL is stored as is, every bit.
  ASSERT_TRUE(f.m->set_debugctl(CpuId(1), ~std::uint64_t{0}));
  EXPECT_EQ(*f.m->debugctl(CpuId(1)), ~std::uint64_t{0});
}

TEST(BtsFacility, OffOrWithoutAreaStoresNothingButTheBranchHappens) {
  Fixture f;
  // BTS on, no DS area.
  ASSERT_TRUE(f.m->set_debugctl(f.cpu, kOnInt));
  EXPECT_EQ(flags(f.take(user_branch(0))), "");
  // An area, BTS off (BTS without TR, TR without BTS, nothing).
  for (std::uint64_t ctl :
       {std::uint64_t{0}, x86::debugctl::kBts | x86::debugctl::kBtint, x86::debugctl::kTr}) {
    f.install(area_of(BtsFormat::k64, 4, 4), ctl);
    const std::uint64_t t0 = f.m->now();
    EXPECT_EQ(flags(f.take(user_branch(1))), "");
    EXPECT_EQ(f.index(), kBase);
    EXPECT_EQ(f.memory, std::vector<std::byte>(4 * 24, std::byte{0xaa}));
    EXPECT_EQ(f.m->now(), t0 + kAccessNs);
  }
  EXPECT_TRUE(f.pmi.seen.empty());
}

TEST(BtsFacility, StoresDecodableRecordsAtTheIndex) {
  Fixture f;
  f.install(area_of(BtsFormat::k64, 8, 9), kOn);
  std::vector<BtsRecord> expected;
  for (int n = 0; n < 5; ++n) {
    const std::uint64_t t0 = f.m->now();
    EXPECT_EQ(flags(f.take(user_branch(n))), "s");
    expected.push_back(user_branch(n));
    EXPECT_EQ(f.index(), kBase + 24 * static_cast<std::uint64_t>(n + 1));
    EXPECT_EQ(f.held(), expected);
    EXPECT_EQ(f.m->now(), t0 + 1);
  }
  // The bytes of record 1 by hand: from, to, flags with P (bit 4).
  const std::vector<std::byte> rec1(f.memory.begin() + 24, f.memory.begin() + 48);
  EXPECT_EQ(rec1[0], std::byte{0x10});
  EXPECT_EQ(rec1[1], std::byte{0x10});
  EXPECT_EQ(rec1[2], std::byte{0x40});
  EXPECT_EQ(rec1[8], std::byte{0x10});
  EXPECT_EQ(rec1[9], std::byte{0x18});
  EXPECT_EQ(rec1[16], std::byte{0x10});
  EXPECT_EQ(f.memory[5 * 24], std::byte{0xaa});
  // Only the index moved.
  DsArea a = area_of(BtsFormat::k64, 8, 9);
  a.bts_index = kBase + 5 * 24;
  EXPECT_EQ(*f.m->ds_area(f.cpu), a);
}

TEST(BtsFacility, IpIsTheTargetAndTimeAdvancesOneNanosecondPerBranch) {
  Fixture f;
  const std::uint64_t t0 = f.m->now();
  for (int n = 0; n < 10; ++n) {
    ASSERT_TRUE(f.m->branch(f.cpu, f.task, kUser, kUser + 0x40 + static_cast<std::uint64_t>(n)));
  }
  EXPECT_EQ(f.m->now(), t0 + 10);
  // The ip shows as the ip of a data access's debug exception: arm a write breakpoint.
  class Log : public DebugExceptionHandler {
   public:
    std::uint64_t ip = 0;
    void on_debug_exception(const DebugException& e) override { ip = e.ip; }
  } log;
  ASSERT_TRUE(f.m->set_debug_handler(&log));
  ASSERT_TRUE(f.m->set_debug_address(f.cpu, 0, 0x9000));
  ASSERT_TRUE(f.m->set_dr7(f.cpu, x86::dr7::install(0, 0, x86::DrType::kWrite, x86::DrLen::k4)));
  ASSERT_TRUE(f.m->access(f.cpu, f.task, AccessKind::kWrite, 0x9000, 4, 1));
  EXPECT_EQ(log.ip, kUser + 0x40 + 9);
  ASSERT_TRUE(f.m->set_debug_handler(nullptr));
}

TEST(BtsFacility, PrivilegeFiltersUseTheKernelStart) {
  const std::uint64_t ks = 0x00007ffffffff000;
  struct Row {
    std::uint64_t ctl;
    std::string stored;  // "u" user branch stored, "k" kernel branch stored
  };
  for (const Row& row : {Row{kOn, "uk"}, Row{kOn | x86::debugctl::kBtsOffOs, "u"},
                         Row{kOn | x86::debugctl::kBtsOffUsr, "k"},
                         Row{kOn | x86::debugctl::kBtsOffOs | x86::debugctl::kBtsOffUsr, ""}}) {
    Fixture f;
    f.install(area_of(BtsFormat::k64, 16, 17), row.ctl);
    std::vector<BtsRecord> expected;
    // The boundary: ks - 1 is user, ks is kernel; where the branch goes does not matter.
    for (const BtsRecord& r : {BtsRecord{ks - 1, kKernel, true}, BtsRecord{ks, kUser, false},
                               BtsRecord{kUser, kKernel, false}, BtsRecord{kKernel, kUser, true}}) {
      const bool kernel = r.from >= ks;
      const bool stored = row.stored.find(kernel ? 'k' : 'u') != std::string::npos;
      EXPECT_EQ(f.take(r).stored, stored) << row.ctl << " " << r.from;
      if (stored) expected.push_back(r);
    }
    EXPECT_EQ(f.held(), expected);
  }
}

TEST(BtsFacility, CircularBufferOverwritesTheOldest) {
  Fixture f;
  // BTINT clear: no PMI even with a threshold inside the buffer.
  f.install(area_of(BtsFormat::k64, 4, 2), kOn);
  for (int n = 0; n < 4; ++n) EXPECT_EQ(flags(f.take(user_branch(n))), "s");
  EXPECT_EQ(flags(f.take(user_branch(4))), "sw");
  EXPECT_EQ(f.index(), kBase + 24);
  EXPECT_EQ(flags(f.take(user_branch(5))), "s");
  // Slots: 4, 5, 2, 3.
  ASSERT_TRUE(f.m->set_bts_index(f.cpu, kBase + 4 * 24));
  EXPECT_EQ(f.held(), (std::vector<BtsRecord>{user_branch(4), user_branch(5), user_branch(2),
                                              user_branch(3)}));
  EXPECT_TRUE(f.pmi.seen.empty());
  EXPECT_EQ(*f.m->bts_dropped(f.cpu), 0u);
}

TEST(BtsFacility, HandlerDrainsAtTheThresholdAndNothingIsLost) {
  for (std::uint64_t threshold : {std::uint64_t{3}, std::uint64_t{8}}) {
    Fixture f;
    f.install(area_of(BtsFormat::k64, 8, threshold), kOnInt);
    std::vector<BtsRecord> drained;
    std::vector<int> pmi_at;  // the branch number of each PMI
    int n = 0;
    f.pmi.act = [&](CpuId cpu) {
      EXPECT_EQ(cpu, f.cpu);
      pmi_at.push_back(n);
      for (const BtsRecord& r : f.held()) drained.push_back(r);
      ASSERT_TRUE(f.m->set_bts_index(cpu, kBase));
    };
    std::vector<BtsRecord> all;
    for (n = 0; n < 100; ++n) {
      const BranchOutcome o = f.take(user_branch(n));
      all.push_back(user_branch(n));
      EXPECT_TRUE(o.stored);
      EXPECT_EQ(o.interrupt, (n + 1) % static_cast<int>(threshold) == 0) << n;
    }
    for (const BtsRecord& r : f.held()) drained.push_back(r);
    EXPECT_EQ(drained, all);
    EXPECT_EQ(f.pmi.seen.size(), 100 / threshold);
    EXPECT_EQ(pmi_at.front(), static_cast<int>(threshold) - 1);
    EXPECT_EQ(*f.m->bts_dropped(f.cpu), 0u);
  }
}

TEST(BtsFacility, UndrainedBufferDropsAndCountsThem) {
  Fixture f;
  f.install(area_of(BtsFormat::k64, 4, 2), kOnInt);
  std::string seq;
  for (int n = 0; n < 10; ++n) seq += flags(f.take(user_branch(n))) + ",";
  EXPECT_EQ(seq, "s,si,s,s,d,d,d,d,d,d,");
  EXPECT_EQ(f.pmi.seen.size(), 1u);
  EXPECT_EQ(*f.m->bts_dropped(f.cpu), 6u);
  EXPECT_EQ(f.held(), (std::vector<BtsRecord>{user_branch(0), user_branch(1), user_branch(2),
                                              user_branch(3)}));
  // Filtered branches are not drops.
  ASSERT_TRUE(f.m->set_debugctl(f.cpu, kOnInt | x86::debugctl::kBtsOffUsr));
  EXPECT_EQ(flags(f.take(user_branch(10))), "");
  EXPECT_EQ(*f.m->bts_dropped(f.cpu), 6u);
  // Draining lets it store again; the count stays (it only grows).
  ASSERT_TRUE(f.m->set_debugctl(f.cpu, kOnInt));
  ASSERT_TRUE(f.m->set_bts_index(f.cpu, kBase));
  EXPECT_EQ(flags(f.take(user_branch(11))), "s");
  EXPECT_EQ(*f.m->bts_dropped(f.cpu), 6u);
  EXPECT_EQ(*f.m->bts_dropped(CpuId(1)), 0u);
}

TEST(BtsFacility, WhatTheHandlerMayAndMayNotDo) {
  Fixture f;
  f.install(area_of(BtsFormat::k64, 4, 1), kOnInt);
  std::vector<std::byte> other(8 * 24);
  bool ran = false;
  f.pmi.act = [&](CpuId cpu) {
    ran = true;
    // Scheduling and scripted calls are refused.
    expect_error(f.m->switch_to_idle(cpu), ErrorCode::kBusy, "machine");
    expect_error(f.m->tick(cpu), ErrorCode::kBusy, "machine");
    EXPECT_EQ(f.m->branch(cpu, f.task, kUser, kUser).error().code(), ErrorCode::kBusy);
    EXPECT_EQ(f.m->exec(cpu, f.task, kUser).error().code(), ErrorCode::kBusy);
    expect_error(f.m->set_bts_format(BtsFormat::k32), ErrorCode::kBusy, "machine");
    expect_error(f.m->set_bts_interrupt_handler(nullptr), ErrorCode::kBusy, "machine");
    expect_error(f.m->exit(f.task), ErrorCode::kBusy, "machine");
    // The BTS state, set_stopped and reads are allowed.
    EXPECT_TRUE(f.m->ds_area(cpu).has_value());
    EXPECT_EQ(*f.m->debugctl(cpu), kOnInt);
    EXPECT_TRUE(f.m->set_debugctl(cpu, kOn).has_value());
    EXPECT_TRUE(f.m->set_bts_index(cpu, kBase).has_value());
    EXPECT_TRUE(f.m->clear_ds_area(cpu).has_value());
    EXPECT_TRUE(f.m->set_ds_area(cpu, area_of(BtsFormat::k64, 8, 9), other).has_value());
    EXPECT_TRUE(f.m->set_stopped(f.task, true).has_value());
    EXPECT_TRUE(f.m->set_stopped(f.task, false).has_value());
    EXPECT_TRUE(f.m->bts_dropped(cpu).has_value());
    EXPECT_TRUE(f.m->current(cpu).has_value());
  };
  EXPECT_EQ(flags(f.take(user_branch(0))), "si");
  EXPECT_TRUE(ran);
  // What the handler set holds afterwards, and the next branch goes to the new area.
  EXPECT_EQ(*f.m->debugctl(f.cpu), kOn);
  EXPECT_EQ(f.take(user_branch(1)).stored, true);
  EXPECT_EQ(*x86::bts::decode(BtsFormat::k64, other), user_branch(1));
}

TEST(BtsFacility, BranchFromAnObserverIsRefused) {
  Fixture f;
  class Probe : public SchedulerObserver {
   public:
    Machine* m = nullptr;
    TaskId task;
    std::vector<std::string> log;
    void on_tick(CpuId cpu) override {
      auto b = m->branch(cpu, task, kUser, kUser);
      log.push_back(b ? "branch ok" : "branch " + errno_name(b.error().code()));
      log.push_back(m->set_debugctl(cpu, kOn) ? "set_debugctl ok" : "set_debugctl refused");
    }
  } probe;
  probe.m = f.m.get();
  probe.task = f.task;
  ASSERT_TRUE(f.m->add_observer(&probe));
  ASSERT_TRUE(f.m->tick(f.cpu));
  EXPECT_EQ(probe.log, (std::vector<std::string>{"branch EBUSY", "set_debugctl ok"}));
  EXPECT_EQ(*f.m->debugctl(f.cpu), kOn);
  ASSERT_TRUE(f.m->remove_observer(&probe));
}

TEST(BtsFacility, HandlerThatStopsTheTaskEndsRunEarly) {
  Fixture f;
  auto walk = BranchWalk::generate(7);
  ASSERT_TRUE(walk.has_value());
  f.install(area_of(BtsFormat::k64, 64, 50), kOnInt);
  f.pmi.act = [&](CpuId) { ASSERT_TRUE(f.m->set_stopped(f.task, true)); };
  const std::uint64_t t0 = f.m->now();
  auto n = f.m->run(f.cpu, f.task, *walk, 1000);
  ASSERT_TRUE(n.has_value()) << n.error().message();
  // Every branch is stored (user and kernel), so the 50th raises the PMI and the run ends there.
  EXPECT_EQ(*n, 50u);
  EXPECT_EQ(walk->branches(), 50u);
  EXPECT_EQ(f.m->now(), t0 + 50);
  EXPECT_EQ(f.held().size(), 50u);
  // Stopped: run and branch are refused and take nothing from the walk.
  EXPECT_EQ(f.m->run(f.cpu, f.task, *walk, 10).error().code(), ErrorCode::kBusy);
  EXPECT_EQ(f.m->branch(f.cpu, f.task, kUser, kUser).error().code(), ErrorCode::kBusy);
  EXPECT_EQ(walk->branches(), 50u);
  // The tracer resumes it; the rest of the buffer fills without another PMI.
  ASSERT_TRUE(f.m->set_stopped(f.task, false));
  n = f.m->run(f.cpu, f.task, *walk, 30);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(*n, 30u);
  EXPECT_EQ(f.held().size(), 64u);
  EXPECT_EQ(*f.m->bts_dropped(f.cpu), 16u);
  EXPECT_EQ(f.pmi.seen.size(), 1u);
  // The records are the walk's branches, in order.
  auto again = BranchWalk::generate(7);
  const std::vector<BtsRecord> held = f.held();
  for (const BtsRecord& r : held) {
    const TakenBranch b = again->next();
    EXPECT_EQ(r, (BtsRecord{b.from, b.to, b.predicted}));
  }
  // Zero branches: nothing happens.
  EXPECT_EQ(*f.m->run(f.cpu, f.task, *walk, 0), 0u);
}

TEST(BtsFacility, ThirtyTwoBitFormat) {
  Fixture f;
  ASSERT_TRUE(f.m->set_bts_format(BtsFormat::k32));
  EXPECT_EQ(f.m->bts_format(), BtsFormat::k32);
  EXPECT_EQ(f.m->kernel_start(), 0xc0000000u);
  // A 64-bit base does not fit the 32-bit form.
  f.memory.assign(48, std::byte{0});
  expect_error(f.m->set_ds_area(f.cpu, area_of(BtsFormat::k32, 4, 5), f.memory), ErrorCode::kInval,
               "bts_buffer_base");
  DsArea a;
  a.bts_buffer_base = 0x8000;
  a.bts_index = 0x8000;
  a.bts_absolute_maximum = 0x8000 + 4 * 12;
  a.bts_interrupt_threshold = 0x8000 + 4 * 12;
  f.memory.assign(48, std::byte{0xaa});
  ASSERT_TRUE(f.m->set_ds_area(f.cpu, a, f.memory));
  ASSERT_TRUE(f.m->set_debugctl(f.cpu, kOnInt | x86::debugctl::kBtsOffOs));
  // Kernel is from 0xc0000000 on: filtered; user below it: stored as 12-byte records.
  EXPECT_EQ(flags(f.take({0xc0000000, 0x08048000, true})), "");
  EXPECT_EQ(flags(f.take({0xbfffffff, 0x08048000, true})), "s");
  EXPECT_EQ(flags(f.take({0x08048010, 0xc0001000, false})), "s");
  EXPECT_EQ(f.index(), 0x8000u + 24);
  EXPECT_EQ(f.held(), (std::vector<BtsRecord>{{0xbfffffff, 0x08048000, true},
                                              {0x08048010, 0xc0001000, false}}));
  EXPECT_EQ(f.memory[24], std::byte{0xaa});
  // A 64-bit address cannot be stored: EINVAL, and the branch did not happen.
  const std::uint64_t t0 = f.m->now();
  auto bad = f.m->branch(f.cpu, f.task, 0x08048000, 0x100000000);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), ErrorCode::kInval);
  EXPECT_TRUE(bad.error().message().starts_with("to:")) << bad.error().message();
  EXPECT_EQ(f.m->now(), t0);
  EXPECT_EQ(f.index(), 0x8000u + 24);
  // A 64-bit walk on a 32-bit machine is refused; a 32-bit one runs.
  auto w64 = BranchWalk::generate(1);
  expect_error(f.m->run(f.cpu, f.task, *w64, 10), ErrorCode::kInval, "walk");
  EXPECT_EQ(w64->branches(), 0u);
  auto w32 = BranchWalk::generate(1, {.format = BtsFormat::k32});
  ASSERT_TRUE(f.m->set_debugctl(f.cpu, kOn));
  auto n = f.m->run(f.cpu, f.task, *w32, 1000);
  ASSERT_TRUE(n.has_value()) << n.error().message();
  EXPECT_EQ(*n, 1000u);
  // Back to 64-bit once no CPU has an area.
  expect_error(f.m->set_bts_format(BtsFormat::k64), ErrorCode::kBusy, "format");
  ASSERT_TRUE(f.m->clear_ds_area(f.cpu));
  ASSERT_TRUE(f.m->set_bts_format(BtsFormat::k64));
  EXPECT_EQ(f.m->kernel_start(), 0x00007ffffffff000u);
}

TEST(BtsFacility, FailedCallsChangeNothing) {
  Fixture f;
  const DsArea good = area_of(BtsFormat::k64, 4, 3);
  f.install(good, kOn);
  ASSERT_TRUE(f.take(user_branch(0)).stored);
  DsArea now = good;
  now.bts_index = kBase + 24;
  const std::vector<std::byte> memory_before = f.memory;
  const std::uint64_t t0 = f.m->now();

  // Bad areas: the validator's message; the installed area stays.
  DsArea bad = good;
  bad.bts_index = kBase + 5;
  expect_error(f.m->set_ds_area(f.cpu, bad, f.memory), ErrorCode::kInval, "bts_index");
  bad = good;
  bad.bts_absolute_maximum = kBase;
  expect_error(f.m->set_ds_area(f.cpu, bad, f.memory), ErrorCode::kInval, "bts_absolute_maximum");
  std::vector<std::byte> small(4 * 24 - 1);
  expect_error(f.m->set_ds_area(f.cpu, good, small), ErrorCode::kInval, "buffer");
  expect_error(f.m->set_ds_area(CpuId(5), good, f.memory), ErrorCode::kInval, "cpu");
  // Bad indexes.
  expect_error(f.m->set_bts_index(f.cpu, kBase + 4 * 24 + 24), ErrorCode::kInval, "bts_index");
  expect_error(f.m->set_bts_index(f.cpu, kBase + 1), ErrorCode::kInval, "bts_index");
  expect_error(f.m->set_bts_index(CpuId(1), kBase), ErrorCode::kNoEnt, "cpu");
  // The format cannot change under an installed area.
  expect_error(f.m->set_bts_format(BtsFormat::k32), ErrorCode::kBusy, "format");
  EXPECT_EQ(f.m->bts_format(), BtsFormat::k64);
  EXPECT_EQ(*f.m->ds_area(f.cpu), now);

  // Branches that cannot happen: not running, idle CPU, offline CPU, bad CPU, unknown task,
  // stopped task.
  const TaskId other = *f.m->create_task();
  EXPECT_EQ(f.m->branch(f.cpu, other, kUser, kUser).error().code(), ErrorCode::kInval);
  EXPECT_EQ(f.m->branch(CpuId(1), f.task, kUser, kUser).error().code(), ErrorCode::kInval);
  ASSERT_TRUE(f.m->set_online(CpuId(1), false));
  EXPECT_EQ(f.m->branch(CpuId(1), f.task, kUser, kUser).error().code(), ErrorCode::kNoDev);
  EXPECT_EQ(f.m->branch(CpuId(7), f.task, kUser, kUser).error().code(), ErrorCode::kInval);
  EXPECT_EQ(f.m->branch(f.cpu, TaskId(99), kUser, kUser).error().code(), ErrorCode::kSrch);
  ASSERT_TRUE(f.m->set_stopped(f.task, true));
  auto stopped = f.m->branch(f.cpu, f.task, kUser, kUser);
  ASSERT_FALSE(stopped.has_value());
  EXPECT_EQ(stopped.error().code(), ErrorCode::kBusy);
  EXPECT_TRUE(stopped.error().message().starts_with("task:")) << stopped.error().message();
  auto walk = BranchWalk::generate(3);
  EXPECT_EQ(f.m->run(f.cpu, f.task, *walk, 5).error().code(), ErrorCode::kBusy);
  EXPECT_EQ(f.m->run(CpuId(1), f.task, *walk, 5).error().code(), ErrorCode::kNoDev);
  EXPECT_EQ(walk->branches(), 0u);

  EXPECT_EQ(f.m->now(), t0);
  EXPECT_EQ(f.memory, memory_before);
  EXPECT_EQ(*f.m->ds_area(f.cpu), now);
  EXPECT_EQ(*f.m->bts_dropped(f.cpu), 0u);
}

TEST(BtsFacility, StateStaysWithTheCpu) {
  Fixture f;
  const CpuId c1(1);
  std::vector<std::byte> mem1(4 * 24);
  DsArea a = area_of(BtsFormat::k64, 4, 2);
  ASSERT_TRUE(f.m->set_ds_area(c1, a, mem1));
  ASSERT_TRUE(f.m->set_debugctl(c1, kOnInt));
  // Offline: still readable and writable; the state survives offline/online.
  ASSERT_TRUE(f.m->set_online(c1, false));
  EXPECT_EQ(*f.m->ds_area(c1), a);
  ASSERT_TRUE(f.m->set_bts_index(c1, kBase + 24));
  a.bts_index = kBase + 24;
  ASSERT_TRUE(f.m->set_online(c1, true));
  EXPECT_EQ(*f.m->ds_area(c1), a);
  EXPECT_EQ(*f.m->debugctl(c1), kOnInt);
  // Tasks come and go; the CPU keeps tracing into the same area.
  const TaskId t2 = *f.m->create_task();
  ASSERT_TRUE(f.m->switch_to(c1, t2));
  EXPECT_EQ(f.m->branch(c1, t2, kUser, kUser + 8)->interrupt, true);
  ASSERT_TRUE(f.m->switch_to_idle(f.cpu));
  ASSERT_TRUE(f.m->switch_to(c1, f.task));
  for (int n = 0; n < 4; ++n) ASSERT_TRUE(f.m->branch(c1, f.task, kUser, kUser + 16));
  EXPECT_EQ(*f.m->bts_dropped(c1), 2u);
  ASSERT_TRUE(f.m->switch_to_idle(c1));
  ASSERT_TRUE(f.m->set_online(c1, false));
  ASSERT_TRUE(f.m->set_online(c1, true));
  EXPECT_EQ(*f.m->bts_dropped(c1), 2u);
  a.bts_index = a.bts_absolute_maximum;
  EXPECT_EQ(*f.m->ds_area(c1), a);
  // CPU 0 was never touched.
  EXPECT_EQ(f.m->ds_area(f.cpu).error().code(), ErrorCode::kNoEnt);
  EXPECT_EQ(*f.m->debugctl(f.cpu), 0u);
  // Clearing is idempotent and leaves DEBUGCTL alone.
  ASSERT_TRUE(f.m->clear_ds_area(c1));
  ASSERT_TRUE(f.m->clear_ds_area(c1));
  EXPECT_EQ(f.m->ds_area(c1).error().code(), ErrorCode::kNoEnt);
  EXPECT_EQ(*f.m->debugctl(c1), kOnInt);
  ASSERT_TRUE(f.m->set_bts_format(BtsFormat::k32));
}

}  // namespace
}  // namespace hwarb::sim
