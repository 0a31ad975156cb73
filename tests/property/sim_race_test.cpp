// Race test of sim::System under its locking rule 1: several threads drive one System at the same
// time, registrars (register, modify and unregister breakpoints) and runners (switch tasks on CPUs,
// tick, access memory and execute), every call made while holding System::lock(). Each operation
// appends itself, its result and the hits it delivered to a shared log while it still holds the
// lock, so the log is the linearization order. The log is then replayed serially on a fresh
// System: every result, every hit (log index, event, task, CPU, address) and every final count and
// time must be identical — no lost or phantom hit, no decision that depends on the threads. A
// tracer thread debugs the first task through a SimTracee at the same time (pokes of DR0-DR7,
// waits, continues and single-steps), so ptrace stops, the emulation's handlers and the accesses
// a stop refuses are in the log too. The test runs under ThreadSanitizer as well (label `race`),
// which checks that the lock really covers everything the stack touches, handlers and handle
// destruction included.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "hwarb/breakpoints/hw_breakpoint.h"
#include "hwarb/sim/sim_tracee.h"
#include "hwarb/sim/system.h"
#include "hwarb/x86/debugreg.h"

namespace hwarb::sim {
namespace {

using breakpoints::Arch;
using breakpoints::breakpoint_attr;
using breakpoints::BreakpointHandle;
using pmu::BpType;
using pmu::EventId;

// Breakpoints in [kWindow, kWindow + kSpan), accesses around it: hits are frequent.
constexpr std::uint64_t kWindow = 0x1000;
constexpr int kSpan = 0x20;

enum class Kind : std::uint8_t {
  kRegister,
  kModify,
  kUnregister,
  kSwitch,
  kIdle,
  kTick,
  kAccess,
  kExec,
  kPoke,    // the tracer: POKEUSER of u_debugreg[reg]
  kWait,    // the tracer: wait(), the stop logged in `observed`
  kResume,  // the tracer: cont, or step when `step`
};

// Who a registered breakpoint belongs to.
enum class Owner : std::uint8_t { kTaskAll, kTaskCpu, kCpu };

struct HitRec {
  EventId id = 0;
  std::int64_t task = 0;
  int cpu = 0;
  std::uint64_t addr = 0;
  friend bool operator==(const HitRec&, const HitRec&) = default;
};

// One logged operation: what was called and what it gave.
struct Entry {
  int thread = 0;
  Kind kind = Kind::kTick;
  Owner owner = Owner::kTaskAll;
  std::int64_t task = 0;
  int cpu = 0;
  pmu::EventAttr attr;
  std::size_t ref = 0;  // modify / unregister: the log index of the registration
  AccessKind access = AccessKind::kRead;
  std::uint64_t addr = 0;
  int size = 0;
  int reg = 0;              // poke
  std::uint64_t value = 0;  // poke
  bool step = false;        // resume
  std::optional<ErrorCode> error;
  std::uint64_t observed = 0;  // wait: signal << 32 | DR6 (low half), 0 while running
  EventId id = 0;              // register: the new event
  std::vector<HitRec> hits;
};

std::string describe(const Entry& e) {
  std::ostringstream os;
  os << "thread " << e.thread << " ";
  switch (e.kind) {
    case Kind::kRegister:
      os << "register(owner " << static_cast<int>(e.owner) << ", task " << e.task << ", cpu "
         << e.cpu << ", 0x" << std::hex << e.attr.bp_addr << std::dec << "/" << e.attr.bp_len
         << " type " << static_cast<int>(e.attr.bp_type) << (e.attr.pinned ? " pinned" : "")
         << ") -> ev " << e.id;
      break;
    case Kind::kModify:
      os << "modify(entry " << e.ref << ", 0x" << std::hex << e.attr.bp_addr << std::dec << "/"
         << e.attr.bp_len << " type " << static_cast<int>(e.attr.bp_type)
         << (e.attr.disabled ? " disabled" : "") << ")";
      break;
    case Kind::kUnregister:
      os << "unregister(entry " << e.ref << ")";
      break;
    case Kind::kSwitch:
      os << "switch(cpu " << e.cpu << ", task " << e.task << ")";
      break;
    case Kind::kIdle:
      os << "idle(cpu " << e.cpu << ")";
      break;
    case Kind::kTick:
      os << "tick(cpu " << e.cpu << ")";
      break;
    case Kind::kAccess:
    case Kind::kExec:
      os << (e.kind == Kind::kExec           ? "exec"
             : e.access == AccessKind::kRead ? "read"
                                             : "write")
         << "(cpu " << e.cpu << ", task " << e.task << ", 0x" << std::hex << e.addr << std::dec
         << "/" << e.size << ")";
      break;
    case Kind::kPoke:
      os << "poke(dr" << e.reg << ", 0x" << std::hex << e.value << std::dec << ")";
      break;
    case Kind::kWait:
      os << "wait() -> 0x" << std::hex << e.observed << std::dec;
      break;
    case Kind::kResume:
      os << (e.step ? "step()" : "cont()");
      break;
  }
  os << " = " << (e.error ? errno_name(*e.error) : std::string("ok")) << ", " << e.hits.size()
     << " hits";
  return os.str();
}

struct RaceConfig {
  int cpus = 2;
  int tasks = 3;
  int registrars = 2;
  int runners = 2;
  bool tracer = true;  // a thread debugging the first task
  int ops = 1000;      // per thread
  std::uint32_t seed = 1;
};

template <typename T>
std::optional<ErrorCode> code_of(const Result<T>& r) {
  if (r) return std::nullopt;
  return r.error().code();
}

// A System with its tasks and the hits of the operation in progress (written by the handlers,
// which run under the caller's lock).
struct Stack {
  explicit Stack(const RaceConfig& cfg) {
    auto s = System::create({cfg.cpus, Arch::kX86_64, arbiter::FlexiblePolicy::kMultiplexed});
    sys = std::move(s.value());  // throws (and fails the test) if the config were refused
    for (int i = 0; i < cfg.tasks; ++i) tasks.push_back(*sys->machine().create_task());
    if (cfg.tracer) tracee.emplace(std::move(SimTracee::attach(*sys, tasks.front()).value()));
  }
  pmu::OverflowHandler handler() {
    return [this](pmu::Event& e, const pmu::Sample& s) {
      pending.push_back({e.id(), s.task ? s.task->value() : -1, s.cpu.value(), s.addr});
    };
  }
  // The operation of `e` (parameters only), its result and hits into `e`. `handles` maps a
  // registration's log index to its handle.
  void apply(Entry& e, std::size_t index, std::map<std::size_t, BreakpointHandle>& handles) {
    Machine& m = sys->machine();
    pending.clear();
    switch (e.kind) {
      case Kind::kRegister: {
        auto& api = sys->breakpoints();
        auto r = e.owner == Owner::kCpu
                     ? api.register_cpu_hw_breakpoint(e.attr, handler(), CpuId(e.cpu))
                     : api.register_user_hw_breakpoint(
                           e.attr, handler(), TaskId(e.task),
                           e.owner == Owner::kTaskCpu ? std::optional(CpuId(e.cpu)) : std::nullopt);
        e.error = code_of(r);
        if (r) {
          e.id = r->id();
          handles.emplace(index, std::move(*r));
        }
        break;
      }
      case Kind::kModify:
        e.error = code_of(sys->breakpoints().modify_user_hw_breakpoint(handles.at(e.ref), e.attr));
        break;
      case Kind::kUnregister:
        handles.erase(e.ref);
        break;
      case Kind::kSwitch:
        e.error = code_of(m.switch_to(CpuId(e.cpu), TaskId(e.task)));
        break;
      case Kind::kIdle:
        e.error = code_of(m.switch_to_idle(CpuId(e.cpu)));
        break;
      case Kind::kTick:
        e.error = code_of(m.tick(CpuId(e.cpu)));
        break;
      case Kind::kAccess:
        e.error = code_of(m.access(CpuId(e.cpu), TaskId(e.task), e.access, e.addr, e.size, 0x77));
        break;
      case Kind::kExec:
        e.error = code_of(m.exec(CpuId(e.cpu), TaskId(e.task), e.addr));
        break;
      case Kind::kPoke:
        e.error = code_of(tracee->poke_debugreg(e.reg, e.value));
        break;
      case Kind::kWait: {
        auto w = tracee->wait();
        e.error = code_of(w);
        e.observed = (w && *w) ? (std::uint64_t(static_cast<unsigned>((*w)->signal)) << 32) |
                                     ((*w)->dr6 & 0xffffffffULL)
                               : 0;
        break;
      }
      case Kind::kResume:
        e.error = code_of(e.step ? tracee->step() : tracee->cont());
        break;
    }
    e.hits = std::move(pending);
    pending.clear();
  }

  std::unique_ptr<System> sys;
  std::vector<TaskId> tasks;
  std::vector<HitRec> pending;
  std::optional<SimTracee> tracee;  // declared after sys: detaches before the System goes
};

pmu::EventAttr random_attr(std::mt19937& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  static const BpType kTypes[] = {BpType::kW, BpType::kRw, BpType::kRw, BpType::kX};
  static const std::uint64_t kLens[] = {1, 2, 4, 8};
  const BpType type = kTypes[pick(4)];
  const std::uint64_t len = type == BpType::kX ? 8 : kLens[pick(4)];
  const std::uint64_t addr =
      type == BpType::kX
          ? kWindow + 4 * static_cast<std::uint64_t>(pick(kSpan / 4))
          : kWindow + len * static_cast<std::uint64_t>(pick(kSpan / static_cast<int>(len)));
  pmu::EventAttr a = breakpoint_attr(addr, len, type);
  a.disabled = pick(8) == 0;
  return a;
}

// Runs the threads on one System; returns the log.
std::vector<Entry> run_concurrently(const RaceConfig& cfg, Stack& stack,
                                    std::map<std::size_t, BreakpointHandle>& left) {
  std::vector<Entry> log;
  std::atomic<int> ready{0};
  const int nthreads = cfg.registrars + cfg.runners + (cfg.tracer ? 1 : 0);
  auto registrar = [&](int id) {
    std::mt19937 rng(cfg.seed * 7919u + static_cast<std::uint32_t>(id));
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    std::map<std::size_t, BreakpointHandle> mine;
    ready.fetch_add(1);
    while (ready.load() < nthreads) std::this_thread::yield();
    for (int i = 0; i < cfg.ops; ++i) {
      Entry e;
      e.thread = id;
      const int r = pick(20);
      if (mine.empty() || r < 9) {
        e.kind = Kind::kRegister;
        e.owner = static_cast<Owner>(pick(3));
        e.task = stack.tasks[static_cast<std::size_t>(pick(cfg.tasks))].value();
        e.cpu = pick(cfg.cpus);
        e.attr = random_attr(rng);
        e.attr.pinned = pick(2) == 0;
      } else {
        auto it = mine.begin();
        std::advance(it, pick(static_cast<int>(mine.size())));
        e.ref = it->first;
        e.kind = r < 16 ? Kind::kModify : Kind::kUnregister;
      }
      auto lock = stack.sys->lock();
      if (e.kind == Kind::kModify) {
        const pmu::Event* ev = mine.at(e.ref).event();
        e.attr = ev->attr();
        const pmu::EventAttr next = random_attr(rng);
        e.attr.bp_addr = next.bp_addr;
        e.attr.bp_len = next.bp_len;
        e.attr.bp_type = next.bp_type;
        e.attr.disabled = next.disabled;
      }
      const std::size_t index = log.size();
      stack.apply(e, index, mine);
      log.push_back(std::move(e));
      lock.unlock();
      std::this_thread::yield();  // std::mutex is unfair: let the others in between
    }
    auto lock = stack.sys->lock();
    for (auto& [index, h] : mine) left.emplace(index, std::move(h));
    mine.clear();
  };
  auto runner = [&](int id) {
    std::mt19937 rng(cfg.seed * 104729u + static_cast<std::uint32_t>(id));
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    ready.fetch_add(1);
    while (ready.load() < nthreads) std::this_thread::yield();
    for (int i = 0; i < cfg.ops; ++i) {
      Entry e;
      e.thread = id;
      e.cpu = pick(cfg.cpus);
      const int r = pick(20);
      e.kind = r < 4    ? Kind::kSwitch
               : r < 5  ? Kind::kIdle
               : r < 7  ? Kind::kTick
               : r < 17 ? Kind::kAccess
                        : Kind::kExec;
      e.task = stack.tasks[static_cast<std::size_t>(pick(cfg.tasks))].value();
      static const int kSizes[] = {1, 2, 4, 8};
      e.access = pick(2) == 0 ? AccessKind::kRead : AccessKind::kWrite;
      e.size = e.kind == Kind::kExec ? 0 : kSizes[pick(4)];
      e.addr = e.kind == Kind::kExec ? kWindow + 4 * static_cast<std::uint64_t>(pick(kSpan / 4))
                                     : kWindow - 4 + static_cast<std::uint64_t>(pick(kSpan + 8));
      auto lock = stack.sys->lock();
      if (e.kind == Kind::kAccess || e.kind == Kind::kExec) {
        // The task the CPU runs now (under the lock); an idle CPU has nothing to access.
        auto cur = stack.sys->machine().current(CpuId(e.cpu));
        if (!cur || !*cur) continue;
        e.task = (*cur)->value();
      }
      std::map<std::size_t, BreakpointHandle> none;
      const std::size_t index = log.size();
      stack.apply(e, index, none);
      log.push_back(std::move(e));
      lock.unlock();
      std::this_thread::yield();
    }
  };
  // The debugger of the first task: DR0-DR3 in the window, DR7 images with random slots and
  // encodings (some refused), DR6 writes, waits, continues and single-steps.
  auto tracer = [&](int id) {
    std::mt19937 rng(cfg.seed * 15485863u + static_cast<std::uint32_t>(id));
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    ready.fetch_add(1);
    while (ready.load() < nthreads) std::this_thread::yield();
    for (int i = 0; i < cfg.ops; ++i) {
      Entry e;
      e.thread = id;
      const int r = pick(20);
      e.kind = r < 10 ? Kind::kPoke : r < 14 ? Kind::kWait : Kind::kResume;
      e.step = pick(3) == 0;
      static const int kRegs[] = {0, 1, 2, 3, 6, 7, 7, 7};
      e.reg = kRegs[pick(8)];
      if (e.reg < 4) {
        e.value = kWindow + static_cast<std::uint64_t>(pick(kSpan));
      } else if (e.reg == 6) {
        e.value = x86::dr6::kHardwareInit;
      } else {
        for (int slot = 0; slot < 4; ++slot) {
          if (pick(2) == 0) continue;
          e.value |= x86::dr7::local_bit(slot) |
                     (static_cast<std::uint64_t>(pick(16)) << x86::dr7::control_shift(slot));
        }
      }
      auto lock = stack.sys->lock();
      const std::size_t index = log.size();
      std::map<std::size_t, BreakpointHandle> none;
      stack.apply(e, index, none);
      log.push_back(std::move(e));
      lock.unlock();
      std::this_thread::yield();
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < cfg.registrars; ++i) threads.emplace_back(registrar, i);
  for (int i = 0; i < cfg.runners; ++i) threads.emplace_back(runner, cfg.registrars + i);
  if (cfg.tracer) threads.emplace_back(tracer, cfg.registrars + cfg.runners);
  for (std::thread& t : threads) t.join();
  return log;
}

// Closes everything, exits every task, and checks that nothing is left.
void drain(Stack& s, std::map<std::size_t, BreakpointHandle>& handles, const std::string& who) {
  auto lock = s.sys->lock();
  handles.clear();
  for (TaskId t : s.tasks) ASSERT_TRUE(s.sys->machine().exit(t).has_value()) << who;
  EXPECT_TRUE(s.sys->core().events().empty()) << who;
  EXPECT_FALSE(s.sys->arbiter().is_used()) << who << ":\n" << s.sys->arbiter().dump();
  for (int c = 0; c < s.sys->machine().possible_cpus(); ++c) {
    EXPECT_EQ(*s.sys->machine().dr7(CpuId(c)), 0u) << who << " cpu " << c;
  }
}

// One round. Adds the hits it replayed to `hits` and to `switches` how often consecutive log
// entries came from different threads (a measure of the interleaving).
void run_round(const RaceConfig& cfg, std::size_t& hits, std::size_t& switches,
               std::size_t& stops) {
  SCOPED_TRACE("seed " + std::to_string(cfg.seed) + ", " + std::to_string(cfg.cpus) + " CPUs, " +
               std::to_string(cfg.registrars) + " registrars, " + std::to_string(cfg.runners) +
               " runners");
  Stack live(cfg);
  std::map<std::size_t, BreakpointHandle> live_left;
  std::vector<Entry> log = run_concurrently(cfg, live, live_left);

  Stack replay(cfg);
  std::map<std::size_t, BreakpointHandle> handles;
  std::map<EventId, EventId> ids;  // live event -> replayed event
  for (std::size_t i = 0; i < log.size(); ++i) {
    const Entry& want = log[i];
    Entry got = want;
    got.id = 0;
    got.hits.clear();
    got.observed = 0;
    replay.apply(got, i, handles);
    ASSERT_EQ(got.error, want.error)
        << "entry " << i << ": live " << describe(want) << "\n  replay " << describe(got);
    ASSERT_EQ(got.observed, want.observed)
        << "entry " << i << ": live " << describe(want) << "\n  replay " << describe(got);
    if (want.kind == Kind::kWait && want.observed != 0) ++stops;
    if (want.kind == Kind::kRegister && !want.error) {
      ASSERT_FALSE(ids.contains(want.id)) << "entry " << i << ": live id reused";
      ids[want.id] = got.id;
    }
    std::vector<HitRec> mapped;
    for (const HitRec& h : want.hits) {
      HitRec m = h;
      auto it = ids.find(h.id);
      ASSERT_NE(it, ids.end()) << "entry " << i << ": a hit of an unknown event " << h.id;
      m.id = it->second;
      mapped.push_back(m);
    }
    ASSERT_EQ(got.hits, mapped) << "entry " << i << ": live " << describe(want) << "\n  replay "
                                << describe(got);
    hits += got.hits.size();
  }
  // Final counts and times of what is still registered.
  ASSERT_EQ(live_left.size(), handles.size());
  for (const auto& [index, h] : live_left) {
    auto a = h.read();
    auto b = handles.at(index).read();
    ASSERT_TRUE(a.has_value() && b.has_value());
    EXPECT_EQ(a->count, b->count) << "entry " << index;
    EXPECT_EQ(a->time_enabled, b->time_enabled) << "entry " << index;
    EXPECT_EQ(a->time_running, b->time_running) << "entry " << index;
  }
  EXPECT_EQ(live.sys->machine().now(), replay.sys->machine().now());
  drain(live, live_left, "live");
  drain(replay, handles, "replay");
  for (std::size_t i = 1; i < log.size(); ++i) switches += log[i].thread != log[i - 1].thread;
}

// Rounds over 1, 2, 3, 4 and 8 CPUs and varied thread mixes, until 40 rounds or a time budget is
// spent (at least one round per CPU count), so that a loaded machine or a sanitizer only reduces
// the number of rounds.
TEST(SimRace, ConcurrentLockedOperationsReplaySerially) {
  constexpr int kMaxRounds = 40;
  constexpr auto kBudget = std::chrono::seconds(12);
  static const int kCpus[] = {1, 2, 3, 4, 8};
  const auto start = std::chrono::steady_clock::now();
  std::size_t hits = 0, switches = 0, entries = 0, stops = 0;
  int rounds = 0;
  for (; rounds < kMaxRounds; ++rounds) {
    if (rounds >= 5 && std::chrono::steady_clock::now() - start > kBudget) break;
    RaceConfig cfg;
    cfg.cpus = kCpus[rounds % 5];
    cfg.tasks = 2 + rounds % 3;
    cfg.registrars = 1 + (rounds / 5) % 3;
    cfg.runners = 2 + (rounds / 3) % 3;
    cfg.ops = 2000;
    cfg.seed = static_cast<std::uint32_t>(rounds + 1);
    run_round(cfg, hits, switches, stops);
    if (HasFatalFailure()) return;
    entries += static_cast<std::size_t>((cfg.registrars + cfg.runners + 1) * cfg.ops);
  }
  // Not vacuous: hits were delivered (and replayed), and the threads really interleaved.
  EXPECT_GT(hits, 1000u);
  EXPECT_GT(stops, 0u) << "the tracer never saw its tracee stop";
  EXPECT_GT(switches, entries / 20) << "the threads hardly interleaved";
  std::printf(
      "%d rounds, %zu hits and %zu ptrace stops replayed, %zu thread switches in the logs of "
      "about %zu operations\n",
      rounds, hits, stops, switches, entries);
}

}  // namespace
}  // namespace hwarb::sim
