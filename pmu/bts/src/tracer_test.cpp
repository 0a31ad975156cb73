#include "hwarb/bts/tracer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "hwarb/arbiter/arbiter.h"
#include "hwarb/bts/software_bts.h"

namespace hwarb::bts {
namespace {

constexpr std::size_t kR = kTraceRecordSize;
constexpr std::uint64_t kUserBase = 0x400000;
constexpr std::uint64_t kKernelBase = 0xffff800000000000;

std::size_t records(std::size_t n) {
  return n * kR;
}

template <typename T>
T ok(Result<T> r) {
  if (!r) {
    ADD_FAILURE() << r.error().to_string();
    return T{};
  }
  return std::move(*r);
}

void ok(Result<void> r) {
  EXPECT_TRUE(r.has_value()) << r.error().to_string();
}

template <typename T>
void expect_error(const Result<T>& r, ErrorCode code, const std::string& prefix) {
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), code) << r.error().to_string();
  EXPECT_TRUE(r.error().message().starts_with(prefix)) << r.error().message();
}

std::uint64_t bts_bits(bool kernel, bool user) {
  return x86::debugctl::enable_bts(0, {.kernel = kernel, .user = user, .interrupt = true});
}

// SoftwareBts seen through a counter of program() calls.
class CountingBts final : public BtsHardware {
 public:
  explicit CountingBts(SoftwareBts& inner) : inner_(inner) {}
  void program(CpuId cpu, const x86::DsArea& area, std::span<std::byte> buffer,
               std::uint64_t debugctl) override {
    ++programs;
    inner_.program(cpu, area, buffer, debugctl);
  }
  x86::DsArea ds_area(CpuId cpu) const override { return inner_.ds_area(cpu); }
  void set_bts_index(CpuId cpu, std::uint64_t index) override { inner_.set_bts_index(cpu, index); }
  int programs = 0;

 private:
  SoftwareBts& inner_;
};

// A machine: the software BTS facility, the tracer over it, the PMI wired to on_interrupt.
class Rig {
 public:
  explicit Rig(TracerConfig config = {}, arbiter::Arbiter* arbiter = nullptr)
      : hw_(config.cpus, config.format), counting_(hw_) {
    auto t = Tracer::create(config, counting_, arbiter);
    if (!t) {
      ADD_FAILURE() << t.error().to_string();
      std::abort();
    }
    tracer_ = std::move(*t);
    hw_.set_interrupt_handler([this](CpuId cpu) {
      ++interrupts;
      ok(tracer_->on_interrupt(cpu));
    });
  }

  Tracer& t() { return *tracer_; }
  SoftwareBts& hw() { return hw_; }
  int programs() const { return counting_.programs; }

  // A taken branch on `cpu` with addresses unique to it: the CPU in bits 32-39 of `from`.
  TraceRecord branch(int cpu, bool kernel = false) {
    ++seq_;
    const std::uint64_t from =
        (kernel ? kKernelBase : kUserBase) + (std::uint64_t(cpu) << 32) + seq_ * 16;
    const TraceRecord r = TraceRecord::branch(from, from + 4, seq_ % 2 == 0);
    auto store = hw_.branch(CpuId(cpu), r.from, r.to, r.predicted, kernel);
    EXPECT_TRUE(store.has_value()) << store.error().to_string();
    if (store) {
      EXPECT_FALSE(store->dropped);
      EXPECT_FALSE(store->wrapped);
      last_stored = store->stored;
    }
    return r;
  }
  std::vector<TraceRecord> branches(int cpu, int n, bool kernel = false) {
    std::vector<TraceRecord> out;
    for (int i = 0; i < n; ++i) out.push_back(branch(cpu, kernel));
    return out;
  }
  // Switches `cpu` to `next` (nullopt: idle), prev being what runs there now.
  void run(int cpu, std::optional<TaskId> next, std::uint64_t time = 0) {
    ok(tracer_->on_switch(CpuId(cpu), tracer_->current(CpuId(cpu)), next, time));
  }
  std::vector<TraceRecord> drain(ContextId id, std::uint64_t expect_lost = 0) {
    Drained d = ok(tracer_->drain(id));
    EXPECT_EQ(d.lost, expect_lost);
    return d.records;
  }

  int interrupts = 0;
  bool last_stored = false;

 private:
  SoftwareBts hw_;
  CountingBts counting_;
  std::unique_ptr<Tracer> tracer_;
  std::uint64_t seq_ = 0;
};

ContextConfig task_ctx(std::int64_t task, std::uint32_t flags = kUser | kKernel,
                       BufferMode mode = BufferMode::kWrap, std::size_t n = 256) {
  return {
      .task = TaskId(task), .cpu = std::nullopt, .flags = flags, .mode = mode, .size = records(n)};
}

ContextConfig global_ctx(std::optional<int> cpu = std::nullopt,
                         std::uint32_t flags = kUser | kKernel, BufferMode mode = BufferMode::kWrap,
                         std::size_t n = 256) {
  return {.task = std::nullopt,
          .cpu = cpu ? std::optional<CpuId>(CpuId(*cpu)) : std::nullopt,
          .flags = flags,
          .mode = mode,
          .size = records(n)};
}

std::vector<TraceRecord> concat(std::initializer_list<std::vector<TraceRecord>> parts) {
  std::vector<TraceRecord> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TraceRecord arrives(std::int64_t task, std::uint64_t time) {
  return TraceRecord::sched(RecordKind::kArrives, TaskId(task), time);
}
TraceRecord departs(std::int64_t task, std::uint64_t time) {
  return TraceRecord::sched(RecordKind::kDeparts, TaskId(task), time);
}

// ---- creation ---------------------------------------------------------------------------------

TEST(TracerTest, CreateRejectsBadConfigs) {
  SoftwareBts hw(2, x86::BtsFormat::k64);
  expect_error(Tracer::create({.cpus = 0}, hw, nullptr), ErrorCode::kInval, "cpus: ");
  expect_error(Tracer::create({.cpus = 1, .ds_records = 0}, hw, nullptr), ErrorCode::kInval,
               "ds_records: ");
  expect_error(Tracer::create({.cpus = 1, .ds_records = kMaxBufferBytes}, hw, nullptr),
               ErrorCode::kInval, "ds_records: ");
  // 0x30000000 bytes of 32-bit kernel space above 0xd0000000 hold 768 buffers of 1 MiB.
  expect_error(Tracer::create({.cpus = 769,
                               .format = x86::BtsFormat::k32,
                               .kernel_start = 0xc0000000,
                               .ds_records = (1u << 20) / 12},
                              hw, nullptr),
               ErrorCode::kInval, "ds_records: ");
  expect_error(Tracer::create({.cpus = 1 << 30, .ds_records = kMaxBufferBytes / kR}, hw, nullptr),
               ErrorCode::kInval, "ds_records: ");
  EXPECT_TRUE(Tracer::create({.cpus = 2,
                              .format = x86::BtsFormat::k32,
                              .kernel_start = 0xc0000000,
                              .ds_records = (1u << 20) / 12},
                             hw, nullptr)
                  .has_value());
}

TEST(TracerTest, EveryCpuHasItsOwnValidAreaAndStartsOff) {
  for (auto format : {x86::BtsFormat::k64, x86::BtsFormat::k32}) {
    Rig rig({.cpus = 4, .format = format, .kernel_start = 0xc0000000, .ds_records = 10});
    std::vector<std::uint64_t> bases;
    for (int c = 0; c < 4; ++c) {
      const x86::DsArea area = rig.hw().ds_area(CpuId(c));
      EXPECT_TRUE(x86::ds::validate_bts(format, area).has_value());
      EXPECT_EQ(area.bts_index, area.bts_buffer_base);
      EXPECT_EQ(area.bts_absolute_maximum - area.bts_buffer_base,
                10 * x86::bts::record_size(format));
      EXPECT_EQ(area.bts_interrupt_threshold, area.bts_absolute_maximum);
      if (format == x86::BtsFormat::k32) {
        EXPECT_LT(area.bts_absolute_maximum, std::uint64_t{1} << 32);
      }
      for (std::uint64_t b : bases) {
        EXPECT_TRUE(area.bts_buffer_base >= b + 10 * x86::bts::record_size(format) ||
                    area.bts_absolute_maximum <= b);
      }
      bases.push_back(area.bts_buffer_base);
      EXPECT_EQ(rig.t().programmed_debugctl(CpuId(c)), 0u);
      EXPECT_EQ(rig.hw().debugctl(CpuId(c)), 0u);
    }
    EXPECT_EQ(rig.programs(), 4);
  }
}

TEST(TracerTest, DestructionSwitchesTheFacilityOff) {
  SoftwareBts hw(1, x86::BtsFormat::k64);
  {
    auto t = Tracer::create({}, hw, nullptr);
    ASSERT_TRUE(t.has_value());
    ok((*t)->open(global_ctx()));
    ok((*t)->on_switch(CpuId(0), std::nullopt, TaskId(1), 0));
    EXPECT_NE(hw.debugctl(CpuId(0)), 0u);
  }
  EXPECT_EQ(hw.debugctl(CpuId(0)), 0u);
  auto s = hw.branch(CpuId(0), 1, 2, false, false);
  ASSERT_TRUE(s.has_value());
  EXPECT_FALSE(s->stored);
}

// ---- open errors ------------------------------------------------------------------------------

TEST(TracerTest, OpenRejectsBadConfigsAndKeepsNothing) {
  auto arb = ok(arbiter::Arbiter::create({.cpus = 2}));
  Rig rig({.cpus = 2}, arb.get());
  auto bad = [&](ContextConfig c, const std::string& prefix) {
    expect_error(rig.t().open(c), ErrorCode::kInval, prefix);
    expect_error(rig.t().open_for_event(c), ErrorCode::kInval, prefix);
  };
  ContextConfig c = global_ctx();
  c.flags = 0;
  bad(c, "flags: ");
  c.flags = kSched;
  bad(c, "flags: ");
  c.flags = kUser | 8;
  bad(c, "flags: ");
  c = global_ctx();
  c.size = 0;
  bad(c, "size: ");
  c.size = kR - 1;
  bad(c, "size: ");
  c.size = kMaxBufferBytes + kR;
  bad(c, "size: ");
  c = global_ctx(2);
  bad(c, "cpu: ");
  c = global_ctx(-1);
  bad(c, "cpu: ");
  c = task_ctx(1);
  c.cpu = CpuId(0);
  bad(c, "cpu: ");
  c = global_ctx();
  c.mode = static_cast<BufferMode>(7);
  bad(c, "mode: ");

  EXPECT_TRUE(rig.t().contexts().empty());
  EXPECT_FALSE(arb->is_used());
  EXPECT_EQ(rig.programs(), 2);
  // The first context opened after the failures is the first id.
  EXPECT_EQ(ok(rig.t().open(global_ctx())), ContextId(1));
}

TEST(TracerTest, UnknownContextsAreENOENT) {
  Rig rig;
  const ContextId id(42);
  const std::string msg = "context: 42 is not open";
  auto check = [&](const auto& r) {
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), ErrorCode::kNoEnt);
    EXPECT_EQ(r.error().message(), msg);
  };
  check(rig.t().close(id));
  check(rig.t().start(id));
  check(rig.t().stop(id));
  check(rig.t().set_flags(id, kUser));
  check(rig.t().set_mode(id, BufferMode::kWrap));
  check(rig.t().resize(id, 96));
  check(rig.t().status(id));
  check(rig.t().drain(id));
  check(rig.t().clear(id));
  check(rig.t().size(id));
  check(rig.t().get(id, 0));
  check(rig.t().activate(id, CpuId(0)));
  check(rig.t().deactivate(id, CpuId(0)));
  EXPECT_EQ(rig.t().aux_ring(id), nullptr);
  expect_error(rig.t().on_switch(CpuId(1), std::nullopt, TaskId(1), 0), ErrorCode::kInval, "cpu: ");
  expect_error(rig.t().flush(CpuId(-1)), ErrorCode::kInval, "cpu: ");
  expect_error(rig.t().on_interrupt(CpuId(5)), ErrorCode::kInval, "cpu: ");
  EXPECT_EQ(rig.t().current(CpuId(3)), std::nullopt);
  EXPECT_EQ(rig.t().programmed_debugctl(CpuId(3)), 0u);
}

// ---- sorting ----------------------------------------------------------------------------------

TEST(TracerTest, TaskContextGetsOnlyItsTaskGlobalGetsAll) {
  Rig rig({.cpus = 1});
  const ContextId mine = ok(rig.t().open(task_ctx(1)));
  const ContextId all = ok(rig.t().open(global_ctx()));
  rig.run(0, TaskId(1));
  auto a = rig.branches(0, 3);
  rig.run(0, TaskId(2));
  auto b = rig.branches(0, 2, true);
  rig.run(0, TaskId(1));
  auto c = rig.branches(0, 1, true);
  rig.run(0, std::nullopt);
  rig.branches(0, 2);
  EXPECT_FALSE(rig.last_stored);  // idle: nothing traced
  EXPECT_EQ(rig.drain(mine), concat({a, c}));
  EXPECT_EQ(rig.drain(all), concat({a, b, c}));
}

TEST(TracerTest, TaskContextFollowsItsTaskAcrossCpus) {
  Rig rig({.cpus = 2});
  const ContextId mine = ok(rig.t().open(task_ctx(1)));
  const ContextId cpu1 = ok(rig.t().open(global_ctx(1)));
  rig.run(0, TaskId(1));
  rig.run(1, TaskId(2));
  auto a = rig.branches(0, 2);
  auto b = rig.branches(1, 2);
  rig.run(0, TaskId(3));
  rig.run(1, TaskId(1));
  auto c = rig.branches(1, 2);
  rig.branches(0, 2);
  EXPECT_FALSE(rig.last_stored);
  EXPECT_EQ(rig.drain(mine), concat({a, c}));
  EXPECT_EQ(rig.drain(cpu1), concat({b, c}));
}

TEST(TracerTest, PrivilegeFiltersAndTheProgrammedDebugctl) {
  Rig rig({.cpus = 2});
  const ContextId user = ok(rig.t().open(task_ctx(1, kUser)));
  EXPECT_EQ(rig.t().programmed_debugctl(CpuId(0)), 0u);  // idle
  rig.run(0, TaskId(1));
  EXPECT_EQ(rig.t().programmed_debugctl(CpuId(0)), bts_bits(false, true));
  EXPECT_TRUE(x86::debugctl::bts_off_os(rig.hw().debugctl(CpuId(0))));
  EXPECT_EQ(rig.t().programmed_debugctl(CpuId(1)), 0u);
  auto u1 = rig.branches(0, 2);
  rig.branch(0, true);
  EXPECT_FALSE(rig.last_stored);  // BTS_OFF_OS: the hardware filters it

  const ContextId kernel = ok(rig.t().open(task_ctx(1, kKernel)));
  EXPECT_EQ(rig.t().programmed_debugctl(CpuId(0)), bts_bits(true, true));
  auto k1 = rig.branches(0, 2, true);
  auto u2 = rig.branches(0, 1);
  EXPECT_EQ(rig.drain(user), concat({u1, u2}));
  EXPECT_EQ(rig.drain(kernel), k1);

  ok(rig.t().stop(user));
  EXPECT_EQ(rig.t().programmed_debugctl(CpuId(0)), bts_bits(true, false));
  rig.branch(0, false);
  EXPECT_FALSE(rig.last_stored);
  ok(rig.t().set_flags(kernel, kUser | kKernel | kSched));
  EXPECT_EQ(rig.t().programmed_debugctl(CpuId(0)), bts_bits(true, true));

  rig.run(0, TaskId(2));
  EXPECT_EQ(rig.t().programmed_debugctl(CpuId(0)), 0u);
  EXPECT_EQ(rig.hw().debugctl(CpuId(0)), 0u);
  const ContextId global = ok(rig.t().open(global_ctx()));
  EXPECT_EQ(rig.t().programmed_debugctl(CpuId(0)), bts_bits(true, true));
  EXPECT_EQ(rig.t().programmed_debugctl(CpuId(1)), 0u);  // idle: nothing traced
  rig.run(0, std::nullopt);
  EXPECT_EQ(rig.t().programmed_debugctl(CpuId(0)), 0u);
  ok(rig.t().close(global));
  ok(rig.t().close(kernel));
  ok(rig.t().close(user));
  rig.run(0, TaskId(1));
  EXPECT_EQ(rig.t().programmed_debugctl(CpuId(0)), 0u);
}

TEST(TracerTest, TheKernelBoundaryIsKernelStart) {
  Rig rig({.cpus = 1});
  const ContextId user = ok(rig.t().open(global_ctx(std::nullopt, kUser)));
  const ContextId kernel = ok(rig.t().open(global_ctx(std::nullopt, kKernel)));
  rig.run(0, TaskId(1));
  const std::uint64_t start = rig.t().config().kernel_start;
  // The CPL decides what the hardware stores; `from` decides where the tracer sorts it.
  ASSERT_TRUE(rig.hw().branch(CpuId(0), start - 1, 1, false, false).has_value());
  ASSERT_TRUE(rig.hw().branch(CpuId(0), start, 2, false, true).has_value());
  EXPECT_EQ(rig.drain(user), std::vector<TraceRecord>{TraceRecord::branch(start - 1, 1)});
  EXPECT_EQ(rig.drain(kernel), std::vector<TraceRecord>{TraceRecord::branch(start, 2)});
}

TEST(TracerTest, TheInterruptFlushesAndNothingIsLost) {
  Rig rig({.cpus = 2, .ds_records = 8});
  const ContextId all =
      ok(rig.t().open(global_ctx(std::nullopt, kUser | kKernel, BufferMode::kAux, 4096)));
  const ContextId t1 = ok(rig.t().open(task_ctx(1, kUser, BufferMode::kWrap, 4096)));
  rig.run(0, TaskId(1));
  rig.run(1, TaskId(2));
  const int programs = rig.programs();
  std::vector<TraceRecord> expect_all;
  std::vector<TraceRecord> expect_t1;
  for (int i = 0; i < 1000; ++i) {
    const bool kernel = i % 5 == 0;
    const TraceRecord r = rig.branch(0, kernel);
    expect_all.push_back(r);
    if (!kernel) expect_t1.push_back(r);
  }
  EXPECT_EQ(rig.interrupts, 125);
  EXPECT_EQ(rig.t().records_flushed(), 1000u);
  EXPECT_EQ(rig.programs(), programs);  // flushing never reprograms
  std::vector<TraceRecord> cpu1 = rig.branches(1, 20);
  EXPECT_EQ(rig.interrupts, 127);
  EXPECT_EQ(rig.drain(t1), expect_t1);
  expect_all.insert(expect_all.end(), cpu1.begin(), cpu1.end());
  EXPECT_EQ(rig.drain(all), expect_all);
  EXPECT_EQ(rig.t().records_flushed(), 1020u);
}

TEST(TracerTest, ClosingOrStoppingMidStreamNeverMovesAnothersRecords) {
  Rig rig({.cpus = 1, .ds_records = 16});
  const ContextId all = ok(rig.t().open(global_ctx()));
  rig.run(0, TaskId(1));
  auto a = rig.branches(0, 5);  // in the hardware buffer, not flushed
  const ContextId late = ok(rig.t().open(task_ctx(1)));
  auto b = rig.branches(0, 3);
  const ContextId stopped = ok(rig.t().open(task_ctx(1, kUser | kKernel, BufferMode::kAux)));
  auto c = rig.branches(0, 2);
  ok(rig.t().stop(stopped));
  auto d = rig.branches(0, 2);
  ok(rig.t().close(late));
  auto e = rig.branches(0, 4);
  ok(rig.t().start(stopped));
  auto f = rig.branches(0, 1);
  EXPECT_EQ(rig.drain(all), concat({a, b, c, d, e, f}));
  EXPECT_EQ(rig.drain(stopped), concat({c, f}));
  EXPECT_EQ(rig.t().contexts(), (std::vector<ContextId>{all, stopped}));
}

TEST(TracerTest, SetFlagsAppliesFromTheChangeOn) {
  Rig rig({.cpus = 1, .ds_records = 16});
  const ContextId id = ok(rig.t().open(task_ctx(1)));
  rig.run(0, TaskId(1));
  auto a = concat({rig.branches(0, 2, true), rig.branches(0, 1)});
  ok(rig.t().set_flags(id, kUser));
  rig.branches(0, 2, true);
  auto b = rig.branches(0, 2);
  expect_error(rig.t().set_flags(id, 0), ErrorCode::kInval, "flags: ");
  expect_error(rig.t().set_flags(id, kUser | 64), ErrorCode::kInval, "flags: ");
  EXPECT_EQ(ok(rig.t().status(id)).config.flags, kUser);
  EXPECT_EQ(rig.drain(id), concat({a, b}));
}

TEST(TracerTest, SchedTimestampsFrameEachStretch) {
  Rig rig({.cpus = 2, .ds_records = 16});
  const ContextId mine = ok(rig.t().open(task_ctx(1, kUser | kSched)));
  const ContextId cpu0 = ok(rig.t().open(global_ctx(0, kKernel | kSched)));
  const ContextId plain = ok(rig.t().open(task_ctx(1)));
  rig.run(0, TaskId(1), 100);
  auto a = rig.branches(0, 2);
  auto ak = rig.branches(0, 1, true);
  rig.run(0, TaskId(2), 200);
  auto bk = rig.branches(0, 1, true);
  rig.run(1, TaskId(1), 250);
  auto c = rig.branches(1, 1);
  rig.run(1, std::nullopt, 300);
  rig.run(0, std::nullopt, 400);
  EXPECT_EQ(
      rig.drain(mine),
      concat({{arrives(1, 100)}, a, {departs(1, 200)}, {arrives(1, 250)}, c, {departs(1, 300)}}));
  EXPECT_EQ(
      rig.drain(cpu0),
      concat({{arrives(1, 100)}, ak, {departs(1, 200)}, {arrives(2, 200)}, bk, {departs(2, 400)}}));
  EXPECT_EQ(rig.drain(plain), concat({a, ak, c}));
  // Stopped contexts get no timestamps.
  ok(rig.t().stop(mine));
  rig.run(0, TaskId(1), 500);
  EXPECT_TRUE(rig.drain(mine).empty());
}

TEST(TracerTest, ExitedTasksContextsStayReadableAndInactive) {
  Rig rig({.cpus = 1, .ds_records = 16});
  const ContextId id = ok(rig.t().open(task_ctx(1, kUser | kKernel | kSched)));
  rig.run(0, TaskId(1), 10);
  auto a = rig.branches(0, 3);
  rig.t().on_exit(TaskId(1));
  EXPECT_EQ(ok(rig.t().status(id)).state, ContextState::kInactive);
  EXPECT_EQ(rig.t().programmed_debugctl(CpuId(0)), 0u);
  rig.run(0, TaskId(1), 20);  // a new task with the same id
  rig.branches(0, 2);
  EXPECT_FALSE(rig.last_stored);
  EXPECT_EQ(rig.drain(id), concat({{arrives(1, 10)}, a}));
}

TEST(TracerTest, StatusStatesAndCounts) {
  Rig rig({.cpus = 1, .ds_records = 16});
  ContextConfig c = task_ctx(1, kUser, BufferMode::kWrap, 8);
  c.size = records(8) + 5;
  c.start = false;
  const ContextId id = ok(rig.t().open(c));
  ContextStatus s = ok(rig.t().status(id));
  EXPECT_EQ(s.state, ContextState::kStopped);
  EXPECT_EQ(s.config.size, records(8));
  EXPECT_EQ(s.config.task, TaskId(1));
  EXPECT_EQ(s.capacity, 8u);
  ok(rig.t().start(id));
  EXPECT_EQ(ok(rig.t().status(id)).state, ContextState::kInactive);
  rig.run(0, TaskId(1));
  EXPECT_EQ(ok(rig.t().status(id)).state, ContextState::kActive);
  rig.branches(0, 3);
  s = ok(rig.t().status(id));
  EXPECT_EQ(s.held, 3u);
  EXPECT_EQ(s.written, 3u);
  EXPECT_EQ(s.lost, 0u);
  EXPECT_FALSE(s.full);
  EXPECT_EQ(to_string(s.state), "active");
  EXPECT_EQ(to_string(ContextState::kStopped), "stopped");
  EXPECT_EQ(to_string(ContextState::kInactive), "inactive");
  EXPECT_EQ(to_string(BufferMode::kAux), "aux");
  EXPECT_EQ(to_string(BufferMode::kSnapshot), "snapshot");
  EXPECT_EQ(to_string(BufferMode::kWrap), "wrap");
  EXPECT_EQ(to_string(BufferMode::kSignal), "signal");
}

// ---- buffer modes -----------------------------------------------------------------------------

TEST(TracerTest, AuxModeDropsWhatDoesNotFitAndReportsItOnce) {
  Rig rig({.cpus = 1, .ds_records = 16});
  ContextConfig config = global_ctx(std::nullopt, kUser | kKernel, BufferMode::kAux);
  config.size = records(4) + 10;
  const ContextId id = ok(rig.t().open(config));
  AuxRing* ring = rig.t().aux_ring(id);
  ASSERT_NE(ring, nullptr);
  EXPECT_EQ(ring->capacity(), records(4));
  rig.run(0, TaskId(1));
  auto a = rig.branches(0, 3);
  ok(rig.t().flush(CpuId(0)));
  EXPECT_EQ(ring->head(), records(3));  // one batch
  auto b = rig.branches(0, 2);          // one fits, one is dropped
  ContextStatus s = ok(rig.t().status(id));
  EXPECT_EQ(s.held, 4u);
  EXPECT_EQ(s.lost, 1u);
  EXPECT_EQ(s.total_lost, 1u);
  EXPECT_EQ(s.written, 4u);
  EXPECT_EQ(rig.drain(id, 1), concat({a, {b[0]}}));
  s = ok(rig.t().status(id));
  EXPECT_EQ(s.held, 0u);
  EXPECT_EQ(s.lost, 0u);
  EXPECT_EQ(s.total_lost, 1u);

  // The next batch carries the truncation marker to a consumer; drain reported the loss already.
  auto c = rig.branches(0, 2);
  ok(rig.t().flush(CpuId(0)));
  AuxView view = ring->view();
  AuxChunk chunk;
  ASSERT_TRUE(view.next(chunk));
  EXPECT_EQ(chunk.lost_before, 1u);
  EXPECT_EQ(chunk.data.size(), records(2));
  EXPECT_EQ(rig.drain(id, 0), c);

  // Padding is not counted as held: with one record left before the end, a batch of 2 is
  // preceded by padding and starts at 0.
  rig.branches(0, 1);
  ok(rig.t().flush(CpuId(0)));
  ASSERT_TRUE(rig.t().clear(id).has_value());
  auto d = rig.branches(0, 2);
  ok(rig.t().flush(CpuId(0)));
  s = ok(rig.t().status(id));
  EXPECT_EQ(s.held, 2u);
  EXPECT_EQ(rig.drain(id), d);
  expect_error(rig.t().get(id, 0), ErrorCode::kInval, "mode: ");
  expect_error(rig.t().size(id), ErrorCode::kInval, "mode: ");
  expect_error(rig.t().resize(id, records(8)), ErrorCode::kInval, "mode: ");
  expect_error(rig.t().set_mode(id, BufferMode::kWrap), ErrorCode::kInval, "mode: ");
}

TEST(TracerTest, AuxModeClearForgetsAndRestartsLost) {
  Rig rig({.cpus = 1, .ds_records = 16});
  const ContextId id = ok(rig.t().open(global_ctx(std::nullopt, kUser, BufferMode::kAux, 2)));
  rig.run(0, TaskId(1));
  rig.branches(0, 5);
  EXPECT_EQ(ok(rig.t().status(id)).lost, 3u);
  ok(rig.t().clear(id));
  ContextStatus s = ok(rig.t().status(id));
  EXPECT_EQ(s.held, 0u);
  EXPECT_EQ(s.lost, 0u);
  EXPECT_EQ(s.total_lost, 3u);
  auto a = rig.branches(0, 1);
  EXPECT_EQ(rig.drain(id), a);
}

TEST(TracerTest, SnapshotModeKeepsTheNewest) {
  Rig rig({.cpus = 1, .ds_records = 4});
  const ContextId id = ok(rig.t().open(global_ctx(std::nullopt, kUser, BufferMode::kSnapshot, 4)));
  rig.run(0, TaskId(1));
  auto a = rig.branches(0, 10);
  ContextStatus s = ok(rig.t().status(id));
  EXPECT_EQ(s.held, 4u);
  EXPECT_EQ(s.capacity, 4u);
  EXPECT_EQ(s.lost, 6u);
  EXPECT_EQ(s.written, 10u);
  EXPECT_EQ(rig.drain(id, 6), std::vector<TraceRecord>(a.end() - 4, a.end()));
  EXPECT_TRUE(rig.drain(id, 0).empty());
  rig.branches(0, 5);
  ok(rig.t().clear(id));
  EXPECT_EQ(ok(rig.t().status(id)).lost, 0u);
  EXPECT_EQ(ok(rig.t().status(id)).total_lost, 7u);
  expect_error(rig.t().get(id, 0), ErrorCode::kInval, "mode: ");
}

TEST(TracerTest, WrapModeOverwritesTheOldest) {
  Rig rig({.cpus = 1, .ds_records = 16});
  const ContextId id = ok(rig.t().open(task_ctx(1, kUser, BufferMode::kWrap, 4)));
  rig.run(0, TaskId(1));
  auto a = rig.branches(0, 10);
  EXPECT_EQ(ok(rig.t().size(id)), 4u);
  EXPECT_EQ(ok(rig.t().get(id, 0)), a[9]);
  EXPECT_EQ(ok(rig.t().get(id, 3)), a[6]);
  expect_error(rig.t().get(id, 4), ErrorCode::kInval, "index: ");
  ContextStatus s = ok(rig.t().status(id));
  EXPECT_EQ(s.lost, 6u);
  EXPECT_EQ(s.written, 10u);
  EXPECT_FALSE(s.full);
  EXPECT_EQ(rig.drain(id, 6), std::vector<TraceRecord>(a.end() - 4, a.end()));
  EXPECT_EQ(ok(rig.t().size(id)), 0u);
}

TEST(TracerTest, SignalModeStopsAndCallsTheHandlerOncePerFill) {
  Rig rig({.cpus = 1, .ds_records = 16});
  std::vector<std::pair<ContextId, std::optional<TaskId>>> calls;
  rig.t().set_full_handler([&](ContextId id, std::optional<TaskId> task) {
    calls.emplace_back(id, task);
    EXPECT_TRUE(ok(rig.t().status(id)).full);  // the tracer may be called back
  });
  const ContextId id = ok(rig.t().open(task_ctx(1, kUser, BufferMode::kSignal, 4)));
  rig.run(0, TaskId(1));
  auto a = rig.branches(0, 10);
  EXPECT_TRUE(calls.empty());  // still in the hardware buffer
  ContextStatus s = ok(rig.t().status(id));
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], std::make_pair(id, std::optional<TaskId>(TaskId(1))));
  EXPECT_TRUE(s.full);
  EXPECT_EQ(s.lost, 6u);
  EXPECT_EQ(s.held, 4u);
  EXPECT_EQ(s.written, 4u);
  rig.branches(0, 3);
  ok(rig.t().flush(CpuId(0)));
  EXPECT_EQ(calls.size(), 1u);
  EXPECT_EQ(ok(rig.t().status(id)).lost, 9u);
  EXPECT_EQ(rig.drain(id, 9), std::vector<TraceRecord>(a.begin(), a.begin() + 4));
  EXPECT_FALSE(ok(rig.t().status(id)).full);
  auto b = rig.branches(0, 5);
  ok(rig.t().flush(CpuId(0)));
  EXPECT_EQ(calls.size(), 2u);
  EXPECT_EQ(ok(rig.t().get(id, 0)), b[3]);
  ok(rig.t().clear(id));
  rig.branches(0, 5);
  ok(rig.t().flush(CpuId(0)));
  EXPECT_EQ(calls.size(), 3u);
  // Wrap mode keeps the newest; back to signal resets the latch.
  ok(rig.t().set_mode(id, BufferMode::kWrap));
  auto c = rig.branches(0, 2);
  EXPECT_EQ(ok(rig.t().get(id, 0)), c[1]);
  ok(rig.t().set_mode(id, BufferMode::kSignal));
  rig.branches(0, 1);
  ok(rig.t().flush(CpuId(0)));
  EXPECT_EQ(calls.size(), 4u);
  expect_error(rig.t().set_mode(id, BufferMode::kAux), ErrorCode::kInval, "mode: ");
  expect_error(rig.t().set_mode(id, BufferMode::kSnapshot), ErrorCode::kInval, "mode: ");
  EXPECT_EQ(ok(rig.t().status(id)).config.mode, BufferMode::kSignal);
}

TEST(TracerTest, GetSizeClearAndResize) {
  Rig rig({.cpus = 1, .ds_records = 16});
  const ContextId id = ok(rig.t().open(task_ctx(1, kUser, BufferMode::kWrap, 4)));
  rig.run(0, TaskId(1));
  auto a = rig.branches(0, 3);
  ok(rig.t().resize(id, records(4) + 7));  // the same rounded size: nothing changes
  EXPECT_EQ(ok(rig.t().size(id)), 3u);
  EXPECT_EQ(ok(rig.t().get(id, 2)), a[0]);
  ok(rig.t().resize(id, records(8)));  // bigger: all kept
  auto b = rig.branches(0, 5);
  EXPECT_EQ(ok(rig.t().size(id)), 8u);
  EXPECT_EQ(ok(rig.t().status(id)).capacity, 8u);
  EXPECT_EQ(ok(rig.t().status(id)).lost, 0u);
  ok(rig.t().resize(id, records(2)));  // smaller: the newest kept, the rest lost
  ContextStatus s = ok(rig.t().status(id));
  EXPECT_EQ(s.config.size, records(2));
  EXPECT_EQ(s.capacity, 2u);
  EXPECT_EQ(s.lost, 6u);
  EXPECT_EQ(ok(rig.t().get(id, 0)), b[4]);
  EXPECT_EQ(ok(rig.t().get(id, 1)), b[3]);
  expect_error(rig.t().resize(id, kR - 1), ErrorCode::kInval, "size: ");
  expect_error(rig.t().resize(id, kMaxBufferBytes + kR), ErrorCode::kInval, "size: ");
  EXPECT_EQ(ok(rig.t().size(id)), 2u);
  ok(rig.t().clear(id));
  s = ok(rig.t().status(id));
  EXPECT_EQ(s.held, 0u);
  EXPECT_EQ(s.lost, 0u);
  EXPECT_EQ(s.total_lost, 6u);
  expect_error(rig.t().get(id, 0), ErrorCode::kInval, "index: ");
}

// ---- the BTS PMU ------------------------------------------------------------------------------

TEST(TracerTest, EventContextsAreActiveBetweenActivateAndDeactivate) {
  auto arb = ok(arbiter::Arbiter::create({.cpus = 2}));
  Rig rig({.cpus = 2, .ds_records = 16}, arb.get());
  const ContextId ev = ok(rig.t().open_for_event(task_ctx(1, kUser)));
  EXPECT_FALSE(arb->is_used());  // the perf core reserved for the event
  rig.run(0, TaskId(1));
  rig.branches(0, 2);
  EXPECT_FALSE(rig.last_stored);
  EXPECT_EQ(ok(rig.t().status(ev)).state, ContextState::kInactive);
  ok(rig.t().activate(ev, CpuId(0)));
  EXPECT_EQ(rig.t().programmed_debugctl(CpuId(0)), bts_bits(false, true));
  EXPECT_EQ(ok(rig.t().status(ev)).state, ContextState::kActive);
  auto a = rig.branches(0, 3);
  rig.branches(1, 2);
  EXPECT_FALSE(rig.last_stored);
  ok(rig.t().activate(ev, CpuId(1)));  // activity does not depend on what runs
  auto b = rig.branches(1, 1);
  ok(rig.t().deactivate(ev, CpuId(0)));
  rig.branches(0, 2);
  EXPECT_FALSE(rig.last_stored);
  ok(rig.t().stop(ev));
  rig.branches(1, 1);
  EXPECT_FALSE(rig.last_stored);
  ok(rig.t().start(ev));
  auto c = rig.branches(1, 1);
  ok(rig.t().deactivate(ev, CpuId(1)));
  EXPECT_EQ(rig.t().programmed_debugctl(CpuId(1)), 0u);
  EXPECT_EQ(rig.drain(ev), concat({a, b, c}));

  const ContextId plain = ok(rig.t().open(global_ctx()));
  expect_error(rig.t().activate(plain, CpuId(0)), ErrorCode::kInval, "context: ");
  expect_error(rig.t().deactivate(plain, CpuId(0)), ErrorCode::kInval, "context: ");
  expect_error(rig.t().activate(ev, CpuId(2)), ErrorCode::kInval, "cpu: ");
}

// ---- arbitration ------------------------------------------------------------------------------

TEST(TracerTest, OpenReservesBtsInTheArbiter) {
  auto arb = ok(arbiter::Arbiter::create({.cpus = 2}));
  Rig rig({.cpus = 2}, arb.get());
  arbiter::Reservation pt = ok(
      arb->reserve({.kind = arbiter::ResourceKind::kPt, .task = TaskId(9), .cpu = std::nullopt}));
  expect_error(rig.t().open(task_ctx(1)), ErrorCode::kBusy, "");
  expect_error(rig.t().open(global_ctx()), ErrorCode::kBusy, "");
  EXPECT_TRUE(rig.t().contexts().empty());
  EXPECT_EQ(arb->snapshot().exclusive[1], 0);
  pt.release();

  const ContextId task = ok(rig.t().open(task_ctx(1)));
  EXPECT_EQ(arb->snapshot().exclusive[1], 1);
  const ContextId global = ok(rig.t().open(global_ctx()));
  EXPECT_EQ(arb->snapshot().exclusive[1], 3);  // one CPU-bound request per CPU
  const ContextId cpu1 = ok(rig.t().open(global_ctx(1)));
  EXPECT_EQ(arb->snapshot().exclusive[1], 4);
  expect_error(
      arb->reserve({.kind = arbiter::ResourceKind::kPt, .task = TaskId(9), .cpu = std::nullopt}),
      ErrorCode::kBusy, "");
  ok(rig.t().close(task));
  ok(rig.t().close(global));
  EXPECT_EQ(arb->snapshot().exclusive[1], 1);
  ok(rig.t().close(cpu1));
  EXPECT_FALSE(arb->is_used());
  EXPECT_TRUE(
      arb->reserve({.kind = arbiter::ResourceKind::kPt, .task = TaskId(9), .cpu = std::nullopt})
          .has_value());
}

// ---- the 32-bit format ------------------------------------------------------------------------

TEST(TracerTest, ThirtyTwoBitRecordsAreTranscribed) {
  Rig rig({.cpus = 2, .format = x86::BtsFormat::k32, .kernel_start = 0xc0000000, .ds_records = 4});
  const ContextId user = ok(rig.t().open(global_ctx(std::nullopt, kUser)));
  const ContextId kernel = ok(rig.t().open(global_ctx(std::nullopt, kKernel)));
  const ContextId both = ok(rig.t().open(task_ctx(1)));
  rig.run(1, TaskId(1));
  std::vector<TraceRecord> u;
  std::vector<TraceRecord> k;
  std::vector<TraceRecord> all;
  for (std::uint64_t i = 0; i < 11; ++i) {
    const bool is_kernel = i % 3 == 1;
    const std::uint64_t from = (is_kernel ? 0xc1000000 : 0x08048000) + i * 8;
    const TraceRecord r = TraceRecord::branch(from, 0xfffffff0 - i, i % 2 == 1);
    auto s = rig.hw().branch(CpuId(1), r.from, r.to, r.predicted, is_kernel);
    ASSERT_TRUE(s.has_value()) << s.error().to_string();
    EXPECT_TRUE(s->stored);
    (is_kernel ? k : u).push_back(r);
    all.push_back(r);
  }
  EXPECT_EQ(rig.interrupts, 2);
  auto too_wide = rig.hw().branch(CpuId(1), 0x100000000, 1, false, false);
  expect_error(too_wide, ErrorCode::kInval, "from: ");
  EXPECT_EQ(rig.drain(user), u);
  EXPECT_EQ(rig.drain(kernel), k);
  EXPECT_EQ(rig.drain(both), all);
}

// ---- SoftwareBts ------------------------------------------------------------------------------

TEST(SoftwareBtsTest, StoresByTheRulesAndInterrupts) {
  SoftwareBts hw(2, x86::BtsFormat::k64);
  EXPECT_EQ(hw.cpus(), 2);
  EXPECT_EQ(hw.format(), x86::BtsFormat::k64);
  expect_error(hw.branch(CpuId(2), 1, 2, false, false), ErrorCode::kInval, "cpu: ");
  auto off = hw.branch(CpuId(0), 1, 2, false, false);
  ASSERT_TRUE(off.has_value());
  EXPECT_FALSE(off->stored);

  std::vector<std::byte> memory(2 * 24);
  const x86::DsArea area{.bts_buffer_base = 0x1000,
                         .bts_index = 0x1000,
                         .bts_absolute_maximum = 0x1000 + 48,
                         .bts_interrupt_threshold = 0x1000 + 48};
  int interrupts = 0;
  hw.set_interrupt_handler([&](CpuId cpu) {
    EXPECT_EQ(cpu, CpuId(1));
    ++interrupts;
  });
  hw.program(CpuId(1), area, memory, x86::debugctl::kLbr | bts_bits(true, true));
  EXPECT_EQ(hw.debugctl(CpuId(1)), bts_bits(true, true));  // only the BTS bits are the owner's
  EXPECT_TRUE(hw.branch(CpuId(1), 0x10, 0x20, true, false)->stored);
  EXPECT_EQ(interrupts, 0);
  EXPECT_TRUE(hw.branch(CpuId(1), 0x30, 0x40, false, true)->interrupt);
  EXPECT_EQ(interrupts, 1);
  EXPECT_TRUE(hw.branch(CpuId(1), 0x50, 0x60, false, true)->dropped);
  EXPECT_EQ(hw.ds_area(CpuId(1)).bts_index, 0x1000u + 48);
  EXPECT_EQ(ok(x86::bts::decode(x86::BtsFormat::k64, memory)), (x86::BtsRecord{0x10, 0x20, true}));
  hw.set_bts_index(CpuId(1), 0x1000);
  EXPECT_EQ(hw.ds_area(CpuId(1)).bts_index, 0x1000u);
  EXPECT_EQ(hw.ds_area(CpuId(5)), x86::DsArea{});
  hw.program(CpuId(1), area, memory, bts_bits(false, true));
  EXPECT_FALSE(hw.branch(CpuId(1), 0x50, 0x60, false, true)->stored);
}

// ---- a reference model ------------------------------------------------------------------------

// What each context should hold: every branch taken while it wanted the running task and its
// filter took it, and the timestamps, computed from the spec independently of the tracer.
class Model {
 public:
  struct Ctx {
    ContextConfig config;
    bool started = false;
    std::vector<TraceRecord> records;
  };

  explicit Model(int cpus) : current_(static_cast<std::size_t>(cpus)) {}

  void open(ContextId id, const ContextConfig& config) {
    contexts_[id] = Ctx{config, config.start, {}};
  }
  void branch(int cpu, const TraceRecord& r, bool kernel) {
    const auto& running = current_[static_cast<std::size_t>(cpu)];
    if (!running) return;
    for (auto& [id, m] : contexts_) {
      if (m.started && wants(m, *running, cpu) && (m.config.flags & (kernel ? kKernel : kUser))) {
        m.records.push_back(r);
      }
    }
  }
  void on_switch(int cpu, std::optional<TaskId> next, std::uint64_t time) {
    auto& running = current_[static_cast<std::size_t>(cpu)];
    if (running) stamp(RecordKind::kDeparts, *running, cpu, time);
    running = next;
    if (running) stamp(RecordKind::kArrives, *running, cpu, time);
  }
  std::optional<TaskId> current(int cpu) const { return current_[static_cast<std::size_t>(cpu)]; }
  std::map<ContextId, Ctx>& contexts() { return contexts_; }

 private:
  static bool wants(const Ctx& m, TaskId task, int cpu) {
    if (m.config.task) return *m.config.task == task;
    return !m.config.cpu || m.config.cpu->value() == cpu;
  }
  void stamp(RecordKind kind, TaskId task, int cpu, std::uint64_t time) {
    for (auto& [id, m] : contexts_) {
      if (m.started && (m.config.flags & kSched) && wants(m, task, cpu)) {
        m.records.push_back(TraceRecord::sched(kind, task, time));
      }
    }
  }

  std::map<ContextId, Ctx> contexts_;
  std::vector<std::optional<TaskId>> current_;
};

// Records per CPU: a branch's CPU is in bits 32-39 of `from` (Rig::branch), a timestamp's in
// time % 4 (the script's times).
std::map<int, std::vector<TraceRecord>> by_cpu(const std::vector<TraceRecord>& records) {
  std::map<int, std::vector<TraceRecord>> out;
  for (const TraceRecord& r : records) {
    const int cpu = r.kind == RecordKind::kBranch ? static_cast<int>((r.from >> 32) & 0xff)
                                                  : static_cast<int>(r.time % 4);
    out[cpu].push_back(r);
  }
  return out;
}

struct ScriptResult {
  std::vector<std::vector<TraceRecord>> drains;
  std::uint64_t flushed = 0;
  int interrupts = 0;
};

// A random mix of branches, switches, opens, closes, stops, starts, flag changes and drains on
// `cpus` CPUs, checked against the model at every drain.
ScriptResult run_script(std::uint64_t seed, int cpus, int steps) {
  Rig rig({.cpus = cpus, .ds_records = 5});
  Model model(cpus);
  std::mt19937_64 rng(seed);
  ScriptResult result;
  auto pick = [&](std::uint64_t n) { return static_cast<int>(rng() % n); };
  auto pick_context = [&]() -> std::optional<ContextId> {
    auto& all = model.contexts();
    if (all.empty()) return std::nullopt;
    auto it = all.begin();
    std::advance(it, pick(all.size()));
    return it->first;
  };
  auto check = [&](ContextId id) {
    Drained d = ok(rig.t().drain(id));
    EXPECT_EQ(d.lost, 0u);
    auto& expected = model.contexts()[id].records;
    EXPECT_EQ(d.records.size(), expected.size()) << "context " << id.value();
    EXPECT_EQ(by_cpu(d.records), by_cpu(expected)) << "context " << id.value();
    result.drains.push_back(d.records);
    expected.clear();
  };
  const std::uint32_t flag_choices[] = {kUser,          kKernel,          kUser | kKernel,
                                        kUser | kSched, kKernel | kSched, kUser | kKernel | kSched};
  const BufferMode modes[] = {BufferMode::kAux, BufferMode::kSnapshot, BufferMode::kWrap,
                              BufferMode::kSignal};
  for (int step = 0; step < steps; ++step) {
    const int op = pick(100);
    const int cpu = pick(static_cast<std::uint64_t>(cpus));
    if (op < 55) {
      const bool kernel = pick(3) == 0;
      const TraceRecord r = rig.branch(cpu, kernel);
      model.branch(cpu, r, kernel);
    } else if (op < 67) {
      const int task = pick(4);
      const std::optional<TaskId> next =
          task == 0 ? std::nullopt : std::optional<TaskId>(TaskId(task));
      const std::uint64_t time = std::uint64_t(step) * 4 + std::uint64_t(cpu);
      ok(rig.t().on_switch(CpuId(cpu), rig.t().current(CpuId(cpu)), next, time));
      model.on_switch(cpu, next, time);
    } else if (op < 74) {
      if (model.contexts().size() >= 8) continue;
      ContextConfig c;
      const int kind = pick(3);
      if (kind == 0) c.task = TaskId(1 + pick(3));
      if (kind == 1) c.cpu = CpuId(pick(static_cast<std::uint64_t>(cpus)));
      c.flags = flag_choices[pick(6)];
      c.mode = modes[pick(4)];
      c.size = records(1 << 14);
      c.start = pick(4) != 0;
      const ContextId id = ok(rig.t().open(c));
      model.open(id, c);
    } else if (op < 78) {
      if (auto id = pick_context()) {
        ok(rig.t().close(*id));
        model.contexts().erase(*id);
      }
    } else if (op < 84) {
      if (auto id = pick_context()) {
        auto& m = model.contexts()[*id];
        ok(m.started ? rig.t().stop(*id) : rig.t().start(*id));
        m.started = !m.started;
      }
    } else if (op < 88) {
      if (auto id = pick_context()) {
        const std::uint32_t flags = flag_choices[pick(6)];
        ok(rig.t().set_flags(*id, flags));
        model.contexts()[*id].config.flags = flags;
      }
    } else if (op < 95) {
      if (auto id = pick_context()) check(*id);
    } else {
      rig.t().flush_all();
    }
  }
  for (const auto& entry : std::map<ContextId, Model::Ctx>(model.contexts())) check(entry.first);
  result.flushed = rig.t().records_flushed();
  result.interrupts = rig.interrupts;
  return result;
}

TEST(TracerTest, RandomScriptsMatchTheModel) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const ScriptResult r = run_script(seed, 1 + static_cast<int>(seed % 3), 3000);
    EXPECT_GT(r.interrupts, 0);
    if (HasFailure()) break;
  }
}

TEST(TracerTest, SameCallsSameRecords) {
  const ScriptResult a = run_script(77, 3, 2000);
  const ScriptResult b = run_script(77, 3, 2000);
  EXPECT_EQ(a.drains, b.drains);
  EXPECT_EQ(a.flushed, b.flushed);
  EXPECT_EQ(a.interrupts, b.interrupts);
}

}  // namespace
}  // namespace hwarb::bts
