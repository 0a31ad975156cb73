// `hwarb stat -a` / `-C LIST` (system_wide.h): perf's counting breakpoint events on CPUs.
//
// The steps, in order (a failure at any step leaves nothing open and nothing started):
//  1. the options: --software, -p, -t and `:r` are usage errors; the CPU list is parsed;
//  2. the machine: the probe must show that breakpoint hits are delivered (else exit 1, saying
//     why: there is no software path for CPUs);
//  3. the command, if any, is started stopped at its first instruction (symbols need its maps);
//  4. each expression is resolved: an address as given; a symbol in the command's ELF symbols,
//     else in /proc/kallsyms;
//  5. the pieces are planned (aligned 1/2/4/8-byte registers) and opened on every CPU, disabled,
//     then enabled together;
//  6. the command runs to its end (it is traced only for its exit status), or, without one,
//     hwarb waits for SIGINT/SIGTERM/SIGHUP;
//  7. the events are disabled together and read: one row per expression and CPU, and a total.
#include "system_wide.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <thread>

#include "commands.h"
#include "hwarb/base/format.h"
#include "hwarb/breakpoints/kallsyms.h"
#include "hwarb/breakpoints/validate.h"
#include "hwarb/linux/hard_watch.h"
#include "hwarb/linux/perf_watch.h"
#include "hwarb/linux/symbols.h"

namespace hwarb::cli {
namespace {

// "stat" or "watch": the subcommand running (one per process).
const char* g_name = "stat";

int usage(const std::string& message) {
  std::cerr << "hwarb " << g_name << ": " << message << "\n";
  return kExitUsage;
}

int failure(const std::string& message) {
  std::cerr << "hwarb " << g_name << ": " << message << "\n";
  return kExitFailure;
}

// The command's process while it runs: nothing to do but let it run (traced for its status).
class LetRun final : public native::Engine {
 public:
  Result<bool> handle(const native::Event&) override { return false; }
  native::Resume resume_mode() const override { return native::Resume::kCont; }
  Result<void> finish() override { return {}; }
};

struct Resolved {
  native::WatchRange range;
  std::string where;  // "kernel", "command" or "address"
};

// Step 4.
Result<std::vector<Resolved>> resolve(const std::vector<WatchExpr>& exprs,
                                      native::Inferior* inferior,
                                      std::optional<breakpoints::KernelSymbols>& kernel) {
  std::optional<native::SymbolTable> table;
  bool ran_to_entry = false;
  std::vector<Resolved> out;
  for (const WatchExpr& e : exprs) {
    Resolved r;
    r.range.id = out.size();
    r.range.access = access_bits(e.access);
    std::optional<std::uint64_t> size;
    if (e.address) {
      r.range.addr = *e.address;
      r.where = "address";
    } else {
      std::optional<Error> user_error;
      if (inferior != nullptr) {
        if (!table) {
          auto loaded = native::SymbolTable::load(inferior->pid());
          if (!loaded) return std::unexpected(loaded.error());
          table.emplace(std::move(*loaded));
        }
        auto sym = native::find_object(*inferior, *table, ran_to_entry, e.symbol);
        if (sym) {
          r.range.addr = sym->address + static_cast<std::uint64_t>(e.offset);
          size = sym->size;
          r.where = "command";
        } else if (sym.error().code() != ErrorCode::kNoEnt) {
          return std::unexpected(sym.error().with_context("expression '" + e.text + "'"));
        } else {
          user_error = sym.error();
        }
      }
      if (r.where.empty()) {
        if (!kernel) {
          kernel.emplace(breakpoints::task_size_max(breakpoints::Arch::kX86_64));
          if (auto loaded = kernel->load_kallsyms_file("/proc/kallsyms"); !loaded) {
            return std::unexpected(loaded.error().with_context("kernel symbols"));
          }
        }
        auto sym = kernel->lookup(e.symbol);
        if (!sym) {
          std::string why = sym.error().message();
          if (user_error) why = user_error->message() + "; no kernel symbol either: " + why;
          return make_error(sym.error().code(), "expression '" + e.text + "': " + why);
        }
        r.range.addr = sym->addr + static_cast<std::uint64_t>(e.offset);
        if (sym->size != 0) size = sym->size;
        r.where = "kernel";
      }
    }
    r.range.len = e.access == WatchAccess::kExec ? 1 : default_length(e, size);
    out.push_back(std::move(r));
  }
  return out;
}

std::string cpus_text(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

// Step 6: the command runs to its end under `engine` (traced only for its exit status: `end`),
// or, without one, `step` runs until SIGINT/SIGTERM/SIGHUP. Returns how it ended, in words.
Result<std::string> run_or_wait(const SystemWideArgs& args, native::Inferior* inferior,
                                native::Engine& engine, const std::function<Result<void>()>& step,
                                std::optional<native::RunResult>& end) {
  if (inferior != nullptr) {
    auto ran = native::run_target(*inferior, engine);
    if (!ran) return std::unexpected(ran.error());
    end = *ran;
    return target_name(args.target) + " " + describe_end(*ran, true);
  }
  native::arm_interrupt();
  while (!native::interrupted()) {
    if (auto ok = step(); !ok && ok.error().code() != ErrorCode::kIntr) {
      return std::unexpected(ok.error());
    }
  }
  return std::string(args.stat ? "counted" : "watched") + " until interrupted";
}

// "pieces[i]: ..." of an open's error, with the expression the piece is of named.
std::string named_error(const Error& error, const std::vector<native::HwPiece>& pieces,
                        const std::vector<WatchExpr>& exprs) {
  std::string text = error.to_string();
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const std::string name = "pieces[" + std::to_string(i) + "]";
    if (const std::size_t at = text.find(name); at != std::string::npos) {
      text.replace(at, name.size(), "expression '" + exprs[pieces[i].expr].text + "'");
      break;
    }
  }
  return text;
}

// The command's process while hits are read from the rings: it runs untouched (traced only for
// its exit status); each wake-up drains the rings into `print`.
class DrainWhileRunning final : public native::Engine {
 public:
  DrainWhileRunning(native::PerfWatch& watch,
                    std::function<void(const std::vector<native::PerfHit>&)> print)
      : watch_(watch), print_(std::move(print)) {}
  Result<bool> handle(const native::Event&) override { return false; }
  native::Resume resume_mode() const override { return native::Resume::kCont; }
  Result<void> finish() override { return {}; }
  void tick() override {
    if (auto hits = watch_.poll(0)) print_(*hits);
  }
  std::vector<int> wake_fds() const override { return watch_.ring_fds(); }
  bool wants_wakeups() const override { return true; }

 private:
  native::PerfWatch& watch_;
  std::function<void(const std::vector<native::PerfHit>&)> print_;
};

// `hwarb watch -a` / `-C`: every hit on the CPUs, as perf record -a samples them (no values:
// nothing is stopped).
int run_cpu_watch(const SystemWideArgs& args, const std::vector<int>& cpus,
                  const std::vector<native::HwPiece>& pieces,
                  const std::vector<native::WatchRange>& ranges, native::Inferior* inferior,
                  std::optional<breakpoints::KernelSymbols>& kernel, const Report& report) {
  auto watch = native::PerfWatch::open_cpus(cpus, pieces, {.exclude_kernel = args.user_only});
  if (!watch) return failure(named_error(watch.error(), pieces, args.exprs));
  const std::string method = std::to_string(pieces.size()) + " debug registers on CPUs " +
                             cpus_text(watch->cpus()) +
                             (args.user_only ? ", user only" : ", user and kernel");
  std::cerr << "hwarb watch: hardware mode, " << watch->events() << " perf sampling events ("
            << method << "), " << (inferior ? "while the command runs" : "until interrupted")
            << "; nothing is stopped, so hits carry no values\n";
  std::optional<native::SymbolTable> user;
  if (inferior != nullptr) {
    if (auto table = native::SymbolTable::load(inferior->pid())) user.emplace(std::move(*table));
  }
  const std::uint64_t kernel_start = breakpoints::task_size_max(breakpoints::Arch::kX86_64);
  const auto symbol = [&](const native::PerfHit& h) -> std::string {
    if (h.ip >= kernel_start) {
      if (!kernel) {
        kernel.emplace(kernel_start);
        if (!kernel->load_kallsyms_file("/proc/kallsyms")) kernel.emplace(kernel_start);
      }
      return kernel->symbolize(h.ip).value_or(hex(h.ip));
    }
    if (user && inferior != nullptr && h.pid == inferior->pid()) return user->describe(h.ip);
    return hex(h.ip);
  };
  const auto start_ns =
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  std::vector<std::uint64_t> hits(args.exprs.size(), 0);
  std::uint64_t total = 0;
  const auto print = [&](const std::vector<native::PerfHit>& batch) {
    for (const native::PerfHit& h : batch) {
      const std::size_t e = pieces[h.piece].expr;
      ++hits[e];
      ++total;
      const unsigned a = ranges[e].access;
      const std::string access = a == native::kWatchExec    ? "x"
                                 : a == native::kWatchWrite ? "w"
                                                            : "rw";
      const double t = static_cast<double>(h.time_ns >= start_ns ? h.time_ns - start_ns : 0) / 1e9;
      char time[32];
      if (args.json) {
        std::snprintf(time, sizeof time, "%.6f", t);
        report.line("{\"event\":\"hit\",\"expr\":" + json_string(args.exprs[e].text) +
                    ",\"cpu\":" + std::to_string(h.cpu) + ",\"pid\":" + std::to_string(h.pid) +
                    ",\"tid\":" + std::to_string(h.tid) + ",\"ip\":\"" + hex(h.ip) +
                    "\",\"addr\":\"" + hex(h.addr) + "\",\"access\":\"" + access +
                    "\",\"kernel\":" + (h.ip >= kernel_start ? "true" : "false") +
                    ",\"time\":" + time + ",\"symbol\":" + json_string(symbol(h)) + "}");
      } else {
        std::snprintf(time, sizeof time, "%12.6f", t);
        report.line(std::string(time) + "  cpu " + std::to_string(h.cpu) + "  pid " +
                    std::to_string(h.pid) + " tid " + std::to_string(h.tid) + "  " + symbol(h) +
                    (h.ip >= kernel_start ? " [kernel]" : "") + "  " + args.exprs[e].text + " " +
                    hex(h.addr) + " " + access);
      }
    }
  };
  std::optional<native::RunResult> end;
  DrainWhileRunning engine(*watch, print);
  auto ended = run_or_wait(
      args, inferior, engine,
      [&]() -> Result<void> {
        auto batch = watch->poll(100);
        if (!batch) return std::unexpected(batch.error());
        print(*batch);
        return {};
      },
      end);
  if (!ended) return failure(ended.error().to_string());
  if (auto rest = watch->poll(0)) print(*rest);
  if (args.json) {
    std::string line = "{\"event\":\"summary\",\"hits\":{";
    for (std::size_t e = 0; e < hits.size(); ++e) {
      line += (e ? "," : "") + json_string(args.exprs[e].text) + ":" + std::to_string(hits[e]);
    }
    line += "},\"mode\":\"hardware\",\"method\":" + json_string(method);
    if (watch->lost() != 0) line += ",\"lost\":" + std::to_string(watch->lost());
    if (end) {
      line += ",\"target\":{\"pid\":" + std::to_string(end->pid);
      if (end->exited && end->signal == 0) line += ",\"exit\":" + std::to_string(end->status);
      if (end->signal != 0) line += ",\"signal\":" + std::to_string(end->signal);
      line += "}";
    }
    report.line(line + "}");
  } else {
    std::string line = "hwarb watch: " + std::to_string(total) + (total == 1 ? " hit" : " hits");
    for (std::size_t e = 0; e < hits.size(); ++e) {
      line += (e == 0 ? " (" : ", ") + args.exprs[e].text + ": " + std::to_string(hits[e]);
    }
    line += ") in hardware mode [" + method + "]; " + *ended + "\n";
    report.summary(line);
  }
  if (watch->lost() != 0) {
    std::cerr << "hwarb watch: warning: the kernel dropped " << watch->lost()
              << " samples (ring buffer full): the hits listed are a lower bound\n";
  }
  return kExitOk;
}

// Steps 2 to 7, once the report is open: the exit status of the run, to which finish_report
// adds the report's own failure.
int run_on_cpus(const SystemWideArgs& args, const std::vector<int>& cpus, const Report& report) {
  // Step 2.
  const native::WatchSessionOptions options = watch_options(false);
  if (!options.hardware) {
    return failure("-a/-C: this machine cannot count on CPUs: " + options.no_hardware +
                   " (system-wide counting has no software path)");
  }

  // Step 3.
  std::optional<native::Inferior> inferior;
  if (!args.target.command.empty()) {
    auto started = native::open_target(args.target);
    if (!started) return failure(started.error().to_string());
    inferior.emplace(std::move(*started));
  }

  // Step 4.
  std::optional<breakpoints::KernelSymbols> kernel;
  auto resolved = resolve(args.exprs, inferior ? &*inferior : nullptr, kernel);
  if (!resolved) {
    const ErrorCode code = resolved.error().code();
    std::cerr << "hwarb " << g_name << ": " << resolved.error().to_string() << "\n";
    return code == ErrorCode::kNoEnt || code == ErrorCode::kInval ? kExitUsage : kExitFailure;
  }
  std::vector<native::WatchRange> ranges;
  for (const Resolved& r : *resolved) ranges.push_back(r.range);

  // Step 5.
  auto pieces = native::plan_pieces(ranges, options.slots);
  if (!pieces) return failure(pieces.error().to_string());
  if (!args.stat) {
    return run_cpu_watch(args, cpus, *pieces, ranges, inferior ? &*inferior : nullptr, kernel,
                         report);
  }
  auto count = native::PerfCpuCount::open(cpus, *pieces, {.exclude_kernel = args.user_only});
  if (!count) {
    std::string text = named_error(count.error(), *pieces, args.exprs);
    return failure(text);
  }
  const std::string method = std::to_string(pieces->size()) + " debug registers on CPUs " +
                             cpus_text(count->cpus()) +
                             (args.user_only ? ", user only" : ", user and kernel");
  std::cerr << "hwarb stat: hardware mode, " << count->events() << " perf counting events ("
            << method << "), " << (inferior ? "while the command runs" : "until interrupted")
            << "\n";
  if (auto on = count->enable(); !on) return failure(on.error().to_string());
  const auto start = std::chrono::steady_clock::now();

  // Step 6.
  std::optional<native::RunResult> end;
  LetRun engine;
  auto ended = run_or_wait(
      args, inferior ? &*inferior : nullptr, engine,
      []() -> Result<void> {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        return {};
      },
      end);
  if (!ended) return failure(ended.error().to_string());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Step 7.
  ignore_error(count->disable(), "the counts are read next either way");
  auto counts = count->counts();
  if (!counts) return failure(counts.error().to_string());
  // [expression][cpu index]
  std::vector<std::vector<std::uint64_t>> per(args.exprs.size(),
                                              std::vector<std::uint64_t>(count->cpus().size()));
  for (const native::PerfCpuCount::Count& c : *counts) {
    const std::size_t e = (*pieces)[c.piece].expr;
    const std::size_t at = static_cast<std::size_t>(
        std::find(count->cpus().begin(), count->cpus().end(), c.cpu) - count->cpus().begin());
    per[e][at] += c.count;
  }
  std::uint64_t total = 0;
  std::vector<std::uint64_t> sums(args.exprs.size(), 0);
  for (std::size_t e = 0; e < per.size(); ++e) {
    for (std::uint64_t n : per[e]) sums[e] += n;
    total += sums[e];
  }
  if (args.json) {
    std::string line = "{\"event\":\"summary\",\"mode\":\"hardware\",\"cpus\":[";
    for (std::size_t i = 0; i < count->cpus().size(); ++i) {
      line += (i ? "," : "") + std::to_string(count->cpus()[i]);
    }
    line += std::string("],\"kernel\":") + (args.user_only ? "false" : "true") + ",\"counts\":{";
    for (std::size_t e = 0; e < per.size(); ++e) {
      line += (e ? "," : "") + json_string(args.exprs[e].text) + ":{\"address\":\"" +
              hex(ranges[e].addr) + "\",\"len\":" + std::to_string(ranges[e].len) +
              ",\"total\":" + std::to_string(sums[e]) + ",\"cpus\":{";
      for (std::size_t i = 0; i < per[e].size(); ++i) {
        line += (i ? "," : "") + std::string("\"") + std::to_string(count->cpus()[i]) +
                "\":" + std::to_string(per[e][i]);
      }
      line += "}}";
    }
    line += "},\"seconds\":" + std::to_string(seconds);
    if (end) {
      line += ",\"target\":{\"pid\":" + std::to_string(end->pid);
      if (end->exited && end->signal == 0) line += ",\"exit\":" + std::to_string(end->status);
      if (end->signal != 0) line += ",\"signal\":" + std::to_string(end->signal);
      line += "}";
    }
    line += "}";
    report.line(line);
    return kExitOk;
  }
  report.print("\n Watch counts on CPUs %s (hardware: %s), %.3f s:\n\n",
               cpus_text(count->cpus()).c_str(), method.c_str(), seconds);
  report.print(" %-28s %-20s %8s %10s %10s %10s %10s\n", "EXPRESSION", "ADDRESS", "CPU", "READS",
               "WRITES", "EXECS", "TOTAL");
  for (std::size_t e = 0; e < per.size(); ++e) {
    const unsigned a = ranges[e].access;
    const bool rw = a == (native::kWatchRead | native::kWatchWrite);
    const std::string address =
        (*resolved)[e].where == "kernel" && kernel
            ? kernel->symbolize(ranges[e].addr).value_or(hex(ranges[e].addr))
            : hex(ranges[e].addr);
    // An rw register does not tell reads from writes: those columns are "-".
    const auto row = [&](const std::string& cpu, std::uint64_t n) {
      const std::string v = std::to_string(n);
      const std::string reads = rw ? "-" : "0";
      const std::string writes = rw ? "-" : a == native::kWatchWrite ? v : "0";
      const std::string execs = a == native::kWatchExec ? v : "0";
      report.print(" %-28s %-20s %8s %10s %10s %10s %10s\n", args.exprs[e].text.c_str(),
                   address.c_str(), cpu.c_str(), reads.c_str(), writes.c_str(), execs.c_str(),
                   v.c_str());
    };
    for (std::size_t i = 0; i < per[e].size(); ++i) {
      row(std::to_string(count->cpus()[i]), per[e][i]);
    }
    row("all", sums[e]);
  }
  report.write("\n");
  report.flush();
  std::string line = "hwarb stat: " + std::to_string(total) + (total == 1 ? " hit" : " hits");
  for (std::size_t e = 0; e < per.size(); ++e) {
    line += (e == 0 ? " (" : ", ") + args.exprs[e].text + ": " + std::to_string(sums[e]);
  }
  line += ") in hardware mode [" + method + "]; " + *ended + "\n";
  report.summary(line);
  return kExitOk;
}

}  // namespace

int run_system_wide(SystemWideArgs& args) {
  g_name = args.stat ? "stat" : "watch";
  // Step 1.
  ignore_error(check_target(args.target), "fills the command; none given is fine here");
  if (args.target.pid != 0 || args.target.tid != 0) {
    return usage(
        "target: -a/-C count everything that runs on the CPUs: give a command (counted while it "
        "runs) or none (counted until Ctrl-C), not -p or -t");
  }
  if (args.software) {
    return usage(
        "mode: -a/-C count with the CPUs' debug registers; --software watches one traced "
        "process and cannot count CPUs");
  }
  for (const WatchExpr& e : args.exprs) {
    if (e.access == WatchAccess::kRead) {
      return usage("expression '" + e.text +
                   "': :r cannot be counted on CPUs (x86 has no read-only breakpoint, and no "
                   "thread is stopped to tell reads from writes); use :rw");
    }
  }
  auto selected = native::select_cpus(args.cpu_list);
  if (!selected) {
    if (selected.error().code() == ErrorCode::kNoEnt) return failure(selected.error().to_string());
    return usage("-C: " + selected.error().message());
  }
  const std::vector<int> cpus = std::move(*selected);
  auto report = Report::open(args.output);
  if (!report) return usage(report.error().to_string());
  return finish_report(g_name, *report, run_on_cpus(args, cpus, *report));
}

}  // namespace hwarb::cli
