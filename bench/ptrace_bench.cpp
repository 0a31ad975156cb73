// bench/ptrace_bench.cpp — PTRACE_PEEKUSER/POKEUSER of the debug registers: the real kernel
// against the emulation, the same calls through the same interface, measured in one run.
//
//  kernel:    native::LinuxTracee on a forked child in its ptrace-stop (one system call a call);
//  emulation: sim::SimTracee on a task of a sim::System (x86_64, 2 CPUs; the DR emulation on the
//             hw_breakpoint API, the arbiter and the perf-event core).
// Both are driven as a ptrace_compat::Tracee&, so the measured loop is identical.
//
// Where the tracee stopped matters to the kernel: enabling or disabling a ptrace breakpoint
// (perf_event_enable/disable of a task event) makes a function call on the CPU the tracee last
// ran on — direct when that is the tracer's CPU, an IPI otherwise (expensive in a VM). So the
// tracer is pinned to its first allowed CPU and the kernel is measured twice: with the child
// stopped on the tracer's CPU ("same CPU") and on another one ("other CPU"; left out on a
// machine with one CPU). Workloads:
//  debugger: poke DR0 (an address), poke DR7 (enable slot 0: 8-byte write), peek DR6, peek DR7,
//            poke DR7 = 0 (disable) — 5 calls, what a debugger does to set, check and clear a
//            watchpoint;
//  dr0:      pokes of DR0, alternating two addresses (each modifies slot 0's breakpoint);
//  dr7:      pokes of DR7, alternating enable / disable of slot 0;
//  peek:     peeks of DR0..DR7 in turn.
// Each workload is timed on both sides with repetitions interleaved (kernel, emulation, ...);
// median of N (default 5) repetitions of about 0.2 s each, after a calibration run.
//
//   ptrace_bench [--quick] [--reps N] [--time SECONDS]
//
// Every run first checks correctness: a fixed sequence (every workload's calls, then calls the
// kernel refuses — misaligned and past-the-end offsets, DR4/DR5 writes, bad DR7 encodings, kernel
// addresses — and the register images after them) goes to a fresh child and a fresh simulated task,
// and every result (success or errno, and each peeked value) must be the same. The measured loops
// also check every call's result. A disagreement or a failed call makes the exit status 1; a
// machine that refuses ptrace exits with 77 (ctest: skipped) after saying why. --quick (the ctest
// smoke test) runs the check and tiny repetitions.
#include <algorithm>
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
#include "hwarb/base/format.h"
#include "hwarb/linux/linux_tracee.h"
#include "hwarb/linux/stopped_child.h"
#include "hwarb/linux/syscalls.h"
#include "hwarb/ptrace_compat/tracee.h"
#include "hwarb/ptrace_compat/user_area.h"
#include "hwarb/sim/sim_tracee.h"
#include "hwarb/sim/system.h"

namespace {

namespace sim = hwarb::sim;
namespace native = hwarb::native;
using hwarb::ErrorCode;
using hwarb::Result;
using hwarb::bench::Clock;
using hwarb::bench::format_rate;
using hwarb::bench::median;
using hwarb::bench::ratio;
using hwarb::bench::seconds_since;
using hwarb::bench::Timed;
using hwarb::ptrace_compat::Tracee;
using hwarb::ptrace_compat::UserLayout;

constexpr int kSkipped = 77;
constexpr std::uint64_t kAddrA = 0x10000;
constexpr std::uint64_t kAddrB = 0x10008;
constexpr std::uint64_t kDr7Enable = 0xd0001;  // slot 0: L0, R/W 01 (write), LEN 11 (8 bytes)

struct Options {
  bool quick = false;
  int reps = 5;
  double rep_time = 0.2;
};

std::uint64_t dr(int n) {
  return hwarb::ptrace_compat::debugreg_offset(hwarb::ptrace_compat::user_area(UserLayout::kX86_64),
                                               n);
}

// ---- the two sides --------------------------------------------------------------------------

struct KernelSide {
  std::optional<native::LinuxTracee> tracee;
};

struct SimSide {
  std::unique_ptr<sim::System> sys;
  std::optional<sim::SimTracee> tracee;
};

// A fresh child in its ptrace-stop (on `cpu` if given), or why it cannot be had.
Result<KernelSide> make_kernel(std::optional<int> cpu = std::nullopt) {
  auto child = native::StoppedChild::spawn(cpu);
  if (!child) return std::unexpected(child.error());
  auto t = native::LinuxTracee::create(std::move(*child));
  if (!t) return std::unexpected(t.error());
  KernelSide k;
  k.tracee.emplace(std::move(*t));
  return k;
}

Result<SimSide> make_sim() {
  auto sys = sim::System::create(sim::SystemConfig{});
  if (!sys) return std::unexpected(sys.error());
  auto task = (*sys)->machine().create_task();
  if (!task) return std::unexpected(task.error());
  auto t = sim::SimTracee::attach(**sys, *task, UserLayout::kX86_64);
  if (!t) return std::unexpected(t.error());
  SimSide s;
  s.sys = std::move(*sys);
  s.tracee.emplace(std::move(*t));
  return s;
}

// ---- calls and their results ----------------------------------------------------------------

struct Call {
  bool poke = false;
  std::uint64_t offset = 0;
  std::uint64_t value = 0;
};

Call poke(std::uint64_t offset, std::uint64_t value) {
  return Call{true, offset, value};
}
Call peek(std::uint64_t offset) {
  return Call{false, offset, 0};
}

// What a call gave: 0 = success, else the errno; and the peeked word.
struct Outcome {
  int error = 0;
  std::uint64_t value = 0;
  friend bool operator==(const Outcome&, const Outcome&) = default;
};

Outcome apply(Tracee& t, const Call& c) {
  if (c.poke) {
    auto r = t.poke_user(c.offset, c.value);
    return r ? Outcome{} : Outcome{static_cast<int>(r.error().code()), 0};
  }
  auto r = t.peek_user(c.offset);
  return r ? Outcome{0, *r} : Outcome{static_cast<int>(r.error().code()), 0};
}

std::string describe(const Call& c) {
  return (c.poke ? "poke " : "peek ") + std::to_string(c.offset) +
         (c.poke ? " = " + hwarb::hex(c.value) : std::string());
}

std::string describe(const Outcome& o) {
  if (o.error != 0) return hwarb::errno_name(static_cast<ErrorCode>(o.error));
  return "ok " + hwarb::hex(o.value);
}

// ---- workloads ------------------------------------------------------------------------------

struct Workload {
  std::string name;
  std::string calls;                       // what one cycle is, for the table
  std::vector<Call> setup;                 // run once on each side before timing
  std::function<Call(std::int64_t)> call;  // the i-th call of the loop
};

std::vector<Workload> workloads() {
  std::vector<Workload> w;
  w.push_back({"debugger",
               "poke DR0, poke DR7 on, peek DR6, peek DR7, poke DR7 off",
               {},
               [](std::int64_t i) {
                 switch (i % 5) {
                   case 0:
                     return poke(dr(0), (i / 5) % 2 == 0 ? kAddrA : kAddrB);
                   case 1:
                     return poke(dr(7), kDr7Enable);
                   case 2:
                     return peek(dr(6));
                   case 3:
                     return peek(dr(7));
                   default:
                     return poke(dr(7), 0);
                 }
               }});
  w.push_back(
      {"dr0", "poke DR0 (two addresses in turn)", {poke(dr(0), kAddrA)}, [](std::int64_t i) {
         return poke(dr(0), i % 2 == 0 ? kAddrB : kAddrA);
       }});
  w.push_back({"dr7",
               "poke DR7 (enable / disable slot 0 in turn)",
               {poke(dr(0), kAddrA)},
               [](std::int64_t i) { return poke(dr(7), i % 2 == 0 ? kDr7Enable : 0); }});
  w.push_back({"peek",
               "peek DR0..DR7 in turn",
               {poke(dr(0), kAddrA), poke(dr(7), kDr7Enable)},
               [](std::int64_t i) { return peek(dr(static_cast<int>(i % 8))); }});
  return w;
}

// Calls the kernel refuses, between calls it accepts: each side must answer them alike.
std::vector<Call> refusals() {
  return {
      peek(dr(0) + 4),
      poke(dr(7) + 1, 0),
      peek(920),
      poke(920, 0),
      peek(928),
      poke(dr(4), 1),
      peek(dr(5)),
      poke(dr(7), 0x20001),                // R/W 10
      poke(dr(7), 0x40001),                // execute with LEN 01
      poke(dr(1), 0xffffffff81000000ULL),  // kernel address
      poke(dr(1), 0x7fffffffeff9),
      poke(dr(7), 0x4),  // execute at the top of user space
      poke(dr(2), kAddrA),
      poke(dr(3), kAddrB),
      poke(dr(7), 0x55),
      peek(dr(7)),
      peek(dr(0)),
      peek(dr(1)),
      peek(dr(2)),
      peek(dr(3)),
      poke(dr(6), 0x1234),
      peek(dr(6)),
      poke(dr(7), 0),
  };
}

// The correctness check: the same sequence on a fresh child and a fresh simulated task.
bool check(int cycles) {
  auto kernel = make_kernel();
  auto emu = make_sim();
  if (!kernel || !emu) {
    std::fprintf(stderr, "ERROR: check: %s\n",
                 (!kernel ? kernel.error() : emu.error()).to_string().c_str());
    return false;
  }
  std::vector<Call> seq;
  for (const Workload& w : workloads()) {
    seq.insert(seq.end(), w.setup.begin(), w.setup.end());
    for (std::int64_t i = 0; i < cycles; ++i) seq.push_back(w.call(i));
  }
  const std::vector<Call> refused = refusals();
  seq.insert(seq.end(), refused.begin(), refused.end());
  int errors = 0;
  for (std::size_t i = 0; i < seq.size(); ++i) {
    const Outcome k = apply(*kernel->tracee, seq[i]);
    const Outcome s = apply(*emu->tracee, seq[i]);
    errors += k.error != 0 ? 1 : 0;
    if (k != s) {
      std::fprintf(stderr, "ERROR: check: call %zu (%s): kernel %s, emulation %s\n", i,
                   describe(seq[i]).c_str(), describe(k).c_str(), describe(s).c_str());
      return false;
    }
  }
  std::printf("check: %zu calls, kernel and emulation agree on every result (%d refused alike)\n",
              seq.size(), errors);
  return true;
}

// ---- timing ---------------------------------------------------------------------------------

// One side's calls of a workload, in order: run(n) makes the next n calls and reports the first
// failure (which fails the benchmark).
class Calls {
 public:
  Calls(Tracee& t, const Workload& w) : t_(t), w_(w) {}
  std::int64_t run(std::int64_t n) {
    for (std::int64_t k = 0; k < n; ++k, ++cursor_) {
      const Call c = w_.call(cursor_);
      const bool good =
          c.poke ? t_.poke_user(c.offset, c.value).has_value() : t_.peek_user(c.offset).has_value();
      if (!good && ok_) {
        std::fprintf(stderr, "ERROR: %s: call %s failed\n", w_.name.c_str(), describe(c).c_str());
        ok_ = false;
      }
    }
    return n;
  }
  bool ok() const { return ok_; }

 private:
  Tracee& t_;
  const Workload& w_;
  std::int64_t cursor_ = 0;
  bool ok_ = true;
};

// A median rate with its range.
struct Rate {
  double median = 0, lo = 0, hi = 0;
};

struct Row {
  std::string name, calls;
  Rate same, other, emu;  // other: all 0 without a second CPU
};

// Where the tracer runs and where the kernel's children stop.
struct Placement {
  int tracer_cpu = 0;
  std::optional<int> other_cpu;
};

bool measure(const Workload& w, const Options& opt, const Placement& where, Row& row) {
  auto same = make_kernel(where.tracer_cpu);
  auto other = where.other_cpu ? make_kernel(where.other_cpu) : Result<KernelSide>(KernelSide{});
  auto emu = make_sim();
  if (!same || !other || !emu) {
    std::fprintf(stderr, "ERROR: %s: %s\n", w.name.c_str(),
                 (!same    ? same.error()
                  : !other ? other.error()
                           : emu.error())
                     .to_string()
                     .c_str());
    return false;
  }
  std::vector<Tracee*> sides = {&*same->tracee, &*emu->tracee};
  if (other->tracee) sides.push_back(&*other->tracee);
  for (const Call& c : w.setup) {
    for (Tracee* t : sides) {
      if (apply(*t, c).error != 0) {
        std::fprintf(stderr, "ERROR: %s: set-up call %s failed\n", w.name.c_str(),
                     describe(c).c_str());
        return false;
      }
    }
  }
  std::vector<std::unique_ptr<Calls>> calls;
  std::vector<std::unique_ptr<Timed>> timed;
  for (Tracee* t : sides) {
    calls.push_back(std::make_unique<Calls>(*t, w));
    Calls* c = calls.back().get();
    timed.push_back(std::make_unique<Timed>([c](std::int64_t n) { return c->run(n); },
                                            opt.quick ? 0.0005 : 0.005, opt.rep_time));
  }
  for (int r = 0; r < opt.reps; ++r) {
    for (auto& t : timed) t->rep();
  }
  auto rate = [](const Timed& t) { return Rate{t.median_rate(), t.min_rate(), t.max_rate()}; };
  row = Row{w.name, w.calls, rate(*timed[0]), timed.size() > 2 ? rate(*timed[2]) : Rate{},
            rate(*timed[1])};
  bool ok = true;
  for (const auto& c : calls) ok = c->ok() && ok;
  return ok;
}

std::string cell(const Rate& r) {
  if (r.median == 0) return "-";
  return format_rate(r.median) + " [" + format_rate(r.lo) + "-" + format_rate(r.hi) + "]";
}

// ---- main -----------------------------------------------------------------------------------

std::optional<Options> parse(int argc, char** argv) {
  Options opt;
  const bool parsed = hwarb::bench::Args("ptrace_bench")
                          .number("reps", "N", &opt.reps, 1)
                          .number("time", "SECONDS", &opt.rep_time, 0.001)
                          .parse(argc, argv, &opt.quick);
  if (!parsed) return std::nullopt;
  if (opt.quick) {
    opt.reps = 1;
    opt.rep_time = 0.005;
  }
  return opt;
}

int run(const Options& opt) {
  const auto t0 = Clock::now();
  if (auto probe = make_kernel(); !probe) {
    const ErrorCode c = probe.error().code();
    if (c == ErrorCode::kPerm || c == ErrorCode::kAcces) {
      std::printf("SKIP: ptrace refused on this machine: %s\n", probe.error().to_string().c_str());
      return kSkipped;
    }
    std::fprintf(stderr, "ERROR: %s\n", probe.error().to_string().c_str());
    return 1;
  }
  Placement where;
  auto cpus = native::cpu_affinity(0);
  if (!cpus || cpus->empty()) {
    std::fprintf(stderr, "ERROR: %s\n",
                 cpus ? "no CPU to run on" : cpus.error().to_string().c_str());
    return 1;
  }
  where.tracer_cpu = cpus->front();
  if (cpus->size() > 1) where.other_cpu = (*cpus)[1];
  if (auto r = native::pin_to_cpu(0, where.tracer_cpu); !r) {
    std::fprintf(stderr, "ERROR: %s\n", r.error().to_string().c_str());
    return 1;
  }
  bool ok = check(opt.quick ? 50 : 500);
  std::vector<Row> rows;
  for (const Workload& w : workloads()) {
    Row row;
    ok = measure(w, opt, where, row) && ok;
    rows.push_back(row);
  }
  const std::string other =
      where.other_cpu ? "CPU " + std::to_string(*where.other_cpu) : std::string("none");
  std::printf(
      "\n### PTRACE_PEEKUSER/POKEUSER calls per second (median of %d, [min-max]; tracer on CPU "
      "%d, tracee stopped on CPU %d (same) or %s (other))\n\n"
      "| workload | one cycle | kernel, same CPU | kernel, other CPU | emulation | "
      "emulation/kernel same | emulation/kernel other |\n"
      "|---|---|---:|---:|---:|---:|---:|\n",
      opt.reps, where.tracer_cpu, where.tracer_cpu, other.c_str());
  for (const Row& r : rows) {
    std::printf("| %s | %s | %s | %s | %s | %s | %s |\n", r.name.c_str(), r.calls.c_str(),
                cell(r.same).c_str(), cell(r.other).c_str(), cell(r.emu).c_str(),
                ratio(r.emu.median, r.same.median).c_str(),
                r.other.median > 0 ? ratio(r.emu.median, r.other.median).c_str() : "-");
  }
  std::printf("\ntotal time %.1f s\n", seconds_since(t0));
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return hwarb::bench::driver_main(argc, argv, parse, run);
}
