// `hwarb watch` and `hwarb stat`: watch memory (and code) of a real process.
//
// The expressions are resolved against the target's ELF symbols (SymbolTable, with load
// biases), then watched by one of two paths:
//  1. hardware: perf_event_open breakpoints on every thread (PerfWatch), when the probe shows
//     that this machine delivers breakpoint hits. x86 has no read-only breakpoints: `:r` uses an
//     rw breakpoint and keeps the hits whose instruction (decoded backwards from the sample's ip,
//     which is the instruction after the access) only reads the watched bytes.
//  2. software (the fallback, or --software): SoftWatch over ptrace — page protection with
//     decoded faults, int3 for execution, single-step for stacks. Exact: every read and write.
// `stat` runs the same and prints only the counts: a table per expression and thread.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "hwarb/base/format.h"
#include "hwarb/breakpoints/watchpoint.h"
#include "hwarb/cli/condition.h"
#include "hwarb/cli/watch_expr.h"
#include "hwarb/linux/perf_watch.h"
#include "hwarb/linux/probe.h"
#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/soft_watch.h"
#include "hwarb/linux/symbols.h"
#include "hwarb/linux/syscalls.h"
#include "hwarb/linux/terminal.h"
#include "hwarb/x86/insn.h"
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
  WatchExpr expr;
  std::uint64_t addr = 0;
  std::uint64_t len = 0;
  unsigned access = 0;  // linux::kWatch* bits
  std::string label;    // the expression as given
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
  if (bytes.empty()) return v;  // a count-only hit carries no value
  std::memcpy(&v, bytes.data(), std::min<std::size_t>(bytes.size(), 8));
  return v;
}

// A watched value as text: the little-endian integer for 1/2/4/8 bytes, else the bytes in
// memory order.
std::string value_text(const std::vector<std::uint8_t>& bytes) {
  const std::size_t n = bytes.size();
  if (n == 1 || n == 2 || n == 4 || n == 8) return hex(le_value(bytes));
  std::string out = "0x";
  char buf[4];
  for (std::uint8_t b : bytes) {
    std::snprintf(buf, sizeof(buf), "%02x", b);
    out += buf;
  }
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

// Resolves every expression; a usage error (exit 2) for unknown symbols.
Result<std::vector<Watched>> resolve(const std::vector<WatchExpr>& exprs,
                                     linux::Inferior& inferior) {
  auto table = linux::SymbolTable::load(inferior.pid());
  if (!table) return std::unexpected(table.error());
  bool reloaded = false;
  std::vector<Watched> out;
  for (const WatchExpr& e : exprs) {
    Watched w;
    w.expr = e;
    w.label = e.text;
    w.access = access_bits(e.access);
    std::optional<std::uint64_t> size;
    if (e.address) {
      w.addr = *e.address;
    } else {
      auto sym = table->find(e.symbol);
      if (!sym && !reloaded && inferior.spawned() && table->entry()) {
        // Shared libraries are mapped by the dynamic loader: run to the entry point and retry.
        if (auto r = run_to(inferior, *table->entry()); !r) return std::unexpected(r.error());
        auto again = linux::SymbolTable::load(inferior.pid());
        if (!again) return std::unexpected(again.error());
        *table = std::move(*again);
        reloaded = true;
        sym = table->find(e.symbol);
      }
      if (!sym) return std::unexpected(sym.error().with_context("expression '" + e.text + "'"));
      w.addr = sym->address + static_cast<std::uint64_t>(e.offset);
      size = sym->size;
    }
    w.len = e.access == WatchAccess::kExec ? 1 : default_length(e, size);
    out.push_back(std::move(w));
  }
  return out;
}

// Per-expression and per-thread counts, and the printing of hits.
class Reporter {
 public:
  Reporter(const WatchArgs& args, const std::vector<Watched>& watched, Condition condition,
           pid_t pid)
      : args_(args), watched_(watched), condition_(std::move(condition)), pid_(pid) {
    hits_.assign(watched.size(), 0);
  }

  // Reports one hit (after the --if condition and the -t filter).
  void hit(const linux::SoftHit& h) {
    if (args_.target.tid != 0 && h.tid != args_.target.tid) return;
    if (done()) return;
    const Watched& w = watched_[h.id];
    const unsigned width = static_cast<unsigned>(std::min<std::uint64_t>(w.len, 8));
    if (h.access != linux::kWatchExec &&
        !condition_.eval(le_value(h.old_value), le_value(h.new_value), width)) {
      return;
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
        line += ",\"old\":\"" + value_text(h.old_value) + "\",\"new\":\"" +
                value_text(h.new_value) + "\"";
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

  bool done() const { return args_.count != 0 && total_ >= args_.count; }
  std::uint64_t total() const { return total_; }

  void summary(const std::string& mode, const std::string& method, const RunResult& end,
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
  pid_t pid_;
  std::vector<std::uint64_t> hits_;
  std::uint64_t total_ = 0;
  std::map<std::pair<std::size_t, pid_t>, Counts> per_thread_;
  std::string target_text_;
  linux::SymbolTable* symbols_ = nullptr;
  int reloads_ = 0;
  std::uint64_t lost_ = 0;
};

// The software path as an Engine of run_target.
class SoftEngine final : public Engine {
 public:
  SoftEngine(linux::SoftWatch& watch, Reporter& reporter, Progress& progress)
      : watch_(watch), reporter_(reporter), progress_(progress) {}
  Result<bool> handle(const linux::Event& event) override {
    hits_.clear();
    auto r = watch_.handle(event, hits_);
    for (const linux::SoftHit& h : hits_) reporter_.hit(h);
    return r;
  }
  linux::Resume resume_mode() const override { return watch_.resume_mode(); }
  Result<void> finish() override {
    progress_.clear();
    return watch_.disarm();
  }
  void tick() override {
    progress_.update("hwarb: " + std::to_string(reporter_.total()) + " hits, " +
                     std::to_string(watch_.stats().faults) + " faults");
  }
  bool done() const override { return reporter_.done(); }

 private:
  linux::SoftWatch& watch_;
  Reporter& reporter_;
  Progress& progress_;
  std::vector<linux::SoftHit> hits_;
};

// The instruction that ends at `end` (a data breakpoint traps after the access, so a sample's ip
// is the next instruction) and how it accessed [addr, addr+len). Decoding backwards is ambiguous,
// so the candidates are every start among the 15 bytes before `end` whose decoding ends exactly
// at `end` with a memory operand, narrowed in order:
//  1. candidates whose operand address does not depend on registers (rip-relative or absolute:
//     the same for two different register sets) and hits the watched range — the usual case for
//     a global; if there is exactly one, it is the accessor;
//  2. otherwise the register-dependent candidates, when they all agree on read vs write.
// nullopt when nothing is certain (the caller then decides by whether the value changed).
struct Accessor {
  std::uint64_t ip = 0;
  unsigned access = 0;
};
std::optional<Accessor> accessor_before(pid_t pid, std::uint64_t end, std::uint64_t addr,
                                        std::uint64_t len,
                                        const std::optional<x86::Regs>& regs = std::nullopt) {
  std::uint8_t window[15] = {};
  if (end < sizeof(window) || !linux::read_process_memory(pid, end - sizeof(window), window)) {
    return std::nullopt;
  }
  // With the thread's registers (a synchronous hit), "fixed" means: computed with them.
  x86::Regs zero = regs.value_or(x86::Regs{});
  x86::Regs other = regs.value_or(x86::Regs{});
  if (!regs) {
    other.rax = other.rbx = other.rcx = other.rdx = other.rsi = other.rdi = other.rbp = other.rsp =
        other.r8 = other.r9 = other.r10 = other.r11 = other.r12 = other.r13 = other.r14 =
            other.r15 = 0x10000;
  }
  std::vector<Accessor> exact, loose;
  for (std::size_t k = 1; k <= sizeof(window); ++k) {
    const std::uint64_t ip = end - k;
    auto insn = x86::decode(std::span<const std::uint8_t>(window + sizeof(window) - k, k), ip);
    if (!insn || insn->length != k) continue;
    zero.rip = other.rip = ip;
    auto a = x86::effective_addresses(*insn, zero);
    auto b = x86::effective_addresses(*insn, other);
    if (!a || !b || a->size() != b->size()) continue;
    unsigned access = 0;
    bool fixed_hit = false, dependent = false;
    for (std::size_t i = 0; i < a->size(); ++i) {
      if (insn->mem.size() > i && insn->mem[i].stack) continue;
      const x86::MemRef& ref = (*a)[i];
      if (ref.address == (*b)[i].address) {
        if (!(ref.address < addr + len && addr < ref.address + ref.size)) continue;
        fixed_hit = true;
      } else {
        dependent = true;
      }
      if (ref.access == x86::Access::kRead) access |= linux::kWatchRead;
      if (ref.access == x86::Access::kWrite) access |= linux::kWatchWrite;
      if (ref.access == x86::Access::kReadWrite) access |= linux::kWatchRead | linux::kWatchWrite;
    }
    if (access == 0) continue;
    if (fixed_hit) {
      exact.push_back(Accessor{ip, access});
    } else if (dependent) {
      loose.push_back(Accessor{ip, access});
    }
  }
  if (exact.size() == 1) return exact[0];
  if (!exact.empty()) return std::nullopt;
  if (loose.empty()) return std::nullopt;
  for (const Accessor& c : loose) {
    if (c.access != loose[0].access) return std::nullopt;
  }
  return loose.back();
}

// The hardware path with exact values: every hit also stops the thread (perf sigtrap, seen by
// ptrace as SIGTRAP with si_code TRAP_PERF right after the access), so the new value is read
// before the program moves on, and the accessing instruction is found with its registers.
class HardEngine final : public Engine {
 public:
  HardEngine(linux::Inferior& inferior, std::optional<linux::PerfWatch>& perf,
             const std::vector<linux::HwPiece>& pieces, const std::vector<Watched>& watched,
             Reporter& reporter, Progress& progress)
      : inferior_(inferior),
        perf_(perf),
        pieces_(pieces),
        watched_(watched),
        reporter_(reporter),
        progress_(progress),
        start_(std::chrono::steady_clock::now()) {
    for (const Watched& w : watched) {
      std::vector<std::uint8_t> bytes(w.access == linux::kWatchExec ? 0 : w.len);
      if (!bytes.empty()) (void)inferior.read_memory(w.addr, bytes);
      shadow_.push_back(std::move(bytes));
    }
  }
  Result<bool> handle(const linux::Event& ev) override {
    constexpr int kTrapPerf = 6;  // TRAP_PERF
    if (ev.kind != linux::EventKind::kSignal || ev.signal != SIGTRAP || ev.code != kTrapPerf) {
      return false;
    }
    auto regs = inferior_.get_regs(ev.tid);
    if (!regs) return std::unexpected(regs.error());
    const auto time =
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::steady_clock::now() - start_)
                                       .count());
    std::vector<bool> seen(watched_.size(), false);
    for (const linux::HwPiece& piece : pieces_) {
      if (ev.fault_addr < piece.addr || ev.fault_addr >= piece.addr + piece.len) continue;
      const std::size_t i = piece.expr;
      if (seen[i]) continue;
      seen[i] = true;
      const Watched& w = watched_[i];
      linux::SoftHit h;
      h.id = i;
      h.tid = ev.tid;
      h.time_ns = time;
      h.addr = ev.fault_addr;
      if (w.access == linux::kWatchExec) {
        h.ip = w.addr;
        h.access = linux::kWatchExec;
        reporter_.hit(h);
        continue;
      }
      h.ip = regs->rip;
      std::vector<std::uint8_t> now(w.len);
      if (auto r = inferior_.read_memory(w.addr, now); !r) now = shadow_[i];
      h.access = piece.type == pmu::BpType::kW ? linux::kWatchWrite
                                               : linux::kWatchRead | linux::kWatchWrite;
      if (auto acc = accessor_before(inferior_.pid(), regs->rip, w.addr, w.len, *regs)) {
        h.ip = acc->ip;
        if (piece.type != pmu::BpType::kW) h.access = acc->access;
      } else if (piece.type != pmu::BpType::kW) {
        h.access = now != shadow_[i] ? linux::kWatchWrite : linux::kWatchRead;
      }
      h.access &= w.access;
      h.old_value = shadow_[i];
      h.new_value = now;
      shadow_[i] = std::move(now);
      if (h.access != 0) reporter_.hit(h);
    }
    if (auto r = inferior_.resume(ev.tid, linux::Resume::kCont); !r)
      return std::unexpected(r.error());
    return true;
  }
  linux::Resume resume_mode() const override { return linux::Resume::kCont; }
  Result<void> finish() override {
    progress_.clear();
    perf_.reset();  // the breakpoints go; hits already queued for a thread are dropped below
    constexpr int kTrapPerf = 6;
    const auto perf_trap = [](const linux::Event& ev) {
      return ev.kind == linux::EventKind::kSignal && ev.signal == SIGTRAP && ev.code == kTrapPerf;
    };
    for (pid_t tid : inferior_.threads()) {
      for (const linux::Event& ev : inferior_.discard_queued(tid)) {
        if (!perf_trap(ev)) inferior_.requeue(ev);
      }
    }
    // A hit's SIGTRAP raised as the thread was being stopped is pending but not reported yet:
    // after the detach it would kill the program. Each is made to surface and dropped.
    Result<void> first;
    for (pid_t tid : inferior_.threads()) {
      auto surfaced = inferior_.surface_pending(tid, 1ull << (SIGTRAP - 1));
      if (!surfaced) {
        if (surfaced.error().code() != ErrorCode::kSrch && first) {
          first = std::unexpected(surfaced.error());
        }
        continue;
      }
      for (const linux::Event& ev : *surfaced) {
        if (!perf_trap(ev)) inferior_.requeue(ev);
      }
    }
    return first;
  }
  void tick() override {
    progress_.update("hwarb: " + std::to_string(reporter_.total()) + " hits");
  }
  bool done() const override { return reporter_.done(); }

 private:
  linux::Inferior& inferior_;
  std::optional<linux::PerfWatch>& perf_;
  const std::vector<linux::HwPiece>& pieces_;
  const std::vector<Watched>& watched_;
  Reporter& reporter_;
  Progress& progress_;
  std::chrono::steady_clock::time_point start_;
  std::vector<std::vector<std::uint8_t>> shadow_;
};

// The hardware path: perf breakpoints, no ptrace while the target runs. Returns nullopt (with
// `why` set) when the expressions cannot be watched this way; the caller then uses software.
std::optional<int> run_hardware(WatchArgs& args, linux::Inferior& inferior,
                                const std::vector<Watched>& watched, Reporter& reporter,
                                std::string& why) {
  const char* name = args.stat ? "stat" : "watch";
  std::vector<linux::HwPiece> pieces;
  for (std::size_t i = 0; i < watched.size(); ++i) {
    const Watched& w = watched[i];
    if (w.access == linux::kWatchExec) {
      pieces.push_back(linux::HwPiece{w.addr, 8, pmu::BpType::kX, i});
      continue;
    }
    const pmu::BpType type = w.access == linux::kWatchWrite ? pmu::BpType::kW : pmu::BpType::kRw;
    for (const breakpoints::Piece& p : breakpoints::split_range(w.addr, w.len)) {
      pieces.push_back(linux::HwPiece{p.addr, p.len, type, i});
    }
  }
  if (pieces.size() > 4) {
    why = "the expressions need " + std::to_string(pieces.size()) +
          " debug registers and x86_64 has 4";
    return std::nullopt;
  }
  const pid_t pid = inferior.pid();
  const bool spawned = inferior.spawned();
  // Exact values and read/write classification need the thread stopped at each hit; a count of
  // writes or executions does not (stat): then the target runs untraced.
  bool sync = !args.stat;
  for (const Watched& w : watched) sync |= (w.access & linux::kWatchRead) != 0;
  auto perf = linux::PerfWatch::open(pid, pieces, {.sigtrap = sync});
  if (!perf) {
    why = perf.error().to_string();
    return std::nullopt;
  }
  if (sync) {
    std::cerr << "hwarb " << name << ": hardware mode, " << perf->events()
              << " perf breakpoint events (" << pieces.size()
              << " debug registers), each hit stopping the thread for its values\n";
    std::optional<linux::PerfWatch> owned(std::move(*perf));
    Progress progress;
    HardEngine engine(inferior, owned, pieces, watched, reporter, progress);
    auto end = run_target(inferior, engine);
    progress.clear();
    if (!end) return target_error(name, end.error());
    reporter.summary("hardware", std::to_string(pieces.size()) + " debug registers", *end, spawned);
    return kExitOk;
  }
  // Counting writes and executions only (stat): the samples say all that is needed, and the
  // target runs untraced; nothing per hit may be slow here, or the rings overflow.
  if (auto d = inferior.detach(); !d) return target_error(name, d.error());
  std::cerr << "hwarb " << name << ": hardware mode, " << perf->events()
            << " perf breakpoint events (" << pieces.size() << " debug registers)\n";
  linux::install_interrupt_flag();
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t start_ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count());
  Progress progress;
  RunResult end;
  end.pid = pid;
  auto take = [&](const std::vector<linux::PerfHit>& hits) {
    for (const linux::PerfHit& ph : hits) {
      const std::size_t i = pieces[ph.piece].expr;
      const Watched& w = watched[i];
      linux::SoftHit h;
      h.id = i;
      h.tid = ph.tid;
      h.time_ns = ph.time_ns > start_ns ? ph.time_ns - start_ns : 0;
      h.ip = ph.ip;
      h.addr = ph.addr;
      h.access = w.access == linux::kWatchExec ? linux::kWatchExec : linux::kWatchWrite;
      reporter.hit(h);
    }
  };
  for (;;) {
    if (interrupted()) {
      end.interrupted = true;
      break;
    }
    if (reporter.done()) break;
    auto hits = perf->poll(100);
    if (!hits) return target_error(name, hits.error());
    take(*hits);
    progress.update("hwarb: " + std::to_string(reporter.total()) + " hits");
    if (spawned) {
      auto st = linux::wait_for(pid, true);
      if (st && st->kind != linux::WaitKind::kRunning) {
        if (auto rest = perf->poll(0)) take(*rest);
        end.exited = true;
        if (st->kind == linux::WaitKind::kExited) end.status = st->value;
        if (st->kind == linux::WaitKind::kKilled) end.signal = st->value;
        break;
      }
    } else if (perf->exited()) {
      end.exited = true;
      break;
    }
  }
  progress.clear();
  reporter.set_lost(perf->lost());
  perf = std::unexpected(Error(ErrorCode::kIo, "closed"));  // the breakpoints go now
  if (spawned && !end.exited) {
    if (end.interrupted) (void)linux::send_signal(pid, SIGKILL);
    if (auto st = linux::wait_for(pid, false)) {
      end.exited = true;
      if (st->kind == linux::WaitKind::kExited) end.status = st->value;
      if (st->kind == linux::WaitKind::kKilled) end.signal = st->value;
    }
  }
  reporter.summary("hardware", std::to_string(pieces.size()) + " debug registers", end, spawned);
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

  // Hardware or software: what the machine really does decides, unless --software.
  bool hardware = false;
  std::string why = "--software";
  if (!args.software) {
    auto report = linux::probe();
    if (report && report->hits_delivered) {
      hardware = true;
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

  auto inferior = open_target(args.target);
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
    if (auto code = run_hardware(args, *inferior, *watched, reporter, why)) return *code;
    std::cerr << "hwarb " << name << ": hardware mode not possible (" << why << ")\n";
  }
  // The software path (also where the hardware path cannot take the expressions).
  std::vector<linux::WatchRange> ranges;
  for (std::size_t i = 0; i < watched->size(); ++i) {
    const Watched& w = (*watched)[i];
    ranges.push_back(linux::WatchRange{w.addr, w.len, w.access, i});
  }
  auto watch = linux::SoftWatch::arm(*inferior, ranges);
  if (!watch) return target_error(name, watch.error());
  std::cerr << "hwarb " << name << ": software mode, " << watch->describe() << " (" << why << ")\n";
  Progress progress;
  SoftEngine engine(*watch, reporter, progress);
  const bool spawned = inferior->spawned();
  const std::string method = watch->describe();
  auto end = run_target(*inferior, engine);
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
