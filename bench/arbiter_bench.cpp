// bench/arbiter_bench.cpp — hwarb's arbiter against the Linux algorithm and the 2009 one.
//
// The three implementations: hwarb's arbiter, today's Linux hw_breakpoint.c slot accounting
// (baselines/linux_arbiter.h) and the 2009 hw_breakpoint slot-accounting algorithm
// (baselines/linux2009_arbiter.h).
//
// Runs the workloads described in bench/README.md on all three implementations in the same
// process and prints a markdown table of operations per second (one reserve or one release is one
// operation) with the ratios hwarb/linux and hwarb/linux2009.
//
//   arbiter_bench [--quick] [--workload thread|cpu|mixed|all] [--threads 1|2] [--reps N]
//                 [--time SECONDS] [--json FILE]
//
// Before measuring, a deterministic random sequence of reserves and releases is fed to all three
// implementations, which must take the same admission decisions; a disagreement, a refusal inside
// a workload (every workload is built to be admitted) or state left behind after the workload
// makes the exit status non-zero. --quick runs that check plus a tiny sweep (the ctest smoke test).
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "baselines/bp_request.h"
#include "baselines/linux2009_arbiter.h"
#include "baselines/linux_arbiter.h"
#include "bench_util.h"
#include "hwarb/arbiter/arbiter.h"

namespace {

namespace arb = hwarb::arbiter;
using hwarb::bench::BpRequest;
using hwarb::bench::Clock;
using hwarb::bench::ratio;
using hwarb::bench::seconds_since;
using hwarb::bench::SplitMix;

constexpr int kSlots = 4;  // x86_64: one shared pool of 4

// ---- the three implementations behind one shape -------------------------------------------

class HwarbImpl {
 public:
  using Handle = arb::Reservation;
  explicit HwarbImpl(int cpus) {
    arb::ArbiterConfig config;
    config.cpus = cpus;
    auto created = arb::Arbiter::create(config);
    if (!created) throw std::runtime_error("hwarb: " + created.error().to_string());
    arbiter_ = std::move(*created);
  }
  Handle reserve(const BpRequest& r) {
    arb::Request q;
    if (r.task >= 0) q.task = hwarb::TaskId(r.task);
    if (r.cpu >= 0) q.cpu = hwarb::CpuId(r.cpu);
    q.weight = r.weight;
    auto res = arbiter_->reserve(q);
    if (!res) return Handle{};
    return std::move(*res);
  }
  void release(Handle& h) { arbiter_->release(h); }
  bool is_used() const { return arbiter_->is_used(); }

 private:
  std::unique_ptr<arb::Arbiter> arbiter_;
};

template <typename Baseline>
class BaselineImpl {
 public:
  using Handle = typename Baseline::Handle;

  explicit BaselineImpl(int cpus) : impl_(cpus, kSlots) {}
  Handle reserve(const BpRequest& r) { return impl_.reserve(r); }
  void release(Handle& h) { impl_.release(h); }
  bool is_used() const { return impl_.is_used(); }

 private:
  Baseline impl_;
};

using LinuxImpl = BaselineImpl<hwarb::bench::LinuxArbiter>;
using Linux2009Impl = BaselineImpl<hwarb::bench::Linux2009Arbiter>;

// ---- workloads ------------------------------------------------------------------------------

struct Cell {
  std::string workload;
  int threads = 1;
  int cpus = 2;
  int tasks = 10;
};

// A workload owns the reservations it makes. run(thread, units) does `units` units of work on
// the thread's own tasks and returns the operations done; max_units bounds a unit count (the
// thread workload's units are tasks, whose reservations are all held at the peak of a run).
constexpr std::int64_t kUnbounded = std::int64_t{1} << 40;

struct ThreadSlice {
  std::int64_t first = 0;
  std::int64_t count = 0;
};

ThreadSlice slice_of(const Cell& cell, int thread) {
  const std::int64_t per = cell.tasks / cell.threads;
  const std::int64_t first = per * thread;
  const std::int64_t count = thread + 1 == cell.threads ? cell.tasks - first : per;
  return {first, count};
}

// thread: each task reserves kBps task-on-all-CPU breakpoints, then all are released (like
// `perf bench breakpoint thread`: threads come up with breakpoints, then exit).
template <typename Impl>
class ThreadWorkload {
 public:
  static constexpr int kBps = 4;

  ThreadWorkload(Impl& impl, const Cell& cell) : impl_(impl), cell_(cell) {
    for (int t = 0; t < cell.threads; ++t) per_thread_.emplace_back(slice_of(cell, t));
  }
  std::int64_t max_units(int thread) const { return per_thread_[thread].slice.count; }
  std::int64_t run(int thread, std::int64_t units) {
    PerThread& me = per_thread_[thread];
    const std::int64_t k = std::min(units, me.slice.count);
    if (static_cast<std::int64_t>(me.held.size()) < k * kBps) {
      me.held.resize(static_cast<std::size_t>(k * kBps));
    }
    std::int64_t ops = 0;
    std::size_t n = 0;
    for (std::int64_t i = 0; i < k; ++i) {
      const std::int64_t task = me.slice.first + (me.cursor + i) % me.slice.count;
      for (int j = 0; j < kBps; ++j, ++n) {
        me.held[n] = impl_.reserve(BpRequest{task, -1, 1});
        if (!me.held[n]) ++me.refused;
        ++ops;
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (me.held[i]) {
        impl_.release(me.held[i]);
        ++ops;
      }
    }
    me.cursor = (me.cursor + k) % me.slice.count;
    return ops;
  }
  std::int64_t refused() const {
    std::int64_t r = 0;
    for (const auto& p : per_thread_) r += p.refused;
    return r;
  }
  void finish() {}

 private:
  struct alignas(64) PerThread {
    explicit PerThread(ThreadSlice s) : slice(s) {}
    ThreadSlice slice;
    std::int64_t cursor = 0;
    std::int64_t refused = 0;
    std::vector<typename Impl::Handle> held;
  };
  Impl& impl_;
  Cell cell_;
  std::vector<PerThread> per_thread_;
};

// The reservations of cell.tasks background tasks, held until release_all(). pattern(i) for
// task i:
//   cpu workload:   0: 1 all-CPU; 1: 2 all-CPU; 2: 1 on a CPU; 3: 1 on a CPU + 1 all-CPU
//   mixed workload: 1 all-CPU
template <typename Impl>
class Background {
 public:
  Background(Impl& impl, const Cell& cell, bool varied, std::uint64_t seed);
  std::int64_t refused() const { return refused_; }
  void release_all() {
    for (auto& h : held_) impl_.release(h);
  }

 private:
  void hold(std::int64_t task, int cpu) {
    held_.push_back(impl_.reserve(BpRequest{task, cpu, 1}));
    if (!held_.back()) ++refused_;
  }
  Impl& impl_;
  std::vector<typename Impl::Handle> held_;
  std::int64_t refused_ = 0;
};

template <typename Impl>
Background<Impl>::Background(Impl& impl, const Cell& cell, bool varied, std::uint64_t seed)
    : impl_(impl) {
  SplitMix rng(seed);
  for (std::int64_t task = 0; task < cell.tasks; ++task) {
    const int pattern = varied ? static_cast<int>(task % 4) : 0;
    switch (pattern) {
      case 0:
        hold(task, -1);
        break;
      case 1:
        hold(task, -1);
        hold(task, -1);
        break;
      case 2:
        hold(task, rng.below(cell.cpus));
        break;
      default:
        hold(task, rng.below(cell.cpus));
        hold(task, -1);
        break;
    }
  }
}

// cpu: CPU-bound reserve + release on a random CPU while the background tasks hold 1-2 slots
// (per-CPU and all-CPU, so both the per-CPU and the all-CPU task histograms are populated). The
// background leaves at least 2 slots on every CPU, one per benchmark thread.
template <typename Impl>
class CpuWorkload {
 public:
  CpuWorkload(Impl& impl, const Cell& cell)
      : impl_(impl), cell_(cell), background_(impl, cell, true, 42) {
    for (int t = 0; t < cell.threads; ++t) per_thread_.emplace_back(1000 + t);
  }
  std::int64_t max_units(int) const { return kUnbounded; }
  std::int64_t run(int thread, std::int64_t units) {
    PerThread& me = per_thread_[thread];
    for (std::int64_t i = 0; i < units; ++i) {
      auto h = impl_.reserve(BpRequest{-1, me.rng.below(cell_.cpus), 1});
      if (!h) {
        ++me.refused;
        continue;
      }
      impl_.release(h);
    }
    return 2 * units;
  }
  std::int64_t refused() const {
    std::int64_t r = background_.refused();
    for (const auto& p : per_thread_) r += p.refused;
    return r;
  }
  void finish() { background_.release_all(); }

 private:
  struct alignas(64) PerThread {
    explicit PerThread(std::uint64_t seed) : rng(seed) {}
    SplitMix rng;
    std::int64_t refused = 0;
  };
  Impl& impl_;
  Cell cell_;
  Background<Impl> background_;
  std::vector<PerThread> per_thread_;
};

// mixed: every task holds one all-CPU breakpoint; a unit takes the next task of the thread
// through all-CPU-only -> mixed -> all-CPU-only: reserve one on a random CPU, reserve one on all
// CPUs, release that, release the per-CPU one (4 operations).
template <typename Impl>
class MixedWorkload {
 public:
  MixedWorkload(Impl& impl, const Cell& cell)
      : impl_(impl), cell_(cell), background_(impl, cell, false, 43) {
    for (int t = 0; t < cell.threads; ++t) per_thread_.emplace_back(slice_of(cell, t), 2000 + t);
  }
  std::int64_t max_units(int) const { return kUnbounded; }
  std::int64_t run(int thread, std::int64_t units) {
    PerThread& me = per_thread_[thread];
    std::int64_t ops = 0;
    for (std::int64_t i = 0; i < units; ++i) {
      const std::int64_t task = me.slice.first + me.cursor;
      me.cursor = me.cursor + 1 == me.slice.count ? 0 : me.cursor + 1;
      auto local = impl_.reserve(BpRequest{task, me.rng.below(cell_.cpus), 1});
      auto all = impl_.reserve(BpRequest{task, -1, 1});
      ops += 2;
      me.refused += (local ? 0 : 1) + (all ? 0 : 1);
      if (all) {
        impl_.release(all);
        ++ops;
      }
      if (local) {
        impl_.release(local);
        ++ops;
      }
    }
    return ops;
  }
  std::int64_t refused() const {
    std::int64_t r = background_.refused();
    for (const auto& p : per_thread_) r += p.refused;
    return r;
  }
  void finish() { background_.release_all(); }

 private:
  struct alignas(64) PerThread {
    PerThread(ThreadSlice s, std::uint64_t seed) : slice(s), rng(seed) {}
    ThreadSlice slice;
    std::int64_t cursor = 0;
    SplitMix rng;
    std::int64_t refused = 0;
  };
  Impl& impl_;
  Cell cell_;
  Background<Impl> background_;
  std::vector<PerThread> per_thread_;
};

// ---- measuring ------------------------------------------------------------------------------

struct Options {
  bool quick = false;
  std::string workload = "all";
  std::optional<int> threads;
  int reps = 5;
  double rep_time = 0.2;      // seconds per repetition (at least one chunk)
  double max_chunk = 0.5;     // a chunk covering all of a thread's tasks may take this long
  double chunk_time = 0.05;   // otherwise a chunk is sized to take about this long
  double calib_time = 0.002;  // calibration doubles the units until a run takes this long
  std::string json;
};

struct Measure {
  double ops_per_s = 0;
  bool windowed = false;  // thread workload: ran on fewer live tasks than the cell's (rate only)
  std::int64_t refused = 0;
  bool leaked = false;
};

// One repetition: every thread runs `chunks` runs of `units`; returns operations per second.
template <typename W>
double run_rep(W& w, int threads, std::int64_t units, std::int64_t chunks) {
  if (threads == 1) {
    const auto t0 = Clock::now();
    std::int64_t ops = 0;
    for (std::int64_t c = 0; c < chunks; ++c) ops += w.run(0, units);
    return static_cast<double>(ops) / seconds_since(t0);
  }
  std::vector<std::int64_t> ops(static_cast<std::size_t>(threads), 0);
  std::vector<Clock::time_point> end(static_cast<std::size_t>(threads));
  Clock::time_point start;
  std::barrier sync(threads, [&start]() noexcept { start = Clock::now(); });
  {
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        sync.arrive_and_wait();
        std::int64_t n = 0;
        for (std::int64_t c = 0; c < chunks; ++c) n += w.run(t, units);
        ops[static_cast<std::size_t>(t)] = n;
        end[static_cast<std::size_t>(t)] = Clock::now();
      });
    }
  }
  std::int64_t total = 0;
  for (auto n : ops) total += n;
  const auto last = *std::max_element(end.begin(), end.end());
  return static_cast<double>(total) / std::chrono::duration<double>(last - start).count();
}

// One implementation set up for one cell: calibrated, warmed up, ready to run repetitions.
template <typename Impl, template <typename> class W>
class Bench {
 public:
  Bench(const Cell& cell, const Options& opt) : cell_(cell), impl_(cell.cpus), w_(impl_, cell) {
    // Calibrate on thread 0 alone (this is also the warm-up): double until a run is long enough.
    const std::int64_t cap = w_.max_units(0);
    std::int64_t units = 1;
    double t = 0;
    for (;;) {
      const auto t0 = Clock::now();
      w_.run(0, units);
      t = seconds_since(t0);
      if (t >= opt.calib_time || units >= cap) break;
      units = std::min(cap, units * 2);
    }
    const double per_unit = std::max(t / static_cast<double>(units), 1e-9);
    if (static_cast<double>(cap) * per_unit <= opt.max_chunk) {
      units_ = cap;
    } else {
      units_ =
          std::clamp<std::int64_t>(static_cast<std::int64_t>(opt.chunk_time / per_unit), 1, cap);
      windowed_ = units_ < cap && cap < kUnbounded;
    }
    const double chunk = static_cast<double>(units_) * per_unit;
    chunks_ = std::max<std::int64_t>(1, static_cast<std::int64_t>(opt.rep_time / chunk));
    run_rep(w_, cell_.threads, units_, 1);  // warm-up with every thread
  }
  void rep() { rates_.push_back(run_rep(w_, cell_.threads, units_, chunks_)); }
  double last() const { return rates_.back(); }
  Measure finish() {
    Measure m;
    std::sort(rates_.begin(), rates_.end());
    m.ops_per_s = rates_.empty() ? 0 : rates_[rates_.size() / 2];
    m.windowed = windowed_;
    m.refused = w_.refused();
    w_.finish();
    m.leaked = impl_.is_used();
    return m;
  }

 private:
  Cell cell_;
  Impl impl_;
  W<Impl> w_;  // destroyed before impl_
  std::int64_t units_ = 1;
  std::int64_t chunks_ = 1;
  bool windowed_ = false;
  std::vector<double> rates_;
};

struct Row {
  Cell cell;
  Measure hwarb, linux_, linux2009;
};

// The repetitions of the three implementations are interleaved, so that a change in the load of
// the machine affects all three alike.
template <template <typename> class W>
Row measure_all(const Cell& cell, const Options& opt) {
  Bench<HwarbImpl, W> hw(cell, opt);
  Bench<LinuxImpl, W> lx(cell, opt);
  Bench<Linux2009Impl, W> sd(cell, opt);
  for (int r = 0; r < opt.reps; ++r) {
    hw.rep();
    lx.rep();
    sd.rep();
  }
  return Row{cell, hw.finish(), lx.finish(), sd.finish()};
}

// The thread workload's drop from few to many tasks, for hwarb and the Linux algorithm, each the
// median of per-repetition ratios: the four (implementation, T) benches run their repetitions
// interleaved, so a change in the machine's load hits both sides of every ratio alike (measuring
// the two cells minutes apart, as the sweep does, mixes the drop with the load's drift).
struct Drop {
  int cpus = 0;
  int small = 0, large = 0;
  Measure hw_small, hw_large, lx_small, lx_large;
  std::vector<double> hw_ratio, lx_ratio;  // per repetition, small/large, sorted
};

Drop measure_drop(int cpus, int small, int large, const Options& options) {
  Options opt = options;
  opt.max_chunk = 1e9;  // every repetition holds all T tasks' reservations at its peak (no window)
  Bench<HwarbImpl, ThreadWorkload> hs(Cell{"thread", 1, cpus, small}, opt);
  Bench<HwarbImpl, ThreadWorkload> hl(Cell{"thread", 1, cpus, large}, opt);
  Bench<LinuxImpl, ThreadWorkload> ls(Cell{"thread", 1, cpus, small}, opt);
  Bench<LinuxImpl, ThreadWorkload> ll(Cell{"thread", 1, cpus, large}, opt);
  Drop d{cpus, small, large, {}, {}, {}, {}, {}, {}};
  for (int r = 0; r < opt.reps; ++r) {
    hs.rep();
    hl.rep();
    ls.rep();
    ll.rep();
    d.hw_ratio.push_back(hs.last() / hl.last());
    d.lx_ratio.push_back(ls.last() / ll.last());
  }
  std::sort(d.hw_ratio.begin(), d.hw_ratio.end());
  std::sort(d.lx_ratio.begin(), d.lx_ratio.end());
  d.hw_small = hs.finish();
  d.hw_large = hl.finish();
  d.lx_small = ls.finish();
  d.lx_large = ll.finish();
  return d;
}

// ---- admission agreement --------------------------------------------------------------------

std::string describe(const BpRequest& r) {
  std::string s = r.task >= 0 ? "task " + std::to_string(r.task) : std::string("cpu-bound");
  s += " cpu " + (r.cpu >= 0 ? std::to_string(r.cpu) : std::string("all"));
  return s + " w" + std::to_string(r.weight);
}

// Feeds one seeded sequence of reserves and releases to all three; false on any disagreement.
bool check_agreement(int cpus, int tasks, int steps, std::uint64_t seed) {
  HwarbImpl hw(cpus);
  LinuxImpl lx(cpus);
  Linux2009Impl sd(cpus);
  struct Live {
    HwarbImpl::Handle hw;
    LinuxImpl::Handle lx;
    Linux2009Impl::Handle sd;
  };
  std::vector<Live> live;
  SplitMix rng(seed);
  int admitted = 0, refused = 0;
  bool ok = true;
  for (int step = 0; step < steps && ok; ++step) {
    const bool filling = (step / 400) % 2 == 0;
    const int reserve_pct = filling ? 70 : 35;
    if (live.empty() || rng.below(100) < reserve_pct) {
      BpRequest r;
      switch (rng.below(3)) {
        case 0:
          r.cpu = rng.below(cpus);
          break;
        case 1:
          r.task = rng.below(tasks);
          r.cpu = rng.below(cpus);
          break;
        default:
          r.task = rng.below(tasks);
          break;
      }
      const int w = rng.below(50);
      r.weight = w == 0 ? kSlots + 1 : w < 35 ? 1 : w < 45 ? 2 : 3;
      Live l{hw.reserve(r), lx.reserve(r), sd.reserve(r)};
      const bool a = static_cast<bool>(l.hw), b = l.lx != nullptr, c = l.sd != nullptr;
      if (a != b || a != c) {
        std::fprintf(stderr,
                     "DISAGREEMENT (cpus %d, seed %llu, step %d): %s: hwarb %s, linux %s, "
                     "linux2009 %s\n",
                     cpus, static_cast<unsigned long long>(seed), step, describe(r).c_str(),
                     a ? "admits" : "refuses", b ? "admits" : "refuses", c ? "admits" : "refuses");
        ok = false;
      }
      if (a || b || c) {
        live.push_back(std::move(l));
        ++admitted;
      } else {
        ++refused;
      }
    } else {
      const auto i = static_cast<std::size_t>(rng.below(static_cast<int>(live.size())));
      std::swap(live[i], live.back());
      hw.release(live.back().hw);
      lx.release(live.back().lx);
      sd.release(live.back().sd);
      live.pop_back();
    }
  }
  for (auto& l : live) {
    hw.release(l.hw);
    lx.release(l.lx);
    sd.release(l.sd);
  }
  live.clear();
  if (hw.is_used() || lx.is_used() || sd.is_used()) {
    std::fprintf(stderr, "agreement (cpus %d): state left after releasing everything\n", cpus);
    ok = false;
  }
  std::printf("agreement: cpus %d, tasks %d, %d steps: %d admitted, %d refused: %s\n", cpus, tasks,
              steps, admitted, refused, ok ? "all three agree" : "DISAGREE");
  return ok;
}

// ---- output ---------------------------------------------------------------------------------

std::string rate(const Measure& m) {
  return hwarb::bench::format_rate(m.ops_per_s) + (m.windowed ? "*" : "");
}

void print_table(const std::vector<Row>& rows) {
  std::printf(
      "\n| workload | threads | cpus | tasks | hwarb ops/s | linux ops/s | linux2009 ops/s | "
      "hwarb/linux | hwarb/linux2009 |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& r : rows) {
    std::printf("| %s | %d | %d | %d | %s | %s | %s | %s | %s |\n", r.cell.workload.c_str(),
                r.cell.threads, r.cell.cpus, r.cell.tasks, rate(r.hwarb).c_str(),
                rate(r.linux_).c_str(), rate(r.linux2009).c_str(),
                ratio(r.hwarb.ops_per_s, r.linux_.ops_per_s).c_str(),
                ratio(r.hwarb.ops_per_s, r.linux2009.ops_per_s).c_str());
  }
  std::printf(
      "\n`*`: the thread workload ran on windows of fewer tasks than the cell's (each window "
      "reserves, then releases; the rate per operation is what is compared).\n");
}

void write_json(const std::vector<Row>& rows, const std::string& path) {
  std::ofstream out(path);
  out << "[\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    out << "  {\"workload\": \"" << r.cell.workload << "\", \"threads\": " << r.cell.threads
        << ", \"cpus\": " << r.cell.cpus << ", \"tasks\": " << r.cell.tasks
        << ", \"hwarb_ops_per_s\": " << r.hwarb.ops_per_s
        << ", \"linux_ops_per_s\": " << r.linux_.ops_per_s
        << ", \"linux2009_ops_per_s\": " << r.linux2009.ops_per_s
        << ", \"linux2009_windowed\": " << (r.linux2009.windowed ? "true" : "false") << "}"
        << (i + 1 < rows.size() ? ",\n" : "\n");
  }
  out << "]\n";
}

// ---- main -----------------------------------------------------------------------------------

std::optional<Options> parse(int argc, char** argv) {
  Options opt;
  const bool parsed =
      hwarb::bench::Args("arbiter_bench")
          .choice("workload", &opt.workload, {"thread", "cpu", "mixed", "drop", "all"})
          .number("threads", "1|2", &opt.threads, 1, 64)
          .number("reps", "N", &opt.reps, 1)
          .number("time", "SECONDS_PER_REP", &opt.rep_time, 0.001)
          .text("json", "FILE", &opt.json)
          .parse(argc, argv, &opt.quick);
  if (!parsed) return std::nullopt;
  if (opt.quick) {
    opt.reps = 1;
    opt.rep_time = 0.002;
    opt.max_chunk = 0.002;
    opt.chunk_time = 0.001;
    opt.calib_time = 0.0002;
  }
  return opt;
}

int run(const Options& opt) {
  bool ok = check_agreement(4, 6, 4000, 1);
  ok = check_agreement(64, 20, 4000, 2) && ok;
  ok = check_agreement(3, 3, 4000, 3) && ok;
  if (!ok) return 1;

  std::vector<int> thread_counts = {1, 2};
  if (opt.threads) thread_counts = {*opt.threads};
  const std::vector<int> sweep_tasks =
      opt.quick ? std::vector<int>{10, 1000} : std::vector<int>{10, 1000, 100000};
  const std::vector<int> sweep_cpus =
      opt.quick ? std::vector<int>{2, 64} : std::vector<int>{2, 64, 1024, 4096};
  const std::vector<int> big_cpus = opt.quick ? std::vector<int>{64} : std::vector<int>{64, 1024};
  const int background_tasks = opt.quick ? 1000 : 10000;
  auto wants = [&](std::string_view w) { return opt.workload == "all" || opt.workload == w; };

  std::vector<Row> rows;
  auto note = [&](const Row& r) {
    rows.push_back(r);
    std::fprintf(stderr, "  %s threads %d cpus %d tasks %d: hwarb %s, linux %s, linux2009 %s\n",
                 r.cell.workload.c_str(), r.cell.threads, r.cell.cpus, r.cell.tasks,
                 rate(r.hwarb).c_str(), rate(r.linux_).c_str(), rate(r.linux2009).c_str());
  };
  const auto t0 = Clock::now();
  for (int threads : thread_counts) {
    if (wants("thread")) {
      for (int tasks : sweep_tasks) {
        for (int cpus : sweep_cpus) {
          note(measure_all<ThreadWorkload>(Cell{"thread", threads, cpus, tasks}, opt));
        }
      }
    }
    if (wants("cpu")) {
      for (int cpus : big_cpus) {
        note(measure_all<CpuWorkload>(Cell{"cpu", threads, cpus, background_tasks}, opt));
      }
    }
    if (wants("mixed")) {
      for (int cpus : big_cpus) {
        note(measure_all<MixedWorkload>(Cell{"mixed", threads, cpus, background_tasks}, opt));
      }
    }
  }
  std::vector<Drop> drops;
  if (opt.workload == "drop") {
    const int large = opt.quick ? 1000 : 100000;
    for (int cpus : sweep_cpus) {
      drops.push_back(measure_drop(cpus, 10, large, opt));
      const Drop& d = drops.back();
      rows.push_back(Row{Cell{"drop", 1, cpus, d.small}, d.hw_small, d.lx_small, {}});
      rows.push_back(Row{Cell{"drop", 1, cpus, d.large}, d.hw_large, d.lx_large, {}});
    }
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    auto key = [](const Row& r) {
      const int w = r.cell.workload == "thread" ? 0 : r.cell.workload == "cpu" ? 1 : 2;
      return std::tuple(w, r.cell.threads, r.cell.tasks, r.cell.cpus);
    };
    return key(a) < key(b);
  });
  if (drops.empty()) {
    print_table(rows);
  } else {
    std::printf(
        "\n| cpus | T | hwarb ops/s | linux ops/s | T | hwarb ops/s | linux ops/s | hwarb drop "
        "(median [min-max]) | linux drop |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const Drop& d : drops) {
      std::printf("| %d | %d | %s | %s | %d | %s | %s | %.2fx [%.2f-%.2f] | %.2fx [%.2f-%.2f] |\n",
                  d.cpus, d.small, rate(d.hw_small).c_str(), rate(d.lx_small).c_str(), d.large,
                  rate(d.hw_large).c_str(), rate(d.lx_large).c_str(),
                  hwarb::bench::median(d.hw_ratio), d.hw_ratio.front(), d.hw_ratio.back(),
                  hwarb::bench::median(d.lx_ratio), d.lx_ratio.front(), d.lx_ratio.back());
    }
  }
  std::printf("\ntotal time %.1f s\n", seconds_since(t0));

  for (const auto& r : rows) {
    const std::pair<std::string_view, const Measure*> all[] = {
        {"hwarb", &r.hwarb}, {"linux", &r.linux_}, {"linux2009", &r.linux2009}};
    for (const auto& [name, m] : all) {
      if (m->refused != 0 || m->leaked) {
        std::fprintf(stderr, "ERROR: %s on %s/%d threads/%d cpus/%d tasks: %lld refused%s\n",
                     std::string(name).c_str(), r.cell.workload.c_str(), r.cell.threads,
                     r.cell.cpus, r.cell.tasks, static_cast<long long>(m->refused),
                     m->leaked ? ", state left after release" : "");
        ok = false;
      }
    }
  }
  if (!opt.json.empty()) write_json(rows, opt.json);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return hwarb::bench::driver_main(argc, argv, parse, run);
}
