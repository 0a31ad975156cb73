// `hwarb watch` and `hwarb stat`: watch memory (and code) of a real process.
//
// The expressions are resolved against the target's ELF symbols (SymbolTable, with load
// biases), then watched by one of two paths of linux/debug:
//  1. hardware (hard_watch.h), when the probe shows that this machine delivers breakpoint hits:
//     perf_event_open breakpoints on every thread, as many as the probe found a thread gets. Each
//     hit stops the hitting thread (perf's sigtrap, seen through ptrace) for its values and its
//     instruction; the thread runs on at once. x86 has no read-only breakpoints: `:r` uses an rw
//     breakpoint and keeps the hits whose instruction only reads the watched bytes. Counting
//     writes and executions (stat) needs no stop: the target is detached and runs untraced, the
//     hits read from the perf rings.
//  2. software (the fallback, or --software; soft_watch.h): SoftWatch over ptrace — page
//     protection with decoded faults, int3 for execution, single-step for stacks. Exact: every
//     read and write.
// `stat` runs the same and prints only the counts: a table per expression and thread.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "hwarb/base/format.h"
#include "hwarb/cli/condition.h"
#include "hwarb/cli/watch_expr.h"
#include "hwarb/linux/hard_watch.h"
#include "hwarb/linux/probe.h"
#include "hwarb/linux/session.h"
#include "hwarb/linux/soft_watch.h"
#include "hwarb/linux/soft_watch_engine.h"
#include "hwarb/linux/symbols.h"
#include "hwarb/linux/watch_hit.h"
#include "hwarb/x86/debugreg.h"
#include "session.h"

namespace hwarb::cli {
namespace {

struct WatchArgs {
  bool stat = false;
  std::vector<std::string> exprs;
  std::string condition;
  std::uint64_t count = 0;
  bool software = false;
  bool json = false;
  TargetOptions target;
};

struct Watched {
  linux::WatchRange range;  // id: the index of the expression
  std::string label;        // the expression as given
};

unsigned access_bits(WatchAccess a) {
  switch (a) {
    case WatchAccess::kRead:
      return linux::kWatchRead;
    case WatchAccess::kWrite:
      return linux::kWatchWrite;
    case WatchAccess::kReadWrite:
      return linux::kWatchRead | linux::kWatchWrite;
    case WatchAccess::kExec:
      return linux::kWatchExec;
  }
  return 0;
}

std::string access_letters(unsigned bits) {
  std::string out;
  if ((bits & linux::kWatchRead) != 0) out += 'r';
  if ((bits & linux::kWatchWrite) != 0) out += 'w';
  if ((bits & linux::kWatchExec) != 0) out += 'x';
  return out;
}

std::uint64_t le_value(const std::vector<std::uint8_t>& bytes) {
  std::uint64_t v = 0;
  if (bytes.empty()) return v;  // an unknown value
  std::memcpy(&v, bytes.data(), std::min<std::size_t>(bytes.size(), 8));
  return v;
}

// A watched value as text: the little-endian integer for 1/2/4/8 bytes, else the bytes in
// memory order; "?" when unknown (the range could not be read).
std::string value_text(const std::vector<std::uint8_t>& bytes) {
  const std::size_t n = bytes.size();
  if (n == 0) return "?";
  if (n == 1 || n == 2 || n == 4 || n == 8) return hex(le_value(bytes));
  std::string out = "0x";
  char buf[4];
  for (std::uint8_t b : bytes) {
    std::snprintf(buf, sizeof(buf), "%02x", b);
    out += buf;
  }
  return out;
}

std::vector<linux::WatchRange> ranges_of(const std::vector<Watched>& watched) {
  std::vector<linux::WatchRange> out;
  for (const Watched& w : watched) out.push_back(w.range);
  return out;
}

int usage_error(const char* command, const std::string& message) {
  std::cerr << "hwarb " << command << ": " << message << "\n";
  return kExitUsage;
}

int target_error(const char* command, const Error& error) {
  std::cerr << "hwarb " << command << ": " << error.to_string() << "\n";
  return kExitFailure;
}

// Resolves every expression; ENOENT (a usage error, exit 2) for unknown symbols.
Result<std::vector<Watched>> resolve(const std::vector<WatchExpr>& exprs,
                                     linux::Inferior& inferior) {
  auto table = linux::SymbolTable::load(inferior.pid());
  if (!table) return std::unexpected(table.error());
  bool ran_to_entry = false;
  std::vector<Watched> out;
  for (const WatchExpr& e : exprs) {
    Watched w;
    w.label = e.text;
    w.range.id = out.size();
    w.range.access = access_bits(e.access);
    std::optional<std::uint64_t> size;
    if (e.address) {
      w.range.addr = *e.address;
    } else {
      auto sym = linux::find_symbol(inferior, *table, ran_to_entry, e.symbol);
      if (!sym) return std::unexpected(sym.error().with_context("expression '" + e.text + "'"));
      w.range.addr = sym->address + static_cast<std::uint64_t>(e.offset);
      size = sym->size;
    }
    w.range.len = e.access == WatchAccess::kExec ? 1 : default_length(e, size);
    out.push_back(std::move(w));
  }
  return out;
}

// Per-expression and per-thread counts, and the printing of hits.
class Reporter final : public linux::WatchObserver {
 public:
  Reporter(const WatchArgs& args, const std::vector<Watched>& watched, Condition condition,
           pid_t pid)
      : args_(args), watched_(watched), condition_(std::move(condition)), pid_(pid) {
    hits_.assign(watched.size(), 0);
    for (const Comparison& c : condition_.terms) {
      (c.operand == CondOperand::kOld ? needs_old_ : needs_new_) = true;
    }
  }

  // Reports one hit (after the --if condition and the -t filter). A condition on a value that is
  // unknown does not hold.
  void hit(const linux::WatchHit& h) override {
    if (args_.target.tid != 0 && h.tid != args_.target.tid) return;
    if (done()) return;
    const Watched& w = watched_[h.id];
    const unsigned width = static_cast<unsigned>(std::min<std::uint64_t>(w.range.len, 8));
    if (h.access != linux::kWatchExec) {
      if ((needs_old_ && h.old_value.empty()) || (needs_new_ && h.new_value.empty())) return;
      if (!condition_.eval(le_value(h.old_value), le_value(h.new_value), width)) return;
    }
    ++hits_[h.id];
    ++total_;
    Counts& c = per_thread_[{h.id, h.tid}];
    if ((h.access & linux::kWatchRead) != 0) ++c.reads;
    if ((h.access & linux::kWatchWrite) != 0) ++c.writes;
    if ((h.access & linux::kWatchExec) != 0) ++c.execs;
    ++c.total;
    if (args_.stat) return;
    if (args_.json) {
      std::string line = "{\"event\":\"hit\",\"expr\":" + json_string(w.label) +
                         ",\"tid\":" + std::to_string(h.tid) + ",\"ip\":\"" + hex(h.ip) +
                         "\",\"addr\":\"" + hex(h.addr) + "\",\"access\":\"" +
                         access_letters(h.access) + "\"";
      if (h.access != linux::kWatchExec) {
        // An unknown value is left out.
        if (!h.old_value.empty()) line += ",\"old\":\"" + value_text(h.old_value) + "\"";
        if (!h.new_value.empty()) line += ",\"new\":\"" + value_text(h.new_value) + "\"";
      }
      char time[32];
      std::snprintf(time, sizeof(time), "%.6f", static_cast<double>(h.time_ns) / 1e9);
      line += ",\"time\":" + std::string(time);
      line += ",\"symbol\":" + json_string(describe(h.ip));
      if (!h.syscall.empty()) line += ",\"syscall\":" + json_string(h.syscall);
      line += "}";
      std::cout << line << std::endl;
    } else {
      char time[32];
      std::snprintf(time, sizeof(time), "%12.6f", static_cast<double>(h.time_ns) / 1e9);
      std::cout << time << "  tid " << h.tid << "  " << describe(h.ip) << "  " << w.label << " "
                << hex(h.addr) << " " << access_letters(h.access);
      if (h.access != linux::kWatchExec) {
        std::cout << "  " << value_text(h.old_value) << " -> " << value_text(h.new_value);
      }
      if (!h.syscall.empty()) std::cout << "  (kernel, " << h.syscall << ")";
      std::cout << std::endl;
    }
  }

  bool done() const override { return args_.count != 0 && total_ >= args_.count; }
  std::uint64_t total() const { return total_; }

  void summary(const std::string& mode, const std::string& method, const linux::RunResult& end,
               bool spawned) {
    std::cout.flush();
    if (args_.json) {
      std::string line = "{\"event\":\"summary\",\"hits\":{";
      for (std::size_t i = 0; i < watched_.size(); ++i) {
        if (i != 0) line += ",";
        line += json_string(watched_[i].label) + ":" + std::to_string(hits_[i]);
      }
      line += "},\"mode\":\"" + mode + "\",\"method\":" + json_string(method);
      if (lost_ != 0) line += ",\"lost\":" + std::to_string(lost_);
      if (args_.stat) {
        line += ",\"threads\":{";
        bool first = true;
        for (const auto& [key, c] : per_thread_) {
          if (!first) line += ",";
          first = false;
          line += json_string(watched_[key.first].label + "@" + std::to_string(key.second)) +
                  ":{\"reads\":" + std::to_string(c.reads) +
                  ",\"writes\":" + std::to_string(c.writes) +
                  ",\"execs\":" + std::to_string(c.execs) + "}";
        }
        line += "}";
      }
      line += ",\"target\":{\"pid\":" + std::to_string(end.pid);
      if (end.exited && end.signal == 0) line += ",\"exit\":" + std::to_string(end.status);
      if (end.signal != 0) line += ",\"signal\":" + std::to_string(end.signal);
      if (end.interrupted) line += ",\"interrupted\":true";
      line += "}}";
      std::cout << line << "\n";
      return;
    }
    if (args_.stat) {
      std::printf("\n Watch counts for %s (%s: %s):\n\n", target_text_.c_str(), mode.c_str(),
                  method.c_str());
      std::printf(" %-28s %8s %10s %10s %10s %10s\n", "EXPRESSION", "TID", "READS", "WRITES",
                  "EXECS", "TOTAL");
      for (std::size_t i = 0; i < watched_.size(); ++i) {
        Counts sum;
        for (const auto& [key, c] : per_thread_) {
          if (key.first != i) continue;
          std::printf(
              " %-28s %8d %10llu %10llu %10llu %10llu\n", watched_[i].label.c_str(), key.second,
              static_cast<unsigned long long>(c.reads), static_cast<unsigned long long>(c.writes),
              static_cast<unsigned long long>(c.execs), static_cast<unsigned long long>(c.total));
          sum.reads += c.reads;
          sum.writes += c.writes;
          sum.execs += c.execs;
          sum.total += c.total;
        }
        std::printf(
            " %-28s %8s %10llu %10llu %10llu %10llu\n", watched_[i].label.c_str(), "all",
            static_cast<unsigned long long>(sum.reads), static_cast<unsigned long long>(sum.writes),
            static_cast<unsigned long long>(sum.execs), static_cast<unsigned long long>(sum.total));
      }
      std::printf("\n");
      std::fflush(stdout);
    }
    std::cerr << "hwarb " << (args_.stat ? "stat" : "watch") << ": " << total_
              << (total_ == 1 ? " hit" : " hits");
    for (std::size_t i = 0; i < watched_.size(); ++i) {
      std::cerr << (i == 0 ? " (" : ", ") << watched_[i].label << ": " << hits_[i];
    }
    std::cerr << ") in " << mode << " mode [" << method << "]; " << target_text_ << " "
              << describe_end(end, spawned) << "\n";
    if (lost_ != 0) {
      std::cerr << "hwarb " << (args_.stat ? "stat" : "watch") << ": warning: the kernel dropped "
                << lost_ << " samples (ring buffer full): the counts are lower bounds\n";
    }
  }

  void set_target_text(std::string text) { target_text_ = std::move(text); }
  // Samples the kernel dropped (a full ring): the counts are then lower bounds, and say so.
  void set_lost(std::uint64_t lost) { lost_ = lost; }
  void set_symbols(linux::SymbolTable* table) { symbols_ = table; }

 private:
  struct Counts {
    std::uint64_t reads = 0, writes = 0, execs = 0, total = 0;
  };
  std::string describe(std::uint64_t ip) {
    if (symbols_ == nullptr) return hex(ip);
    linux::Location loc = symbols_->locate(ip);
    if (loc.module.empty() && reloads_ < 4) {
      // A library mapped after the table was loaded.
      ++reloads_;
      if (auto fresh = linux::SymbolTable::load(pid_)) {
        *symbols_ = std::move(*fresh);
      }
    }
    return symbols_->describe(ip);
  }

  const WatchArgs& args_;
  const std::vector<Watched>& watched_;
  Condition condition_;
  bool needs_old_ = false;
  bool needs_new_ = false;
  pid_t pid_;
  std::vector<std::uint64_t> hits_;
  std::uint64_t total_ = 0;
  std::map<std::pair<std::size_t, pid_t>, Counts> per_thread_;
  std::string target_text_;
  linux::SymbolTable* symbols_ = nullptr;
  int reloads_ = 0;
  std::uint64_t lost_ = 0;
};

// The hardware path (hard_watch.h): each hit stops its thread for the values, except when only
// writes and executions are counted (stat), where the target runs untraced. Returns nullopt (with
// `why` set) when the expressions cannot be watched this way; the caller then uses software.
std::optional<int> run_hardware(const WatchArgs& args, linux::Inferior& inferior,
                                const std::vector<Watched>& watched, Reporter& reporter, int slots,
                                std::string& why) {
  const char* name = args.stat ? "stat" : "watch";
  const std::vector<linux::WatchRange> ranges = ranges_of(watched);
  auto pieces = linux::plan_pieces(ranges, slots);
  if (!pieces) {
    why = pieces.error().message();
    return std::nullopt;
  }
  const bool spawned = inferior.spawned();
  const bool stops = linux::hits_need_stops(ranges, !args.stat);
  auto perf = linux::PerfWatch::open(inferior.pid(), *pieces, {.sigtrap = stops});
  if (!perf) {
    why = perf.error().to_string();
    return std::nullopt;
  }
  const std::string method = std::to_string(pieces->size()) + " debug registers";
  std::cerr << "hwarb " << name << ": hardware mode, " << perf->events()
            << " perf breakpoint events (" << method << ")"
            << (stops ? ", each hit stopping the thread for its values" : "") << "\n";
  Progress progress;
  const auto line = [&reporter] { return "hwarb: " + std::to_string(reporter.total()) + " hits"; };
  if (stops) {
    linux::HardWatchEngine engine(inferior, std::move(*perf), ranges, reporter);
    WithProgress shown(engine, progress, line);
    auto end = linux::run_target(inferior, shown);
    progress.clear();
    if (!end) return target_error(name, end.error());
    reporter.summary("hardware", method, *end, spawned);
    return kExitOk;
  }
  auto counted = linux::count_untraced(inferior, std::move(*perf), ranges, reporter,
                                       [&] { progress.update(line()); });
  progress.clear();
  if (!counted) return target_error(name, counted.error());
  reporter.set_lost(counted->lost);
  reporter.summary("hardware", method, counted->end, spawned);
  return kExitOk;
}

int run_watch(WatchArgs& args) {
  const char* name = args.stat ? "stat" : "watch";
  if (args.exprs.empty()) return usage_error(name, "expression: give at least one EXPR");
  std::vector<WatchExpr> exprs;
  for (const std::string& text : args.exprs) {
    auto e = parse_watch_expr(text);
    if (!e) return usage_error(name, e.error().to_string());
    exprs.push_back(std::move(*e));
  }
  Condition condition;
  if (!args.condition.empty()) {
    auto c = parse_condition(args.condition);
    if (!c) return usage_error(name, c.error().to_string());
    condition = std::move(*c);
  }
  if (auto t = check_target(args.target); !t) return usage_error(name, t.error().to_string());

  // Hardware or software: what the machine really does decides, unless --software. The debug
  // registers a thread gets are the probe's count (x86's when the probe counted none).
  bool hardware = false;
  int slots = x86::kSlots;
  std::string why = "--software";
  if (!args.software) {
    auto report = linux::probe();
    if (report && report->hits_delivered) {
      hardware = true;
      if (report->breakpoint_slots > 0) slots = report->breakpoint_slots;
    } else if (report) {
      why = report->breakpoint_pmu
                ? "breakpoints open on this machine but their hits are never delivered (" +
                      std::to_string(report->canary_hits) + " of " +
                      std::to_string(report->canary_writes) + " canary writes)"
                : "this machine has no breakpoint PMU";
    } else {
      why = "the probe failed: " + report.error().to_string();
    }
  }

  auto inferior = linux::open_target(args.target);
  if (!inferior) return target_error(name, inferior.error());
  auto watched = resolve(exprs, *inferior);
  if (!watched) {
    const bool usage = watched.error().code() == ErrorCode::kNoEnt;
    std::cerr << "hwarb " << name << ": " << watched.error().to_string() << "\n";
    return usage ? kExitUsage : kExitFailure;
  }
  auto table = linux::SymbolTable::load(inferior->pid());
  Reporter reporter(args, *watched, condition, inferior->pid());
  reporter.set_target_text(target_name(args.target));
  if (table) reporter.set_symbols(&*table);

  if (hardware) {
    if (auto code = run_hardware(args, *inferior, *watched, reporter, slots, why)) return *code;
    std::cerr << "hwarb " << name << ": hardware mode not possible (" << why << ")\n";
  }
  // The software path (also where the hardware path cannot take the expressions).
  auto watch = linux::SoftWatch::arm(*inferior, ranges_of(*watched));
  if (!watch) return target_error(name, watch.error());
  std::cerr << "hwarb " << name << ": software mode, " << watch->describe() << " (" << why << ")\n";
  Progress progress;
  linux::SoftWatchEngine engine(*watch, reporter);
  WithProgress shown(engine, progress, [&] {
    return "hwarb: " + std::to_string(reporter.total()) + " hits, " +
           std::to_string(watch->stats().faults) + " faults";
  });
  const bool spawned = inferior->spawned();
  const std::string method = watch->describe();
  auto end = linux::run_target(*inferior, shown);
  progress.clear();
  if (!end) return target_error(name, end.error());
  reporter.summary("software", method, *end, spawned);
  return kExitOk;
}

CommandRunner setup(CLI::App& app, bool stat) {
  auto args = std::make_shared<WatchArgs>();
  args->stat = stat;
  CLI::App* sub = app.add_subcommand(
      stat ? "stat" : "watch",
      stat ? "count the accesses to memory (or executions of code) of a real process, per "
             "expression and thread"
           : "report every access to memory (or execution of code) of a real process");
  sub->add_option("expr", args->exprs,
                  "mem:ADDR[/LEN][:ACCESS] or SYMBOL[+OFF][/LEN][:ACCESS]; ACCESS from r, w, x "
                  "(default rw; length 4, a symbol's size, or 8 for x)")
      ->required();
  if (!stat) {
    sub->add_option("--if", args->condition,
                    "report only hits where e.g. 'new==5', 'old!=0 && new>10'");
    sub->add_option("--count", args->count, "stop watching after N hits (the target runs on)");
  }
  sub->add_flag("--software", args->software,
                "use the software path (page protection, int3) even where hardware hits work");
  sub->add_flag("--json", args->json, "one JSON object per line");
  add_target_options(*sub, args->target);
  sub->footer(
      "Target: -p PID | -t TID | -- COMMAND [ARGS]. Exit status: 0 done (the target's own "
      "status is reported), 1 the target could not be traced, 2 usage error.");
  return [args]() { return run_watch(*args); };
}

}  // namespace

CommandRunner setup_watch(CLI::App& app) {
  return setup(app, false);
}

CommandRunner setup_stat(CLI::App& app) {
  return setup(app, true);
}

}  // namespace hwarb::cli
