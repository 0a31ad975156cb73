// bench/sim_bench.cpp — the simulated machine with the whole stack (sim::System) under load.
//
// Three measurements, each against a baseline measured in the same run (bench/README.md):
//  access: Machine::access() on CPU 0 while a task with 4 breakpoints registered through
//          System::breakpoints() runs there (DR0–DR3/DR7 really programmed), against a bare loop
//          doing the same four range-overlap compares per access on plain arrays. Variants: every
//          access misses; 1 in 16 hits; the same machine with DR7 = 0 (no armed slot); each once
//          through access() per access and once through access_many() per stream of 4096.
//  switch: Machine::switch_to() round-robin over N tasks forked from a parent with 2 inherit
//          breakpoints (each child holds copies made by Core::fork), against the same over N
//          tasks forked from a parent without breakpoints.
//  memory: heap and RSS growth for N Machine tasks, then 4 events per task
//          (register_user_hw_breakpoint, each task its own owner): bytes/task and bytes/event.
//  flexible: the cost of registering one flexible breakpoint for a running task that already
//          has N (every registration reschedules the CPU), at N up to --flexible (large)
//          against N up to 1/16 of it (small): a ratio near 1 is a linear total cost, 16 would
//          be quadratic (the core walking every flexible event on each install).
//
//   sim_bench [--quick] [--part access|switch|memory|flexible|all] [--reps N] [--time SECONDS]
//             [--switch-tasks N] [--memory-tasks N] [--flexible N]
//
// Every run checks what it measures: the machine's exceptions, the handlers' hits and the bare
// loop's matches agree; the registers are programmed; everything is released at the end (the
// arbiter is empty). A failed check makes the exit status 1. --quick (the ctest smoke test) runs
// the checks on small counts with tiny repetitions.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench_util.h"
#include "hwarb/breakpoints/hw_breakpoint.h"
#include "hwarb/sim/machine.h"
#include "hwarb/sim/system.h"
#include "hwarb/x86/debugreg.h"

namespace {

namespace sim = hwarb::sim;
using hwarb::CpuId;
using hwarb::TaskId;
using hwarb::bench::Clock;
using hwarb::bench::format_rate;
using hwarb::bench::median;
using hwarb::bench::ratio;
using hwarb::bench::seconds_since;
using hwarb::bench::SplitMix;
using hwarb::bench::Timed;
using hwarb::breakpoints::breakpoint_attr;
using hwarb::breakpoints::BreakpointHandle;
using hwarb::pmu::BpType;

// Keeps the compiler from dropping or merging work whose result is `v`.
template <typename T>
void escape(const T& v) {
  asm volatile("" : : "g"(&v) : "memory");
}

struct Options {
  bool quick = false;
  std::string part = "all";
  int reps = 5;
  double rep_time = 0.2;
  int switch_tasks = 100000;
  int memory_tasks = 1000000;
  int flexible = 5000;
};

bool failed(const char* what) {
  std::fprintf(stderr, "ERROR: %s\n", what);
  return false;
}

std::unique_ptr<sim::System> make_system() {
  auto s = sim::System::create({});
  if (!s) {
    std::fprintf(stderr, "System::create: %s\n", s.error().to_string().c_str());
    std::exit(1);
  }
  return std::move(*s);
}

// bench_util.h's Timed with this driver's calibration time.
Timed timed(std::function<std::int64_t(std::int64_t)> run, const Options& opt) {
  return Timed(std::move(run), opt.quick ? 0.0002 : 0.005, opt.rep_time);
}

// ---- 1. accesses checked per second ----------------------------------------------------------

constexpr std::uint64_t kRegion = 0x100000;  // accesses fall in [kRegion, kRegion + 64 KiB)
constexpr std::uint64_t kRegionSize = 0x10000;
constexpr int kStream = 4096;  // accesses per pass

struct Watch {
  std::uint64_t addr;
  std::uint64_t len;
  BpType type;
};
// Inside the region, so that the accesses around them are real near misses.
constexpr std::array<Watch, 4> kWatches = {{{kRegion + 0x1000, 8, BpType::kRw},
                                            {kRegion + 0x3004, 4, BpType::kW},
                                            {kRegion + 0x8002, 2, BpType::kRw},
                                            {kRegion + 0xc001, 1, BpType::kW}}};

struct Access {
  std::uint64_t addr;
  std::uint64_t value;
  int size;
  sim::AccessKind kind;
};

// The bare baseline's view of the four slots: plain arrays.
struct BareSlots {
  std::array<std::uint64_t, 4> lo;
  std::array<std::uint64_t, 4> hi;
  std::array<bool, 4> reads;  // RW=11 (else RW=01: writes only)
};

BareSlots bare_slots() {
  BareSlots b{};
  for (std::size_t i = 0; i < kWatches.size(); ++i) {
    b.lo[i] = kWatches[i].addr & ~(kWatches[i].len - 1);
    b.hi[i] = b.lo[i] + kWatches[i].len;
    b.reads[i] = kWatches[i].type == BpType::kRw;
  }
  return b;
}

// The four range-overlap compares for one access: the B0–B3 bits it matches.
inline std::uint64_t bare_bits(const BareSlots& b, const Access& a) {
  std::uint64_t bits = 0;
  for (int s = 0; s < 4; ++s) {
    const bool kind = a.kind == sim::AccessKind::kWrite || b.reads[s];
    if (kind && a.addr < b.hi[s] && b.lo[s] < a.addr + static_cast<std::uint64_t>(a.size)) {
      bits |= std::uint64_t{1} << s;
    }
  }
  return bits;
}

// One pass of the bare loop: the number of accesses that match some slot.
[[gnu::noinline]] std::int64_t bare_pass(const BareSlots& b, const std::vector<Access>& stream) {
  std::int64_t hits = 0;
  for (const Access& a : stream) hits += bare_bits(b, a) != 0 ? 1 : 0;
  return hits;
}

// kStream accesses, 3/4 reads, sizes 1/2/4/8 naturally aligned. `hit_every` > 0: every
// hit_every-th access (on average) is aimed at a watched range; all others miss every slot.
std::vector<Access> make_stream(int hit_every, std::uint64_t seed) {
  const BareSlots b = bare_slots();
  SplitMix rng(seed);
  std::vector<Access> out;
  out.reserve(kStream);
  while (static_cast<int>(out.size()) < kStream) {
    Access a{};
    a.size = 1 << rng.below(4);
    a.kind = rng.below(4) == 0 ? sim::AccessKind::kWrite : sim::AccessKind::kRead;
    a.value = rng.next();
    const bool aim = hit_every > 0 && rng.below(hit_every) == 0;
    if (aim) {
      const Watch& w = kWatches[static_cast<std::size_t>(rng.below(4))];
      a.addr = w.addr & ~static_cast<std::uint64_t>(a.size - 1);
      a.kind = w.type == BpType::kW ? sim::AccessKind::kWrite : a.kind;
    } else {
      a.addr = kRegion + (rng.next() % kRegionSize & ~static_cast<std::uint64_t>(a.size - 1));
    }
    if ((bare_bits(b, a) != 0) != aim) continue;
    out.push_back(a);
  }
  return out;
}

struct AccessRig {
  std::unique_ptr<sim::System> sys;
  TaskId armed{0};     // on CPU 0 with the 4 breakpoints
  TaskId disarmed{0};  // on CPU 1, no breakpoints (its DR7 is 0)
  std::vector<BreakpointHandle> bps;
  std::int64_t handler_hits = 0;
};

bool setup_access(AccessRig& rig) {
  rig.sys = make_system();
  sim::Machine& m = rig.sys->machine();
  rig.armed = *m.create_task();
  rig.disarmed = *m.create_task();
  for (const Watch& w : kWatches) {
    auto bp = rig.sys->breakpoints().register_user_hw_breakpoint(
        breakpoint_attr(w.addr, w.len, w.type),
        [&rig](hwarb::pmu::Event&, const hwarb::pmu::Sample&) { ++rig.handler_hits; }, rig.armed);
    if (!bp) {
      std::fprintf(stderr, "register: %s\n", bp.error().to_string().c_str());
      return false;
    }
    rig.bps.push_back(std::move(*bp));
  }
  if (!m.switch_to(CpuId(0), rig.armed) || !m.switch_to(CpuId(1), rig.disarmed)) {
    return failed("access: switch_to");
  }
  const auto regs = m.debug_registers(CpuId(0));
  for (int s = 0; s < 4; ++s) {
    if (!hwarb::x86::dr7::enabled(regs->dr7, s)) return failed("access: DR7 slot not armed");
  }
  if (*m.dr7(CpuId(1)) != 0) return failed("access: CPU 1 has armed slots");
  return true;
}

// One pass of Machine::access over the stream: the number of exceptions delivered.
std::int64_t machine_pass(sim::Machine& m, CpuId cpu, TaskId task,
                          const std::vector<Access>& stream) {
  std::int64_t exceptions = 0;
  for (const Access& a : stream) {
    auto r = m.access(cpu, task, a.kind, a.addr, a.size, a.value);
    if (!r) {
      std::fprintf(stderr, "access: %s\n", r.error().to_string().c_str());
      std::exit(1);
    }
    exceptions += r->exceptions;
  }
  return exceptions;
}

// The same pass through Machine::access_many (one call for the whole stream).
std::int64_t machine_many_pass(sim::Machine& m, CpuId cpu, TaskId task,
                               const std::vector<sim::AccessOp>& ops) {
  auto r = m.access_many(cpu, task, ops);
  if (!r || r->done != ops.size()) {
    std::fprintf(stderr, "access_many: %s\n", r ? "stopped early" : r.error().to_string().c_str());
    std::exit(1);
  }
  return r->exceptions;
}

std::vector<sim::AccessOp> as_ops(const std::vector<Access>& stream) {
  std::vector<sim::AccessOp> ops;
  ops.reserve(stream.size());
  for (const Access& a : stream) ops.push_back({a.kind, a.size, a.addr, a.value});
  return ops;
}

struct AccessRow {
  std::string variant;
  double machine;
  double bare;
  double machine_lo, machine_hi, bare_lo, bare_hi;
};

bool run_access(const Options& opt, std::vector<AccessRow>& rows) {
  AccessRig rig;
  if (!setup_access(rig)) return false;
  sim::Machine& m = rig.sys->machine();
  const BareSlots slots = bare_slots();
  const std::vector<Access> miss = make_stream(0, 7);
  const std::vector<Access> hits = make_stream(16, 8);

  // Agreement: the bare loop, the machine's exceptions and the handlers count the same hits.
  bool ok = true;
  const std::int64_t bare_miss = bare_pass(slots, miss);
  const std::int64_t bare_hit = bare_pass(slots, hits);
  const std::int64_t before = rig.handler_hits;
  const std::int64_t m_miss = machine_pass(m, CpuId(0), rig.armed, miss);
  const std::int64_t m_hit = machine_pass(m, CpuId(0), rig.armed, hits);
  const std::int64_t m_off = machine_pass(m, CpuId(1), rig.disarmed, hits);
  const std::vector<sim::AccessOp> miss_ops = as_ops(miss), hit_ops = as_ops(hits);
  const std::int64_t many_before = rig.handler_hits;
  const std::int64_t many_miss = machine_many_pass(m, CpuId(0), rig.armed, miss_ops);
  const std::int64_t many_hit = machine_many_pass(m, CpuId(0), rig.armed, hit_ops);
  const std::int64_t many_off = machine_many_pass(m, CpuId(1), rig.disarmed, hit_ops);
  if (bare_miss != 0 || m_miss != 0 || many_miss != 0) ok = failed("access: the miss stream hits");
  if (bare_hit == 0 || m_hit != bare_hit || rig.handler_hits - before != 2 * bare_hit ||
      many_hit != bare_hit || rig.handler_hits - many_before != bare_hit) {
    ok = failed("access: machine (single and batched), handlers and bare loop disagree on hits");
  }
  if (m_off != 0 || many_off != 0) ok = failed("access: an access on the disarmed CPU trapped");
  if (*m.dr6(CpuId(0)) != 0) ok = failed("access: DR6 not cleared by the handler");
  std::printf("access check: %d accesses/pass, hit stream: %lld hits (bare = machine = handlers)\n",
              kStream, static_cast<long long>(bare_hit));

  auto bare = [&slots](const std::vector<Access>& s) {
    return [&slots, &s](std::int64_t passes) {
      std::int64_t h = 0;
      for (std::int64_t p = 0; p < passes; ++p) {
        h += bare_pass(slots, s);
        escape(h);
      }
      return passes * kStream;
    };
  };
  auto machine = [&m](CpuId cpu, TaskId task, const std::vector<Access>& s) {
    return [&m, cpu, task, &s](std::int64_t passes) {
      std::int64_t e = 0;
      for (std::int64_t p = 0; p < passes; ++p) e += machine_pass(m, cpu, task, s);
      escape(e);
      return passes * kStream;
    };
  };
  Timed bare_miss_t = timed(bare(miss), opt), bare_hit_t = timed(bare(hits), opt);
  Timed miss_t = timed(machine(CpuId(0), rig.armed, miss), opt);
  Timed hit_t = timed(machine(CpuId(0), rig.armed, hits), opt);
  Timed off_t = timed(machine(CpuId(1), rig.disarmed, miss), opt);
  auto many = [&m](CpuId cpu, TaskId task, const std::vector<sim::AccessOp>& ops) {
    return [&m, cpu, task, &ops](std::int64_t passes) {
      std::int64_t e = 0;
      for (std::int64_t p = 0; p < passes; ++p) e += machine_many_pass(m, cpu, task, ops);
      escape(e);
      return passes * kStream;
    };
  };
  Timed many_miss_t = timed(many(CpuId(0), rig.armed, miss_ops), opt);
  Timed many_hit_t = timed(many(CpuId(0), rig.armed, hit_ops), opt);
  Timed many_off_t = timed(many(CpuId(1), rig.disarmed, miss_ops), opt);
  for (int r = 0; r < opt.reps; ++r) {
    bare_miss_t.rep();
    miss_t.rep();
    many_miss_t.rep();
    bare_hit_t.rep();
    hit_t.rep();
    many_hit_t.rep();
    off_t.rep();
    many_off_t.rep();
  }
  auto row = [](std::string name, const Timed& mach, const Timed& bare_t) {
    return AccessRow{std::move(name), mach.median_rate(), bare_t.median_rate(), mach.min_rate(),
                     mach.max_rate(), bare_t.min_rate(),  bare_t.max_rate()};
  };
  rows.push_back(row("4 armed, all miss", miss_t, bare_miss_t));
  rows.push_back(row("4 armed, 1 in 16 hits", hit_t, bare_hit_t));
  rows.push_back(row("DR7 = 0 (no armed slot), miss stream", off_t, bare_miss_t));
  rows.push_back(row("access_many, 4 armed, all miss", many_miss_t, bare_miss_t));
  rows.push_back(row("access_many, 4 armed, 1 in 16 hits", many_hit_t, bare_hit_t));
  rows.push_back(row("access_many, DR7 = 0, miss stream", many_off_t, bare_miss_t));

  rig.bps.clear();
  if (!m.exit(rig.armed) || !m.exit(rig.disarmed)) ok = failed("access: exit");
  if (rig.sys->arbiter().is_used()) ok = failed("access: arbiter not empty at the end");
  return ok;
}

// ---- 2. context switches per second ---------------------------------------------------------

constexpr int kInheritBps = 2;

struct SwitchRig {
  std::unique_ptr<sim::System> sys;
  TaskId parent{0};
  std::vector<BreakpointHandle> bps;
  std::vector<TaskId> children;
  std::int64_t cursor = 0;
  double fork_s = 0;
};

bool setup_switch(SwitchRig& rig, int tasks, int bps) {
  rig.sys = make_system();
  sim::Machine& m = rig.sys->machine();
  rig.parent = *m.create_task();
  for (int i = 0; i < bps; ++i) {
    hwarb::pmu::EventAttr attr =
        breakpoint_attr(0x4000 + 0x100 * static_cast<std::uint64_t>(i), 8, BpType::kRw);
    attr.inherit = true;
    auto bp = rig.sys->breakpoints().register_user_hw_breakpoint(attr, {}, rig.parent);
    if (!bp) return failed("switch: register an inherit breakpoint");
    rig.bps.push_back(std::move(*bp));
  }
  rig.children.reserve(static_cast<std::size_t>(tasks));
  const auto t0 = Clock::now();
  for (int i = 0; i < tasks; ++i) {
    auto child = m.fork(rig.parent);
    if (!child) {
      std::fprintf(stderr, "fork: %s\n", child.error().to_string().c_str());
      return false;
    }
    rig.children.push_back(*child);
  }
  rig.fork_s = seconds_since(t0);
  if (bps > 0) {
    const auto copies = rig.sys->core().task_events(rig.children.back());
    if (static_cast<int>(copies.size()) != bps) return failed("switch: child lacks its copies");
  }
  return true;
}

// Round-robin: switch k goes to CPU k % 2 and runs child k % N (N > 2, so the child is idle).
std::int64_t switch_run(SwitchRig& rig, std::int64_t units) {
  sim::Machine& m = rig.sys->machine();
  const auto n = static_cast<std::int64_t>(rig.children.size());
  for (std::int64_t k = 0; k < units; ++k, ++rig.cursor) {
    const TaskId t = rig.children[static_cast<std::size_t>(rig.cursor % n)];
    if (!m.switch_to(CpuId(static_cast<int>(rig.cursor & 1)), t)) {
      std::fprintf(stderr, "switch_to failed\n");
      std::exit(1);
    }
  }
  return units;
}

struct SwitchResult {
  int tasks = 0;
  double with = 0, without = 0, with_lo = 0, with_hi = 0, without_lo = 0, without_hi = 0;
  double fork_with = 0, fork_without = 0;  // forks per second while setting up
};

bool run_switch(const Options& opt, SwitchResult& out) {
  SwitchRig with, without;
  if (!setup_switch(with, opt.switch_tasks, kInheritBps)) return false;
  if (!setup_switch(without, opt.switch_tasks, 0)) return false;
  Timed with_t = timed([&with](std::int64_t u) { return switch_run(with, u); }, opt);
  Timed without_t = timed([&without](std::int64_t u) { return switch_run(without, u); }, opt);
  for (int r = 0; r < opt.reps; ++r) {
    without_t.rep();
    with_t.rep();
  }
  bool ok = true;
  // The running children have their copies installed; the others' CPUs are clear.
  for (int c = 0; c < 2; ++c) {
    const std::uint64_t dr7w = *with.sys->machine().dr7(CpuId(c));
    const std::uint64_t dr7o = *without.sys->machine().dr7(CpuId(c));
    if (!hwarb::x86::dr7::enabled(dr7w, 0) || !hwarb::x86::dr7::enabled(dr7w, 1)) {
      ok = failed("switch: a running child's breakpoints are not installed");
    }
    if (dr7o != 0) ok = failed("switch: a task without breakpoints has armed slots");
  }
  const double n = static_cast<double>(opt.switch_tasks);
  out = SwitchResult{opt.switch_tasks,     with_t.median_rate(), without_t.median_rate(),
                     with_t.min_rate(),    with_t.max_rate(),    without_t.min_rate(),
                     without_t.max_rate(), n / with.fork_s,      n / without.fork_s};
  for (SwitchRig* rig : {&with, &without}) {
    sim::Machine& m = rig->sys->machine();
    for (int c = 0; c < 2; ++c) (void)m.switch_to_idle(CpuId(c));
    for (TaskId t : rig->children) {
      if (!m.exit(t)) ok = failed("switch: exit");
    }
    rig->bps.clear();
    if (!m.exit(rig->parent)) ok = failed("switch: exit parent");
    if (rig->sys->arbiter().is_used()) ok = failed("switch: arbiter not empty at the end");
  }
  return ok;
}

// ---- 3. memory per task and per event -------------------------------------------------------

constexpr int kEventsPerTask = 4;

struct MemSample {
  double heap;  // mallinfo2: bytes in use (arena + mmapped)
  double rss;   // /proc/self/statm resident pages * page size
};

MemSample mem_now() {
  const struct mallinfo2 mi = mallinfo2();
  MemSample s{static_cast<double>(mi.uordblks + mi.hblkhd), 0};
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    unsigned long long size = 0, resident = 0;
    if (std::fscanf(f, "%llu %llu", &size, &resident) == 2) {
      s.rss = static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE));
    }
    std::fclose(f);
  }
  return s;
}

struct MemoryResult {
  int tasks = 0;
  MemSample per_task{}, per_event{}, first_event{}, further_event{};
  double create_s = 0, first_s = 0, further_s = 0, teardown_s = 0;
};

bool run_memory(const Options& opt, MemoryResult& out) {
  const int n = opt.memory_tasks;
  bool ok = true;
  auto sys = make_system();
  sim::Machine& m = sys->machine();
  std::vector<TaskId> tasks;
  tasks.reserve(static_cast<std::size_t>(n));
  // The handles are the user's, not the stack's: their storage is allocated before measuring.
  std::vector<BreakpointHandle> handles;
  handles.reserve(static_cast<std::size_t>(n) * kEventsPerTask);
  malloc_trim(0);
  const MemSample m0 = mem_now();
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) tasks.push_back(*m.create_task());
  out.create_s = seconds_since(t0);
  const MemSample m1 = mem_now();
  auto open = [&](int first, int last) {
    for (TaskId t : tasks) {
      for (int j = first; j < last; ++j) {
        auto bp = sys->breakpoints().register_user_hw_breakpoint(
            breakpoint_attr(0x8000 + 8 * static_cast<std::uint64_t>(j), 8, BpType::kW), {}, t);
        if (!bp) {
          std::fprintf(stderr, "memory: register: %s\n", bp.error().to_string().c_str());
          return false;
        }
        handles.push_back(std::move(*bp));
      }
    }
    return true;
  };
  t0 = Clock::now();
  ok = open(0, 1) && ok;
  out.first_s = seconds_since(t0);
  const MemSample m2 = mem_now();
  t0 = Clock::now();
  ok = open(1, kEventsPerTask) && ok;
  out.further_s = seconds_since(t0);
  const MemSample m3 = mem_now();
  if (ok && sys->core().task_events(tasks.back()).size() != kEventsPerTask) {
    ok = failed("memory: a task lacks its events");
  }
  const double dn = n;
  auto per = [](const MemSample& a, const MemSample& b, double k) {
    return MemSample{(b.heap - a.heap) / k, (b.rss - a.rss) / k};
  };
  out.tasks = n;
  out.per_task = per(m0, m1, dn);
  out.per_event = per(m1, m3, dn * kEventsPerTask);
  out.first_event = per(m1, m2, dn);
  out.further_event = per(m2, m3, dn * (kEventsPerTask - 1));
  t0 = Clock::now();
  handles.clear();
  for (TaskId t : tasks) {
    if (!m.exit(t)) ok = failed("memory: exit");
  }
  if (sys->arbiter().is_used()) ok = failed("memory: arbiter not empty at the end");
  sys.reset();
  out.teardown_s = seconds_since(t0);
  return ok;
}

// ---- 4. flexible breakpoints: the cost of one more ------------------------------------------

// Seconds for each phase with `n` flexible breakpoints of a task on CPU 0 (negative on a failed
// check): registering them (the task running, so each one reschedules the CPU), then `ops`
// ticks (rotation: the first waiting event moves to the end), then `ops` switches away and back.
struct FlexibleTimes {
  double register_s = -1, tick_s = -1, switch_s = -1;
};

FlexibleTimes flexible_times(int n, int ops) {
  FlexibleTimes out;
  auto sys = make_system();
  sim::Machine& m = sys->machine();
  const TaskId task = *m.create_task();
  if (!m.switch_to(CpuId(0), task)) return failed("flexible: switch_to") ? out : out;
  std::vector<BreakpointHandle> bps;
  bps.reserve(static_cast<std::size_t>(n));
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    hwarb::pmu::EventAttr attr =
        breakpoint_attr(0x4000 + 8 * static_cast<std::uint64_t>(i), 8, BpType::kW);
    attr.pinned = false;
    auto bp = sys->breakpoints().register_user_hw_breakpoint(attr, {}, task);
    if (!bp) {
      std::fprintf(stderr, "register #%d: %s\n", i, bp.error().to_string().c_str());
      return out;
    }
    bps.push_back(std::move(*bp));
  }
  const double register_s = seconds_since(t0);
  t0 = Clock::now();
  for (int i = 0; i < ops; ++i) {
    if (!m.tick(CpuId(0))) return failed("flexible: tick") ? out : out;
  }
  const double tick_s = seconds_since(t0);
  t0 = Clock::now();
  for (int i = 0; i < ops; ++i) {
    if (!m.switch_to_idle(CpuId(0)) || !m.switch_to(CpuId(0), task)) {
      return failed("flexible: switch") ? out : out;
    }
  }
  const double switch_s = seconds_since(t0);
  const std::uint64_t dr7 = *m.dr7(CpuId(0));
  for (int s = 0; s < 4; ++s) {
    if (!hwarb::x86::dr7::enabled(dr7, s))
      return failed("flexible: a free slot stayed empty") ? out : out;
  }
  bps.clear();
  (void)m.switch_to_idle(CpuId(0));
  if (!m.exit(task)) return failed("flexible: exit") ? out : out;
  if (sys->arbiter().is_used()) return failed("flexible: arbiter not empty at the end") ? out : out;
  return FlexibleTimes{register_s, tick_s, switch_s};
}

struct FlexibleResult {
  int small = 0, large = 0, ops = 0;
  // Median microseconds per registration, per tick, per switch pair.
  FlexibleTimes small_us, large_us;
};

bool run_flexible(const Options& opt, FlexibleResult& out) {
  out.large = opt.flexible;
  out.small = std::max(1, opt.flexible / 16);
  out.ops = opt.quick ? 1000 : 20000;
  std::vector<double> sr, lr, st, lt, ss, ls;
  for (int r = 0; r < opt.reps; ++r) {
    const FlexibleTimes s = flexible_times(out.small, out.ops);
    const FlexibleTimes l = flexible_times(out.large, out.ops);
    if (s.register_s < 0 || l.register_s < 0) return false;
    sr.push_back(s.register_s / out.small * 1e6);
    lr.push_back(l.register_s / out.large * 1e6);
    st.push_back(s.tick_s / out.ops * 1e6);
    lt.push_back(l.tick_s / out.ops * 1e6);
    ss.push_back(s.switch_s / out.ops * 1e6);
    ls.push_back(l.switch_s / out.ops * 1e6);
  }
  out.small_us = {median(sr), median(st), median(ss)};
  out.large_us = {median(lr), median(lt), median(ls)};
  return true;
}

// ---- main -----------------------------------------------------------------------------------

std::optional<Options> parse(int argc, char** argv) {
  Options opt;
  std::optional<int> switch_tasks, memory_tasks, flexible;
  const bool parsed =
      hwarb::bench::Args("sim_bench")
          .choice("part", &opt.part, {"access", "switch", "memory", "flexible", "all"})
          .number("reps", "N", &opt.reps, 1)
          .number("time", "SECONDS", &opt.rep_time, 0.001)
          .number("switch-tasks", "N", &switch_tasks, 3)
          .number("memory-tasks", "N", &memory_tasks, 1)
          .number("flexible", "N", &flexible, 16)
          .parse(argc, argv, &opt.quick);
  if (!parsed) return std::nullopt;
  if (opt.quick) {
    opt.reps = 1;
    opt.rep_time = 0.002;
    opt.switch_tasks = 2000;
    opt.memory_tasks = 10000;
    opt.flexible = 1600;
  }
  if (switch_tasks) opt.switch_tasks = *switch_tasks;
  if (memory_tasks) opt.memory_tasks = *memory_tasks;
  if (flexible) opt.flexible = *flexible;
  return opt;
}

int run(const Options& opt) {
  auto wants = [&](std::string_view p) { return opt.part == "all" || opt.part == p; };
  bool ok = true;
  const auto t0 = Clock::now();

  if (wants("access")) {
    std::vector<AccessRow> rows;
    ok = run_access(opt, rows) && ok;
    std::printf(
        "\n### accesses checked per second (CPU 0, Machine::access; median of %d, [min-max])\n\n"
        "| variant | machine accesses/s | bare loop accesses/s | bare/machine |\n"
        "|---|---:|---:|---:|\n",
        opt.reps);
    for (const auto& r : rows) {
      std::printf("| %s | %s [%s-%s] | %s [%s-%s] | %s |\n", r.variant.c_str(),
                  format_rate(r.machine).c_str(), format_rate(r.machine_lo).c_str(),
                  format_rate(r.machine_hi).c_str(), format_rate(r.bare).c_str(),
                  format_rate(r.bare_lo).c_str(), format_rate(r.bare_hi).c_str(),
                  ratio(r.bare, r.machine).c_str());
    }
    std::fflush(stdout);
  }
  if (wants("switch")) {
    SwitchResult r;
    ok = run_switch(opt, r) && ok;
    std::printf(
        "\n### context switches per second (Machine::switch_to round-robin on 2 CPUs; median of "
        "%d, [min-max])\n\n"
        "| tasks | %d inherited bps/task | no bps | no bps/with bps | forks/s with | forks/s "
        "without |\n|---:|---:|---:|---:|---:|---:|\n"
        "| %d | %s [%s-%s] | %s [%s-%s] | %s | %s | %s |\n",
        opt.reps, kInheritBps, r.tasks, format_rate(r.with).c_str(), format_rate(r.with_lo).c_str(),
        format_rate(r.with_hi).c_str(), format_rate(r.without).c_str(),
        format_rate(r.without_lo).c_str(), format_rate(r.without_hi).c_str(),
        ratio(r.without, r.with).c_str(), format_rate(r.fork_with).c_str(),
        format_rate(r.fork_without).c_str());
    std::fflush(stdout);
  }
  if (wants("memory")) {
    MemoryResult r;
    ok = run_memory(opt, r) && ok;
    std::printf(
        "\n### memory (%d tasks x %d events; heap = mallinfo2 in use, RSS = /proc/self/statm)\n\n"
        "| per | heap bytes | RSS bytes |\n|---|---:|---:|\n"
        "| task (Machine::create_task) | %.0f | %.0f |\n"
        "| event (all %d per task) | %.0f | %.0f |\n"
        "| first event of a task | %.0f | %.0f |\n"
        "| further event of a task | %.0f | %.0f |\n\n"
        "create %.2f s, first events %.2f s, further events %.2f s, teardown %.2f s\n",
        r.tasks, kEventsPerTask, r.per_task.heap, r.per_task.rss, kEventsPerTask, r.per_event.heap,
        r.per_event.rss, r.first_event.heap, r.first_event.rss, r.further_event.heap,
        r.further_event.rss, r.create_s, r.first_s, r.further_s, r.teardown_s);
  }
  if (wants("flexible")) {
    FlexibleResult r;
    ok = run_flexible(opt, r) && ok;
    auto row = [&](const char* op, double small, double large) {
      std::printf("| %s | %.3f | %.3f | %.2fx |\n", op, small, large,
                  small > 0 ? large / small : 0.0);
    };
    std::printf(
        "\n### flexible breakpoints of one task on CPU 0 (us per operation; median of %d)\n\n"
        "| operation | %d registered | %d registered | large/small |\n|---|---:|---:|---:|\n",
        opt.reps, r.small, r.large);
    row("register one more", r.small_us.register_s, r.large_us.register_s);
    row("tick", r.small_us.tick_s, r.large_us.tick_s);
    row("switch away and back", r.small_us.switch_s, r.large_us.switch_s);
    std::printf("\n1x: the cost does not grow with the number registered; %dx: it grows with it\n",
                r.large / std::max(1, r.small));
    std::fflush(stdout);
  }
  std::printf("\ntotal time %.1f s\n", seconds_since(t0));
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return hwarb::bench::driver_main(argc, argv, parse, run);
}
