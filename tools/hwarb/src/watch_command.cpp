// `hwarb watch` and `hwarb stat`: watch memory (and code) of a real process.
//
// The expressions are resolved against the target's ELF symbols (SymbolTable, with load
// biases) and, for members, elements and pointers, its DWARF types (find_object: the watched
// object's size and type, whose values the hits print), then watched by one of two paths of
// linux/session (over linux/perf and linux/soft_watch):
//  1. hardware (hard_watch.h), when the probe shows that this machine delivers breakpoint hits:
//     perf_event_open breakpoints on every thread, as many as the probe found a thread gets. Each
//     hit stops the hitting thread (perf's sigtrap, seen through ptrace) for its values and its
//     instruction; the thread runs on at once. x86 has no read-only breakpoints: `:r` uses an rw
//     breakpoint and keeps the hits whose instruction only reads the watched bytes. Counting
//     writes and executions (stat) needs no stop: perf's counting events per thread, read when
//     the target ends (as perf stat), the target traced only for its threads, forks and status.
//  2. software (the fallback, or --software; soft_watch.h): SoftWatch over ptrace — page
//     protection with decoded faults, int3 for execution, single-step for stacks. Exact: every
//     read and write.
// `stat` runs the same and prints only the counts: a table per expression and thread.
//
// Identical expressions (the same range and access) share one watch: one debug register, one
// page or int3; each of them is still reported. An execute watch must be on an instruction of
// code: in an executable mapping, not in a data object and, inside a function, on an instruction
// boundary (the function decoded from its start).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "commands.h"
#include "hwarb/base/format.h"
#include "hwarb/cli/condition.h"
#include "hwarb/cli/watch_expr.h"
#include "hwarb/linux/hard_watch.h"
#include "hwarb/linux/probe.h"
#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/session.h"
#include "hwarb/linux/symbols.h"
#include "hwarb/linux/thread_local_watches.h"
#include "hwarb/linux/watch_hit.h"
#include "hwarb/linux/watch_session.h"
#include "hwarb/x86/debugreg.h"
#include "hwarb/x86/insn.h"
#include "number_scan.h"
#include "session.h"
#include "system_wide.h"
#include "timeline.h"
#include "typed_value.h"

namespace hwarb::cli {
namespace {

struct WatchArgs {
  bool stat = false;
  std::vector<std::string> exprs;
  std::string condition;
  std::uint64_t count = 0;  // from count_text; 0: no limit
  std::string count_text;
  CLI::Option* count_option = nullptr;
  bool software = false;
  bool hardware = false;
  std::string output;
  TimelineArgs timeline;  // --timeline FILE, --timeline-max N
  bool json = false;
  TargetOptions target;
  bool cpu_accesses = false;      // --cpu-accesses
  bool emulate_accesses = false;  // --emulate-accesses
  bool all_cpus = false;          // stat -a
  std::string cpu_list;           // stat -C
  bool user_only = false;
};

struct Watched {
  native::WatchRange range;        // id: the index of the expression
  std::string label;               // the expression as given
  std::vector<std::string> notes;  // of its resolution (a pointer read once)
  native::ValueType type;          // of the whole watched object (kBytes: not known to be one)
  // A thread-local variable: watched in each thread's copy (range.addr is then the offset in
  // the copy), by ThreadLocalWatches rather than as one range.
  std::optional<native::ThreadLocalSymbol> thread_local_var;
};

std::string access_letters(unsigned bits) {
  std::string out;
  if ((bits & native::kWatchRead) != 0) out += 'r';
  if ((bits & native::kWatchWrite) != 0) out += 'w';
  if ((bits & native::kWatchExec) != 0) out += 'x';
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

bool same_range(const native::WatchRange& a, const native::WatchRange& b) {
  return a.addr == b.addr && a.len == b.len && a.access == b.access;
}

// The ranges to watch: one per distinct range, its id the index of the first expression that
// names it; thread-locals aside (each thread's copy is a watch of its own).
std::vector<native::WatchRange> ranges_of(const std::vector<Watched>& watched) {
  std::vector<native::WatchRange> out;
  for (const Watched& w : watched) {
    if (w.thread_local_var) continue;
    const auto same = [&](const native::WatchRange& r) { return same_range(r, w.range); };
    if (std::find_if(out.begin(), out.end(), same) == out.end()) out.push_back(w.range);
  }
  return out;
}

// --count N: a whole number of hits, decimal or hexadecimal with 0x (0: no limit).
// An execute watch at w.range.addr must be on an instruction of code (see the file comment).
// EINVAL saying why not.
Result<void> check_code(const Watched& w, native::Inferior& inferior,
                        const native::SymbolTable& table) {
  const std::uint64_t addr = w.range.addr;
  const std::string where = "expression '" + w.label + "': " + hex(addr);
  auto maps = native::read_maps(inferior.pid());
  if (!maps) return std::unexpected(maps.error());
  const std::optional<native::Mapping> mapping = native::find_mapping(*maps, addr);
  const native::Location loc = table.locate(addr);
  const std::string named = loc.symbol ? " (" + table.describe(addr) + ")" : "";
  if (!mapping) return make_error(ErrorCode::kInval, where + named + " is not code: not mapped");
  if (!mapping->exec) {
    return make_error(ErrorCode::kInval,
                      where + named + " is not code: its mapping is not executable");
  }
  if (!loc.symbol) return {};
  const native::Symbol& sym = *loc.symbol;
  if (!sym.function) {
    return make_error(ErrorCode::kInval,
                      where + named + " is not code: " + sym.name + " is a data object");
  }
  if (sym.size == 0) return {};  // no known extent to decode
  std::vector<std::uint8_t> bytes(sym.size);
  if (auto r = inferior.read_memory(sym.address, bytes); !r) return r;
  std::uint64_t at = sym.address;
  std::uint64_t previous = at;
  while (at < addr) {
    auto insn = x86::decode(std::span<const std::uint8_t>(bytes).subspan(at - sym.address), at);
    if (!insn) {
      return make_error(
          ErrorCode::kInval,
          where + ": cannot tell whether it is on an instruction boundary: " + sym.name + "+" +
              hex(at - sym.address) + " does not decode: " + insn.error().message());
    }
    previous = at;
    at += insn->length;
  }
  if (at == addr) return {};
  return make_error(ErrorCode::kInval,
                    where + " is not on an instruction boundary: it is inside the instruction at " +
                        sym.name + "+" + hex(previous - sym.address) + " (" +
                        std::to_string(at - previous) + " bytes; the next is at " + sym.name + "+" +
                        hex(at - sym.address) + ")");
}

int usage_error(const char* command, const std::string& message) {
  std::cerr << "hwarb " << command << ": " << message << "\n";
  return kExitUsage;
}

int target_error(const char* command, const Error& error) {
  std::cerr << "hwarb " << command << ": " << error.to_string() << "\n";
  return kExitFailure;
}

// A watch that could not be armed: with --hardware, hardware mode is not possible.
int arm_error(const char* command, bool hardware, const Error& error) {
  if (!hardware) return target_error(command, error);
  std::cerr << "hwarb " << command << ": --hardware: hardware mode not possible ("
            << error.to_string() << ")\n";
  return kExitFailure;
}

// Runs a spawned program to its entry point (once per `ran_to_entry`, reloading `table`) when
// `addr` is not mapped yet.
Result<void> run_to_mapping(native::Inferior& inferior, native::SymbolTable& table,
                            bool& ran_to_entry, std::uint64_t addr) {
  if (ran_to_entry || !inferior.spawned() || !table.entry()) return {};
  auto maps = native::read_maps(inferior.pid());
  if (!maps) return std::unexpected(maps.error());
  if (native::find_mapping(*maps, addr)) return {};
  ran_to_entry = true;
  if (auto r = native::run_to(inferior, *table.entry()); !r) return r;
  auto fresh = native::SymbolTable::load(inferior.pid());
  if (!fresh) return std::unexpected(fresh.error());
  table = std::move(*fresh);
  return {};
}

// The thread-local variable expression `e` names (find_object said it is one): its whole name
// alone, a data access inside its copy (EINVAL otherwise).
Result<native::ThreadLocalSymbol> thread_local_of(const WatchExpr& e, native::Inferior& inferior,
                                                  native::SymbolTable& table, bool& ran_to_entry) {
  const std::string where = "expression '" + e.text + "'";
  auto var = native::find_thread_local(inferior, table, ran_to_entry, e.symbol);
  if (!var) {
    return make_error(ErrorCode::kInval,
                      where + ": a thread-local is watched by its name alone (with +OFF, /LEN)");
  }
  if (e.access == WatchAccess::kExec) {
    return make_error(ErrorCode::kInval, where + ": a thread-local variable is data, not code");
  }
  if (e.offset < 0) return make_error(ErrorCode::kInval, where + ": a negative offset");
  return var;
}

// Resolves every expression; ENOENT for unknown symbols and EINVAL for ranges that wrap and
// execute watches off code (both usage errors, exit 2).
Result<std::vector<Watched>> resolve(const std::vector<WatchExpr>& exprs,
                                     native::Inferior& inferior) {
  auto table = native::SymbolTable::load(inferior.pid());
  if (!table) return std::unexpected(table.error());
  bool ran_to_entry = false;
  std::vector<Watched> out;
  for (const WatchExpr& e : exprs) {
    Watched w;
    w.label = e.text;
    w.range.id = out.size();
    w.range.access = access_bits(e.access);
    std::optional<std::uint64_t> size;
    bool wrapped = false;
    if (e.address) {
      w.range.addr = *e.address;
      // An address not mapped at a spawned program's first instruction may be in a shared
      // library the dynamic loader maps later: the program runs to its entry point first, as for
      // a symbol not found yet (find_symbol), so that the watch is armed where it is mapped.
      if (auto r = run_to_mapping(inferior, *table, ran_to_entry, w.range.addr); !r) {
        return std::unexpected(r.error().with_context("expression '" + e.text + "'"));
      }
    } else {
      auto object = native::find_object(inferior, *table, ran_to_entry, e.symbol);
      if (!object && object.error().code() == ErrorCode::kOpNotSupp) {
        auto var = thread_local_of(e, inferior, *table, ran_to_entry);
        if (!var) return std::unexpected(var.error());
        w.range.addr = static_cast<std::uint64_t>(e.offset);
        w.range.len = default_length(e, var->size);
        w.thread_local_var = std::move(*var);
        out.push_back(std::move(w));
        continue;
      }
      if (!object) {
        return std::unexpected(object.error().with_context("expression '" + e.text + "'"));
      }
      w.range.addr = object->address + static_cast<std::uint64_t>(e.offset);
      wrapped = e.offset >= 0 ? w.range.addr < object->address : w.range.addr > object->address;
      size = object->size;
      w.notes = object->notes;
      // Values are typed when the range is the object itself.
      if (e.offset == 0 && (!e.length || *e.length == object->size)) w.type = object->type;
    }
    w.range.len = e.access == WatchAccess::kExec ? 1 : default_length(e, size);
    if (wrapped || w.range.addr > ~std::uint64_t{0} - (w.range.len - 1)) {
      return make_error(ErrorCode::kInval, "expression '" + e.text +
                                               "': the range wraps past the end of the address "
                                               "space");
    }
    if (e.access == WatchAccess::kExec) {
      if (auto code = check_code(w, inferior, *table); !code) return std::unexpected(code.error());
    }
    out.push_back(std::move(w));
  }
  return out;
}

// Per-expression and per-thread counts, and the printing of hits.
class Reporter final : public native::WatchObserver {
 public:
  Reporter(const WatchArgs& args, const std::vector<Watched>& watched, Condition condition,
           pid_t pid, const Report& report)
      : args_(args),
        watched_(watched),
        condition_(std::move(condition)),
        pid_(pid),
        report_(report) {
    hits_.assign(watched.size(), 0);
    for (const Comparison& c : condition_.terms) {
      (c.operand == CondOperand::kOld ? needs_old_ : needs_new_) = true;
    }
    // A range's id is its first expression's index (ranges_of); its hits are every such
    // expression's.
    sharing_.resize(watched.size());
    for (std::size_t i = 0; i < watched.size(); ++i) {
      std::size_t first = 0;
      // A thread-local's copies are its own (its range is an offset in them).
      while (first < i && (watched[i].thread_local_var || watched[first].thread_local_var ||
                           !same_range(watched[first].range, watched[i].range))) {
        ++first;
      }
      sharing_[first].push_back(i);
    }
  }

  // Reports one hit of range h.id, once for each expression naming it.
  void hit(const native::WatchHit& h) override {
    for (std::size_t i : sharing_[h.id]) hit(h, i);
  }

  // A remark about range `id` (its memory unmapped, mapped again): on stderr, and a "note"
  // record in the JSON report.
  void note(std::size_t id, const std::string& text) override {
    for (std::size_t i : sharing_[id]) {
      std::cerr << "hwarb " << (args_.stat ? "stat" : "watch") << ": note: " << watched_[i].label
                << " " << text << "\n";
      if (args_.json && !args_.stat) {
        report_.line("{\"event\":\"note\",\"expr\":" + json_string(watched_[i].label) +
                     ",\"text\":" + json_string(text) + "}");
      }
    }
  }

  bool done() const override { return args_.count != 0 && total_ >= args_.count; }
  std::uint64_t total() const { return total_; }

  // `n` hits of range `id` by thread `tid`, counted without being seen one by one (stat's
  // counting events), for each expression naming the range.
  void add_count(std::size_t id, pid_t tid, unsigned access, std::uint64_t n) {
    if (args_.target.tid != 0 && tid != args_.target.tid) return;
    for (std::size_t i : sharing_[id]) {
      hits_[i] += n;
      total_ += n;
      Counts& c = per_thread_[{i, tid}];
      if ((access & native::kWatchRead) != 0) c.reads += n;
      if ((access & native::kWatchWrite) != 0) c.writes += n;
      if ((access & native::kWatchExec) != 0) c.execs += n;
      c.total += n;
    }
  }

 private:
  // Reports one hit of expression i (after the --if condition and the -t filter). A condition on
  // a value that is unknown does not hold.
  void hit(const native::WatchHit& h, std::size_t i) {
    if (args_.target.tid != 0 && h.tid != args_.target.tid) return;
    if (done()) return;
    const Watched& w = watched_[i];
    const unsigned width = static_cast<unsigned>(std::min<std::uint64_t>(w.range.len, 8));
    if (h.access != native::kWatchExec) {
      if ((needs_old_ && h.old_value.empty()) || (needs_new_ && h.new_value.empty())) return;
      if (!condition_.eval(le_value(h.old_value), le_value(h.new_value), width)) return;
    }
    ++hits_[i];
    ++total_;
    Counts& c = per_thread_[{i, h.tid}];
    if ((h.access & native::kWatchRead) != 0) ++c.reads;
    if ((h.access & native::kWatchWrite) != 0) ++c.writes;
    if ((h.access & native::kWatchExec) != 0) ++c.execs;
    ++c.total;
    if (timeline_ != nullptr) {
      const bool values = h.access != native::kWatchExec;
      record_hit(*timeline_, {.pid = pid_,
                              .tid = h.tid,
                              .ts_us = timeline_base_us_ + static_cast<double>(h.time_ns) / 1e3,
                              .expr = w.label,
                              .access = access_letters(h.access),
                              .ip = h.ip,
                              .addr = h.addr,
                              .instruction = describe(h.ip),
                              .old_value = values ? value_text(h.old_value) : "",
                              .new_value = values ? value_text(h.new_value) : "",
                              .syscall = h.syscall});
    }
    if (args_.stat) return;
    if (args_.json) {
      std::string line = "{\"event\":\"hit\",\"expr\":" + json_string(w.label) +
                         ",\"tid\":" + std::to_string(h.tid) + ",\"ip\":\"" + hex(h.ip) +
                         "\",\"addr\":\"" + hex(h.addr) + "\",\"access\":\"" +
                         access_letters(h.access) + "\"";
      if (h.access != native::kWatchExec) {
        // An unknown value is left out.
        if (!h.old_value.empty()) line += ",\"old\":\"" + value_text(h.old_value) + "\"";
        if (!h.new_value.empty()) line += ",\"new\":\"" + value_text(h.new_value) + "\"";
        const auto old_typed = typed_value(w.type, h.old_value, symbols_, true);
        const auto new_typed = typed_value(w.type, h.new_value, symbols_, true);
        if (old_typed || new_typed) {
          line += ",\"value\":{\"type\":" + json_string(w.type.name);
          if (old_typed) line += ",\"old\":" + *old_typed;
          if (new_typed) line += ",\"new\":" + *new_typed;
          line += "}";
        }
      }
      char time[32];
      std::snprintf(time, sizeof(time), "%.6f", static_cast<double>(h.time_ns) / 1e9);
      line += ",\"time\":" + std::string(time);
      line += ",\"symbol\":" + json_string(describe(h.ip));
      if (!h.syscall.empty()) line += ",\"syscall\":" + json_string(h.syscall);
      line += "}";
      report_.line(line);
    } else {
      char time[32];
      std::snprintf(time, sizeof(time), "%12.6f", static_cast<double>(h.time_ns) / 1e9);
      std::string line = std::string(time) + "  tid " + std::to_string(h.tid) + "  " +
                         describe(h.ip) + "  " + w.label + " " + hex(h.addr) + " " +
                         access_letters(h.access);
      if (h.access != native::kWatchExec) {
        const auto text = [&](const std::vector<std::uint8_t>& bytes) {
          return typed_value(w.type, bytes, symbols_, false).value_or(value_text(bytes));
        };
        line += "  " + text(h.old_value) + " -> " + text(h.new_value);
      }
      if (!h.syscall.empty()) line += "  (kernel, " + h.syscall + ")";
      report_.line(line);
    }
  }

 public:
  void summary(const std::string& mode, const std::string& method, const native::RunResult& end,
               bool spawned) {
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
      report_.line(line);
      return;
    }
    if (args_.stat) {
      report_.print("\n Watch counts for %s (%s: %s):\n\n", target_text_.c_str(), mode.c_str(),
                    method.c_str());
      report_.print(" %-28s %8s %10s %10s %10s %10s\n", "EXPRESSION", "TID", "READS", "WRITES",
                    "EXECS", "TOTAL");
      for (std::size_t i = 0; i < watched_.size(); ++i) {
        Counts sum;
        for (const auto& [key, c] : per_thread_) {
          if (key.first != i) continue;
          report_.print(
              " %-28s %8d %10llu %10llu %10llu %10llu\n", watched_[i].label.c_str(), key.second,
              static_cast<unsigned long long>(c.reads), static_cast<unsigned long long>(c.writes),
              static_cast<unsigned long long>(c.execs), static_cast<unsigned long long>(c.total));
          sum.reads += c.reads;
          sum.writes += c.writes;
          sum.execs += c.execs;
          sum.total += c.total;
        }
        report_.print(
            " %-28s %8s %10llu %10llu %10llu %10llu\n", watched_[i].label.c_str(), "all",
            static_cast<unsigned long long>(sum.reads), static_cast<unsigned long long>(sum.writes),
            static_cast<unsigned long long>(sum.execs), static_cast<unsigned long long>(sum.total));
      }
      report_.write("\n");
      report_.flush();
    }
    std::string line = std::string("hwarb ") + (args_.stat ? "stat" : "watch") + ": " +
                       std::to_string(total_) + (total_ == 1 ? " hit" : " hits");
    for (std::size_t i = 0; i < watched_.size(); ++i) {
      line += (i == 0 ? " (" : ", ") + watched_[i].label + ": " + std::to_string(hits_[i]);
    }
    line += ") in " + mode + " mode [" + method + "]; " + target_text_ + " " +
            describe_end(end, spawned) + "\n";
    report_.summary(line);
    if (lost_ != 0) {
      std::cerr << "hwarb " << (args_.stat ? "stat" : "watch") << ": warning: the kernel dropped "
                << lost_ << " samples (ring buffer full): the counts are lower bounds\n";
    }
  }

  void set_target_text(std::string text) { target_text_ = std::move(text); }
  // Samples the kernel dropped (a full ring): the counts are then lower bounds, and say so.
  void set_lost(std::uint64_t lost) { lost_ = lost; }
  void set_symbols(native::SymbolTable* table) { symbols_ = table; }
  // Each hit also on `timeline`, at `base_us` (when the watch began) + its time.
  void set_timeline(Timeline* timeline, double base_us) {
    timeline_ = timeline;
    timeline_base_us_ = base_us;
  }

 private:
  struct Counts {
    std::uint64_t reads = 0, writes = 0, execs = 0, total = 0;
  };
  // The symbol and line of `ip`, kept per ip once it lies in a module (a hit in a loop is
  // described once); an ip outside every module may be in a library mapped later, so it is not
  // kept, and the table is reloaded (a few times at most).
  std::string describe(std::uint64_t ip) {
    if (auto it = described_.find(ip); it != described_.end()) return it->second;
    if (symbols_ == nullptr) return hex(ip);
    bool in_module = !symbols_->locate(ip).module.empty();
    if (!in_module && reloads_ < 4) {
      // A library mapped after the table was loaded.
      ++reloads_;
      if (auto fresh = native::SymbolTable::load(pid_)) {
        *symbols_ = std::move(*fresh);
        described_.clear();
        in_module = !symbols_->locate(ip).module.empty();
      }
    }
    std::string text = symbols_->describe(ip);
    if (in_module) {
      if (described_.size() >= kMaxDescribed) described_.clear();
      described_.emplace(ip, text);
    }
    return text;
  }
  static constexpr std::size_t kMaxDescribed = 4096;
  std::unordered_map<std::uint64_t, std::string> described_;

  const WatchArgs& args_;
  const std::vector<Watched>& watched_;
  std::vector<std::vector<std::size_t>> sharing_;  // by range id: the expressions naming it
  Condition condition_;
  bool needs_old_ = false;
  bool needs_new_ = false;
  pid_t pid_;
  const Report& report_;
  std::vector<std::uint64_t> hits_;
  std::uint64_t total_ = 0;
  std::map<std::pair<std::size_t, pid_t>, Counts> per_thread_;
  std::string target_text_;
  native::SymbolTable* symbols_ = nullptr;
  int reloads_ = 0;
  std::uint64_t lost_ = 0;
  Timeline* timeline_ = nullptr;
  double timeline_base_us_ = 0;
};

// "; then software for 1 debug register given up to the program" (the summary's method), or "".
std::string given_up_text(const native::WatchSession& session) {
  const int n = session.registers_given_up();
  if (n == 0) return {};
  return "; then software for " + std::to_string(n) + " debug register" + (n == 1 ? "" : "s") +
         " given up to the program";
}

// One watch per distinct range, of `mode`.
std::vector<native::WatchSpec> specs_of(const std::vector<native::WatchRange>& ranges,
                                        native::WatchMode mode) {
  std::vector<native::WatchSpec> specs;
  for (const native::WatchRange& r : ranges) {
    specs.push_back({.addr = r.addr, .len = r.len, .access = r.access, .mode = mode});
  }
  return specs;
}

// The reporter knows a range by its first expression's index (WatchRange::id); the session by
// its WatchId (infos[i] is ranges[i]'s): WatchId -> the first expression's index.
std::map<std::size_t, std::size_t> expressions_of(const std::vector<native::WatchInfo>& infos,
                                                  const std::vector<native::WatchRange>& ranges) {
  std::map<std::size_t, std::size_t> expr_of;
  for (std::size_t i = 0; i < infos.size(); ++i) {
    expr_of[static_cast<std::size_t>(infos[i].id)] = ranges[i].id;
  }
  return expr_of;
}

// The session's hits and notes for the Reporter, which knows a range by its first expression's
// index: `expr_of` maps each WatchId to it.
class ById final : public native::WatchObserver {
 public:
  ById(Reporter& reporter, const std::map<std::size_t, std::size_t>& expr_of)
      : reporter_(reporter), expr_of_(expr_of) {}
  void hit(const native::WatchHit& h) override {
    native::WatchHit copy = h;
    copy.id = expr_of_.at(h.id);
    reporter_.hit(copy);
  }
  void note(std::size_t id, const std::string& text) override {
    reporter_.note(expr_of_.at(id), text);
  }
  bool done() const override { return reporter_.done(); }

 private:
  Reporter& reporter_;
  const std::map<std::size_t, std::size_t>& expr_of_;
};

// stat's counting until the program asks for a debug register that the counting events hold
// (register_yield.h). Then the counts so far are kept, the events closed, and the rest of the run
// is a WatchSession of the same ranges whose last hardware watch gives its registers up; its hits
// are counted by the Reporter on top of the counts kept.
class CountThenWatch final : public native::Engine {
 public:
  CountThenWatch(native::HardCountEngine& counting, native::Inferior& inferior,
                 const std::vector<native::WatchRange>& ranges,
                 const native::WatchSessionOptions& options, Reporter& reporter)
      : counting_(counting),
        inferior_(inferior),
        ranges_(ranges),
        options_(options),
        observer_(reporter, expr_of_) {}

  Result<bool> handle(const native::Event& event) override {
    return watch_ ? watch_->handle(event) : counting_.handle(event);
  }
  native::Resume resume_mode() const override {
    return watch_ ? watch_->resume_mode() : counting_.resume_mode();
  }
  Result<void> finish() override { return watch_ ? watch_->finish() : counting_.finish(); }
  bool done() const override { return watch_ && watch_->done(); }
  int yieldable_registers() const override {
    return watch_ ? watch_->yieldable_registers() : counting_.registers();
  }
  int held_registers() const override {
    return watch_ ? watch_->held_registers() : counting_.registers();
  }
  Result<int> yield_registers(const std::string& who) override {
    if (watch_) return watch_->yield_registers(who);
    const int held = counting_.registers();
    auto so_far = counting_.close();
    if (!so_far) return std::unexpected(so_far.error());
    before_ = std::move(*so_far);
    session_.emplace(inferior_, options_);
    auto infos = session_->insert_all(specs_of(ranges_, native::WatchMode::kAuto));
    if (!infos) return std::unexpected(infos.error());
    expr_of_ = expressions_of(*infos, ranges_);
    watch_.emplace(*session_, observer_);
    auto given = watch_->yield_registers(who);
    if (!given) return std::unexpected(given.error());
    return std::max(1, held - watch_->yieldable_registers());
  }

  [[nodiscard]] bool switched() const { return watch_.has_value(); }
  // The counts of the counting events when they were closed.
  [[nodiscard]] const std::vector<native::RangeCount>& counted_before() const { return before_; }
  [[nodiscard]] const native::WatchSession* session() const {
    return session_ ? &*session_ : nullptr;
  }

 private:
  native::HardCountEngine& counting_;
  native::Inferior& inferior_;
  const std::vector<native::WatchRange>& ranges_;
  native::WatchSessionOptions options_;
  std::map<std::size_t, std::size_t> expr_of_;
  ById observer_;
  std::vector<native::RangeCount> before_;
  std::optional<native::WatchSession> session_;
  std::optional<native::WatchSessionEngine> watch_;
};

// Counting writes and executions (stat) in hardware mode: perf's counting events, read when the
// target ends (as perf stat); no stop per hit. nullopt (with `why`) when the expressions need
// more registers than a thread has, or the kernel refuses: the caller then takes the session.
std::optional<int> run_counting(const WatchArgs& args, native::Inferior& inferior,
                                const std::vector<native::WatchRange>& ranges, Reporter& reporter,
                                const native::WatchSessionOptions& options, std::string& why) {
  const char* name = args.stat ? "stat" : "watch";
  auto pieces = native::plan_pieces(ranges, options.slots);
  if (!pieces) {
    why = pieces.error().message();
    return std::nullopt;
  }
  auto count = native::PerfCount::open(inferior.pid(), *pieces);
  if (!count) {
    why = count.error().to_string();
    return std::nullopt;
  }
  std::string method = std::to_string(pieces->size()) + " debug registers";
  std::cerr << "hwarb " << name << ": hardware mode, " << count->tasks().size() * pieces->size()
            << " perf counting events (" << method << "), read when the target ends\n";
  native::HardCountEngine counting(inferior, std::move(*count), ranges);
  CountThenWatch engine(counting, inferior, ranges, options, reporter);
  auto end = native::run_target(inferior, engine);
  if (!end) return target_error(name, end.error());
  auto counts = engine.switched() ? Result<std::vector<native::RangeCount>>(engine.counted_before())
                                  : counting.counts();
  if (!counts) return target_error(name, counts.error());
  for (const native::RangeCount& c : *counts) reporter.add_count(c.id, c.tid, c.access, c.count);
  const std::string mode = "hardware";
  if (const native::WatchSession* session = engine.session()) method += given_up_text(*session);
  reporter.summary(mode, method, *end, inferior.spawned());
  return kExitOk;
}

// Why the software watches are software (software_reasons), each named by its expression.
std::string software_why(const std::vector<Watched>& watched,
                         const std::map<std::size_t, std::size_t>& expr_of,
                         const std::vector<native::WatchInfo>& infos) {
  return native::software_reasons(infos, [&](native::WatchId id) {
    return watched[expr_of.at(static_cast<std::size_t>(id))].label;
  });
}

// --json: where each expression's watch went, one "watch" record each (before the hits), for
// `hwarb report`: its range, the placement and why, the debug registers it holds.
void report_placements(const Report& output, const std::vector<Watched>& watched,
                       const std::vector<native::WatchRange>& ranges,
                       const std::vector<native::WatchInfo>& infos) {
  for (const Watched& w : watched) {
    for (std::size_t i = 0; i < ranges.size() && i < infos.size(); ++i) {
      if (!same_range(ranges[i], w.range)) continue;
      const native::WatchInfo& info = infos[i];
      const bool hard = info.placement == native::Placement::kHardware;
      output.line("{\"event\":\"watch\",\"expr\":" + json_string(w.label) + ",\"addr\":\"" +
                  hex(w.range.addr) + "\",\"len\":" + std::to_string(w.range.len) + ",\"type\":\"" +
                  access_letters(w.range.access) + "\",\"placement\":\"" +
                  (hard ? "hardware" : "software") + "\",\"why\":" + json_string(info.why) +
                  ",\"registers\":" + std::to_string(info.registers) + "}");
      break;
    }
  }
}

// The status line of a session (stderr): the mode, how the watches are taken, and why a watch
// is software; where the CPU makes the software path's accesses, why.
void print_mode(const char* name, native::WatchSession& session,
                const std::vector<Watched>& watched,
                const std::map<std::size_t, std::size_t>& expr_of,
                const std::vector<native::WatchInfo>& infos, const std::string& why_cpu) {
  const std::string mode = native::placement_mode(infos);
  std::cerr << "hwarb " << name << ": " << mode << " mode, ";
  if (mode == "hardware") {
    std::cerr << session.perf_events() << " perf breakpoint events (" << session.describe()
              << "), each hit stopping the thread for its values\n";
    return;
  }
  if (mode == "software") {
    std::cerr << session.describe() << " (" << software_why(watched, expr_of, infos) << ")\n";
  } else {
    std::cerr << session.describe() << ", " << session.perf_events()
              << " perf breakpoint events; software: " << software_why(watched, expr_of, infos)
              << "\n";
  }
  if (!why_cpu.empty()) {
    std::cerr << "hwarb " << name << ": the CPU makes each access to a watched page (" << why_cpu
              << ")\n";
  }
}

// The thread-local expressions of `watched` watched in every thread there is now (stopped), each
// copy's WatchId mapped to its expression in `expr_of`.
Result<native::ThreadLocalWatches> arm_thread_locals(const std::vector<Watched>& watched,
                                                     const WatchArgs& args,
                                                     native::Inferior& inferior,
                                                     native::WatchSession& session,
                                                     std::map<std::size_t, std::size_t>& expr_of) {
  std::vector<native::ThreadLocalSpec> wanted;
  for (std::size_t i = 0; i < watched.size(); ++i) {
    const Watched& w = watched[i];
    if (!w.thread_local_var) continue;
    wanted.push_back(
        {.symbol = *w.thread_local_var,
         .offset = w.range.addr,
         .len = w.range.len,
         .access = w.range.access,
         .mode = args.hardware ? native::WatchMode::kHardware : native::WatchMode::kAuto,
         .id = i});
  }
  auto copies = native::ThreadLocalWatches::open(inferior, session, std::move(wanted));
  if (!copies) return std::unexpected(copies.error());
  auto armed = copies->arm();
  if (!armed) return std::unexpected(armed.error());
  for (const native::ThreadLocalCopy& c : *armed) expr_of[static_cast<std::size_t>(c.id)] = c.spec;
  return copies;
}

// `hwarb watch|stat` once the report is open (run_watch): the exit status of the run, to which
// finish_report adds the report's own failure.
int watch_target(const WatchArgs& args, const std::vector<WatchExpr>& exprs,
                 const Condition& condition, const native::WatchSessionOptions& options,
                 const Report& output, Timeline* timeline) {
  const char* name = args.stat ? "stat" : "watch";
  RunPhases phases(timeline);
  phases.mark("attach");
  auto inferior = native::open_target(args.target);
  if (!inferior) return target_error(name, inferior.error());
  auto watched = resolve(exprs, *inferior);
  if (!watched) {
    // What the expressions name (unknown, ambiguous, out of bounds, thread-local) is the user's.
    const ErrorCode code = watched.error().code();
    const bool usage = code == ErrorCode::kNoEnt || code == ErrorCode::kInval ||
                       code == ErrorCode::kRange || code == ErrorCode::kOpNotSupp;
    std::cerr << "hwarb " << name << ": " << watched.error().to_string() << "\n";
    if (inferior->spawned()) {
      const std::string note = lookup_note(args.target, inferior->pid(), watched.error());
      if (!note.empty()) std::cerr << "hwarb " << name << ": note: " << note << "\n";
    }
    return usage ? kExitUsage : kExitFailure;
  }
  for (const Watched& w : *watched) {
    for (const std::string& note : w.notes) {
      std::cerr << "hwarb " << name << ": note: " << w.label << ": " << note << "\n";
    }
  }
  auto table = native::SymbolTable::load(inferior->pid());
  Reporter reporter(args, *watched, condition, inferior->pid(), output);
  reporter.set_target_text(target_name(args.target));
  if (table) reporter.set_symbols(&*table);
  const std::vector<native::WatchRange> ranges = ranges_of(*watched);

  const bool thread_locals = std::any_of(watched->begin(), watched->end(), [](const Watched& w) {
    return w.thread_local_var.has_value();
  });
  if (options.hardware && !thread_locals && !native::hits_need_stops(ranges, !args.stat)) {
    std::string why;
    if (auto code = run_counting(args, *inferior, ranges, reporter, options, why)) {
      return *code;
    }
    if (args.hardware) {
      std::cerr << "hwarb " << name << ": --hardware: hardware mode not possible (" << why << ")\n";
      return kExitFailure;
    }
  }
  // Every other case: one WatchSession, each distinct range a watch (its id the range's index).
  phases.mark("arm");
  if (timeline != nullptr) {
    name_process(*timeline, inferior->pid());
    reporter.set_timeline(timeline, timeline->now_us());
  }
  native::WatchSession session(*inferior, options);
  auto infos = session.insert_all(
      specs_of(ranges, args.hardware ? native::WatchMode::kHardware : native::WatchMode::kAuto));
  if (!infos) return arm_error(name, args.hardware, infos.error());
  std::map<std::size_t, std::size_t> expr_of = expressions_of(*infos, ranges);
  // Thread-locals: each thread's copy a watch of its own, new threads' too.
  std::optional<native::ThreadLocalWatches> copies;
  if (thread_locals) {
    auto armed = arm_thread_locals(*watched, args, *inferior, session, expr_of);
    if (!armed) return arm_error(name, args.hardware, armed.error());
    for (const native::ThreadLocalCopy& c : armed->copies()) infos->push_back(c.info);
    copies.emplace(std::move(*armed));
  }
  print_mode(name, session, *watched, expr_of, *infos,
             options.cpu_accesses ? options.cpu_accesses_why : "");
  if (args.json && !args.stat) report_placements(output, *watched, ranges, *infos);
  ById observer(reporter, expr_of);

  // The session guards an attached program with its watchdog: a failure to start it is told.
  if (session.guard_error()) {
    std::cerr << "hwarb " << name << ": warning: no watchdog ("
              << session.guard_error()->to_string()
              << "): if hwarb is killed, its changes to the program stay\n";
  }
  Progress progress;
  std::optional<native::OwnCopyHits> own;
  if (copies) own.emplace(*copies, observer);
  native::WatchSessionEngine engine(session, own ? static_cast<native::WatchObserver&>(*own)
                                                 : static_cast<native::WatchObserver&>(observer));
  std::optional<native::ThreadLocalEngine> per_thread;
  if (copies) {
    per_thread.emplace(engine, *copies, [&](const native::ThreadLocalCopy& c) {
      expr_of[static_cast<std::size_t>(c.id)] = c.spec;
    });
  }
  native::Engine& watching = per_thread ? static_cast<native::Engine&>(*per_thread) : engine;
  WithProgress shown(watching, progress, [&] {
    return "hwarb: " + std::to_string(reporter.total()) + " hits, " +
           std::to_string(session.software_faults()) + " faults";
  });
  const bool spawned = inferior->spawned();
  const std::string mode = native::placement_mode(*infos);
  std::string method = session.describe();
  phases.mark("run");
  PhaseEngine phased(shown, phases);
  auto end = native::run_target(*inferior, phased);
  progress.clear();
  phases.end(end ? "\"target\":" + json_string(describe_end(*end, spawned)) : "");
  if (session.watchdog_error()) {
    std::cerr << "hwarb " << name << ": warning: the watchdog missed a change of the watch ("
              << session.watchdog_error()->to_string() << ")\n";
  }
  if (!end) return target_error(name, end.error());
  method += given_up_text(session);
  reporter.summary(mode, method, *end, spawned);
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
  if (args.count_option != nullptr && args.count_option->count() > 0) {
    auto count = parse_count_option("--count", args.count_text, "hits");
    if (!count) return usage_error(name, count.error().to_string());
    args.count = *count;
  }
  if (args.hardware && args.software) {
    return usage_error(name, "mode: --hardware and --software are exclusive");
  }
  if (args.all_cpus || !args.cpu_list.empty()) {
    if (args.timeline.given()) return usage_error(name, "--timeline: not with -a or -C");
    if (!condition.terms.empty() || args.count != 0) {
      return usage_error(name,
                         "-a/-C: --if and --count need each hit's values, which nothing "
                         "stopped on a CPU can give");
    }
    SystemWideArgs wide{.stat = args.stat,
                        .exprs = std::move(exprs),
                        .all_cpus = args.all_cpus,
                        .cpu_list = args.cpu_list,
                        .user_only = args.user_only,
                        .software = args.software,
                        .json = args.json,
                        .output = args.output,
                        .target = args.target};
    return run_system_wide(wide);
  }
  if (args.user_only) {
    return usage_error(name,
                       "--user: only with -a or -C (a process's watches never count the "
                       "kernel's accesses)");
  }
  if (auto t = check_target(args.target); !t) return usage_error(name, t.error().to_string());

  // Hardware or software: what the machine really does decides (the probe), unless --software
  // (or --hardware, which insists); then each watch is placed by the session.
  if (args.cpu_accesses && args.emulate_accesses) {
    return usage_error(name, "mode: --cpu-accesses and --emulate-accesses are exclusive");
  }
  std::optional<bool> cpu_accesses;
  if (args.cpu_accesses || args.emulate_accesses) cpu_accesses = args.cpu_accesses;
  const native::WatchSessionOptions options = watch_options(args.software, cpu_accesses);
  if (!args.software) {
    if (args.hardware && !options.hardware) {
      std::cerr << "hwarb " << name
                << ": --hardware: hardware mode not possible: " << options.no_hardware << "\n";
      return kExitFailure;
    }
  }
  auto output = Report::open(args.output);
  if (!output) return usage_error(name, output.error().to_string());
  auto opened = open_timeline(args.timeline);
  if (!opened) return usage_error(name, opened.error().to_string());
  std::optional<Timeline> timeline = std::move(*opened);
  const int status =
      watch_target(args, exprs, condition, options, *output, timeline ? &*timeline : nullptr);
  return finish_report(name, *output, finish_timeline(name, timeline, status));
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
                  "(default rw; length 4, the object's size, or 8 for x). SYMBOL as the source "
                  "spells it: ns::Class::member, (anonymous namespace)::x, ns::Box<int>::n, "
                  "members and elements g_cfg.limits[2].max, p->f (p read once)")
      ->required();
  if (!stat) {
    sub->add_option("--if", args->condition,
                    "report only hits where e.g. 'new==5', 'old!=0 && new>10'");
    args->count_option = sub->add_option("--count", args->count_text,
                                         "stop watching after N hits (the target runs on)")
                             ->type_name("N");
    add_timeline_option(*sub, args->timeline);
  }
  sub->add_flag("--software", args->software,
                "use the software path (page protection, int3) even where hardware hits work");
  sub->add_flag("--cpu-accesses", args->cpu_accesses,
                "software path: let the CPU make every access to a watched page (each stepped, "
                "slower) so that other users' breakpoints there see it; automatic when another "
                "process has perf events open or the program opens a breakpoint");
  sub->add_flag("--emulate-accesses", args->emulate_accesses,
                "software path: hwarb makes the loads and stores to watched pages itself even "
                "where another process has perf events open (faster; their breakpoints on those "
                "pages miss them) until the program opens a breakpoint of its own");
  sub->add_flag("--hardware", args->hardware,
                "insist on the hardware path (perf breakpoints): an error (exit 1) where this "
                "machine does not deliver their hits or the expressions need more registers");
  add_output_option(*sub, args->output);
  sub->add_flag("--json", args->json, "one JSON object per line");
  add_target_options(*sub, args->target);
  sub->add_flag("-a,--all-cpus", args->all_cpus,
                "every online CPU (per-CPU events: every task and the kernel), while a command "
                "runs or, with none, until Ctrl-C");
  sub->add_option("-C,--cpu", args->cpu_list, "these CPUs only, e.g. 0 or 0-1,3")
      ->type_name("LIST");
  sub->add_flag("--user", args->user_only,
                "with -a/-C: user-space accesses only (exclude_kernel, perf's :u)");
  sub->footer(
      "Target: -p PID | -t TID | -- COMMAND [ARGS]; with -a or -C: a command or none (symbols "
      "then from /proc/kallsyms). Exit status: 0 done (the target's own status is reported), 1 "
      "the target could not be traced or the report could not be written (the target still "
      "runs as usual), 2 usage error.");
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
