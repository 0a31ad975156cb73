// `hwarb trace [options] (-p PID | -t TID | -- COMMAND [ARGS])`: the taken branches of a real
// process, from -> to with symbols.
//
// Where the kernel has the intel_bts PMU (hardware mode, the default there; --hardware insists):
// one intel_bts perf event per thread, opened at the thread's clone stop before its first
// instruction, its records read from the AUX area (linux::IntelBtsTrace) whenever the kernel hands
// a stretch over (the loop polls the events' descriptors) and at every stop. Each record's kind is
// decoded from the instruction at `from`. The target runs at full speed apart from BTS itself;
// ptrace stops only at system calls (to drain before exit), thread events and signals. Loss is
// reported: stretches the kernel flagged truncated (its AUX area was full).
//
// Where the machine has no BTS (this one: no intel_bts, and PTRACE_SINGLEBLOCK steps single
// instructions), or with --software, branches are observed in software by linux::BranchTracer (int3
// on basic-block ends, branches emulated; see branch_tracer.h). Each observed branch is stored by a
// bts::SoftwareBts (one CPU, 64-bit records) exactly as the processor's BTS would store it, and
// sorted by a bts::Tracer into one task context (user branches, signal mode) of the traced
// process, as on a machine with BTS; the printed records are drained from that context — when
// the buffer nears full, before the process exits and at the end. BTS records hold from, to and
// a flag only: the thread and kind of each branch travel beside them in a queue in the same
// order (one context, one CPU: the order is the branch order).
//
// Output: one line per branch (human, --json or --perf-script), then a summary (stderr for the
// human format, the last JSON line for --json). Exit status: 0 traced (the target's own status is
// reported), 1 the target could not be traced, 2 usage (unknown symbols with near matches).
#include <sys/syscall.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <deque>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "commands.h"
#include "hwarb/base/format.h"
#include "hwarb/base/ids.h"
#include "hwarb/bts/software_bts.h"
#include "hwarb/bts/tracer.h"
#include "hwarb/linux/branch_tracer.h"
#include "hwarb/linux/intel_bts.h"
#include "hwarb/linux/probe.h"
#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/symbols.h"
#include "hwarb/x86/insn.h"
#include "session.h"

namespace hwarb::cli {
namespace {

// Context buffer: records held before a drain; the tracer drains at kCapacity - kDsRecords, so
// the context never fills (the full handler is the backstop).
constexpr std::size_t kDsRecords = 64;
constexpr std::size_t kCapacity = 64 * 1024;

enum class Format : std::uint8_t { kHuman, kJson, kPerfScript };

struct TraceArgs {
  bool json = false;
  bool perf_script = false;
  bool hardware = false;
  bool software = false;
  std::string filter;
  std::string start;
  TargetOptions target;
};

int usage_error(const std::string& message) {
  std::cerr << "hwarb trace: " << message << "\n";
  return kExitUsage;
}

int target_error(const Error& error) {
  std::cerr << "hwarb trace: " << error.to_string() << "\n";
  return kExitFailure;
}

// A symbol of the target; ENOENT (with near matches) when unknown. A spawned process is run to
// its entry point once (its libraries mapped) before a name is declared unknown.
Result<linux::Symbol> resolve(linux::Inferior& inferior, linux::SymbolTable& table,
                              bool& ran_to_entry, const std::string& name) {
  auto sym = table.find(name);
  if (!sym && sym.error().code() == ErrorCode::kNoEnt && !ran_to_entry && inferior.spawned() &&
      table.entry()) {
    ran_to_entry = true;
    if (auto r = run_to(inferior, *table.entry()); !r) return std::unexpected(r.error());
    auto fresh = linux::SymbolTable::load(inferior.pid());
    if (!fresh) return std::unexpected(fresh.error());
    table = std::move(*fresh);
    sym = table.find(name);
  }
  return sym;
}

std::string basename_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Symbols for addresses, cached; the table is reloaded (at most once per drain) when an
// address lies in no known module (a library mapped later).
class Symbolizer {
 public:
  struct Names {
    std::string described;  // "sym+0xoff (file.c:12)"
    std::string sym_off;    // "sym+0xoff" or "[unknown]"
    std::string dso;        // module path or "[unknown]"
  };

  Symbolizer(linux::Inferior& inferior, std::optional<linux::SymbolTable> table)
      : inferior_(inferior), table_(std::move(table)) {}

  void allow_reload() { reload_allowed_ = true; }

  const Names& names(std::uint64_t addr) {
    if (auto it = cache_.find(addr); it != cache_.end()) return it->second;
    linux::Location loc;
    if (table_) loc = table_->locate(addr);
    if (loc.module.empty() && reload_allowed_ && inferior_.alive()) {
      reload_allowed_ = false;
      if (auto fresh = linux::SymbolTable::load(inferior_.pid())) {
        table_ = std::move(*fresh);
        loc = table_->locate(addr);
      }
    }
    Names n;
    n.described = table_ ? table_->describe(addr) : hex(addr);
    n.sym_off = loc.symbol ? loc.symbol->name + "+" + hex(loc.offset) : "[unknown]";
    n.dso = loc.module.empty() ? "[unknown]" : loc.module;
    if (loc.module.empty() && inferior_.alive()) {
      // Not cached: the module may be mapped later.
      scratch_ = std::move(n);
      return scratch_;
    }
    return cache_.emplace(addr, std::move(n)).first->second;
  }

 private:
  linux::Inferior& inferior_;
  std::optional<linux::SymbolTable> table_;
  std::unordered_map<std::uint64_t, Names> cache_;
  Names scratch_;
  bool reload_allowed_ = true;
};

// The BTS side: software BTS facility, tracing context, and the printing of drained records.
class Output {
 public:
  Output(Format format, pid_t only_tid, std::string comm, Symbolizer& symbols)
      : format_(format),
        only_tid_(only_tid),
        comm_(std::move(comm)),
        symbols_(symbols),
        start_(std::chrono::steady_clock::now()) {}

  Result<void> open(pid_t pid) {
    bts::TracerConfig config;
    config.cpus = 1;
    config.format = x86::BtsFormat::k64;
    config.ds_records = kDsRecords;
    auto tracer = bts::Tracer::create(config, hardware_, nullptr);
    if (!tracer) return std::unexpected(tracer.error());
    tracer_ = std::move(*tracer);
    hardware_.set_interrupt_handler([this](CpuId cpu) { (void)tracer_->on_interrupt(cpu); });
    tracer_->set_full_handler([this](bts::ContextId, std::optional<TaskId>) { full_ = true; });
    const TaskId task{static_cast<TaskId::rep_type>(pid)};
    if (auto r = tracer_->on_switch(CpuId{0}, std::nullopt, task, 0); !r) return r;
    bts::ContextConfig context;
    context.task = task;
    context.flags = bts::kUser;
    context.mode = bts::BufferMode::kSignal;
    context.size = kCapacity * bts::kTraceRecordSize;
    auto id = tracer_->open(context);
    if (!id) return std::unexpected(id.error());
    context_ = *id;
    return {};
  }

  // One branch from the BranchTracer's sink.
  void branch(const linux::BranchRecord& r) {
    side_.push_back(Side{r.tid, r.kind, elapsed()});
    if (auto stored = hardware_.branch(CpuId{0}, r.from, r.to, false, false); !stored) {
      error_ = stored.error();
      side_.pop_back();
      return;
    }
    if (full_ || side_.size() >= kCapacity - kDsRecords) drain();
  }

  // Prints every record stored so far.
  void drain() {
    full_ = false;
    if (!tracer_) return;
    auto drained = tracer_->drain(context_);
    if (!drained) {
      error_ = drained.error();
      return;
    }
    symbols_.allow_reload();
    for (const bts::TraceRecord& rec : drained->records) {
      if (rec.kind != bts::RecordKind::kBranch || side_.empty()) continue;
      const Side side = side_.front();
      side_.pop_front();
      print(rec.from, rec.to, side);
    }
    // Records the full context dropped were the newest: their side entries follow.
    for (std::uint64_t i = 0; i < drained->lost && !side_.empty(); ++i) side_.pop_front();
    lost_ += drained->lost;
  }

  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  std::uint64_t printed() const { return printed_; }
  std::uint64_t lost() const { return lost_; }
  const std::map<x86::BranchKind, std::uint64_t>& by_kind() const { return by_kind_; }
  const std::optional<Error>& error() const { return error_; }

 private:
  struct Side {
    pid_t tid;
    x86::BranchKind kind;
    double time;
  };

  void print(std::uint64_t from, std::uint64_t to, const Side& side) {
    if (only_tid_ != 0 && side.tid != only_tid_) return;
    ++printed_;
    ++by_kind_[side.kind];
    char buf[96];
    switch (format_) {
      case Format::kJson:
        std::snprintf(buf, sizeof(buf), "\",\"kind\":\"%s\",\"tid\":%d}\n",
                      x86::branch_kind_name(side.kind), static_cast<int>(side.tid));
        std::fputs(("{\"event\":\"branch\",\"from\":\"" + hex(from) + "\",\"to\":\"" +
                    hex(to) + buf)
                       .c_str(),
                   stdout);
        break;
      case Format::kHuman: {
        const std::string f = symbols_.names(from).described;
        const std::string& t = symbols_.names(to).described;
        std::fprintf(stdout, "  %7d  %s => %s  %s\n", static_cast<int>(side.tid), f.c_str(),
                     t.c_str(), x86::branch_kind_name(side.kind));
        break;
      }
      case Format::kPerfScript: {
        const Symbolizer::Names f = symbols_.names(from);
        const Symbolizer::Names& t = symbols_.names(to);
        std::fprintf(stdout, "%16s %7d %12.6f:  branches:  %16llx %s (%s) => %16llx %s (%s)\n",
                     comm_.c_str(), static_cast<int>(side.tid), side.time,
                     static_cast<unsigned long long>(from), f.sym_off.c_str(), f.dso.c_str(),
                     static_cast<unsigned long long>(to), t.sym_off.c_str(), t.dso.c_str());
        break;
      }
    }
  }

  Format format_;
  pid_t only_tid_;
  std::string comm_;
  Symbolizer& symbols_;
  std::chrono::steady_clock::time_point start_;
  bts::SoftwareBts hardware_{1, x86::BtsFormat::k64};
  std::unique_ptr<bts::Tracer> tracer_;
  bts::ContextId context_{};
  bool full_ = false;
  std::deque<Side> side_;
  std::uint64_t printed_ = 0;
  std::uint64_t lost_ = 0;
  std::map<x86::BranchKind, std::uint64_t> by_kind_;
  std::optional<Error> error_;
};

// The BranchTracer as an Engine of run_target.
class TraceEngine final : public Engine {
 public:
  TraceEngine(linux::BranchTracer& tracer, Output& output, Progress& progress)
      : tracer_(tracer), output_(output), progress_(progress) {}

  Result<bool> handle(const linux::Event& event) override {
    // The process is about to end: print while its libraries can still be symbolized.
    if (event.kind == linux::EventKind::kSyscallEnter && event.syscall == SYS_exit_group) {
      output_.drain();
    }
    auto r = tracer_.handle(event);
    if (r && output_.error()) return std::unexpected(*output_.error());
    return r;
  }
  linux::Resume resume_mode() const override { return tracer_.resume_mode(); }
  Result<void> finish() override {
    progress_.clear();
    return tracer_.stop();
  }
  void tick() override {
    progress_.update("hwarb trace: " + std::to_string(tracer_.stats().taken) + " branches, " +
                     std::to_string(tracer_.stats().stops) + " stops");
  }

 private:
  linux::BranchTracer& tracer_;
  Output& output_;
  Progress& progress_;
};

// The kind of each hardware record, decoded from the instruction at its `from` (cached: a
// program's branches are few and taken often).
class Classifier {
 public:
  explicit Classifier(linux::Inferior& inferior) : inferior_(inferior) {}

  x86::BranchKind kind(std::uint64_t from) {
    if (auto it = cache_.find(from); it != cache_.end()) return it->second;
    auto insn = inferior_.decode_at(from);
    const x86::BranchKind kind = insn ? insn->branch : x86::BranchKind::kNone;
    cache_.emplace(from, kind);
    return kind;
  }

 private:
  linux::Inferior& inferior_;
  std::unordered_map<std::uint64_t, x86::BranchKind> cache_;
};

// Hardware mode: intel_bts events on every thread, drained into the Output.
class BtsEngine final : public Engine {
 public:
  BtsEngine(linux::IntelBtsTrace& bts, Output& output, Classifier& kinds,
            const linux::BranchTracerOptions& options, Progress& progress)
      : bts_(bts), output_(output), kinds_(kinds), options_(options), progress_(progress) {
    sink_ = [this](pid_t tid, const x86::BtsRecord& b) { take(tid, b); };
  }

  // Every thread of a process that is stopped (before it runs on).
  Result<void> add_threads(const std::vector<pid_t>& tids) {
    for (pid_t tid : tids) {
      if (auto r = add(tid); !r) return r;
    }
    return {};
  }

  Result<bool> handle(const linux::Event& event) override {
    switch (event.kind) {
      case linux::EventKind::kNewThread:
        if (auto r = add(event.tid); !r) return std::unexpected(r.error());
        break;
      case linux::EventKind::kThreadExit:
        if (bts_.traced(event.tid)) {
          if (auto r = bts_.remove_thread(event.tid, sink_); !r) return std::unexpected(r.error());
        }
        break;
      case linux::EventKind::kSyscallEnter:
        // The thread (or the process) is about to end: read while its code is still mapped.
        if (event.syscall == SYS_exit_group || event.syscall == SYS_exit) {
          if (auto r = drain(); !r) return std::unexpected(r.error());
          output_.drain();
        }
        break;
      default:
        break;
    }
    if (event.kind == linux::EventKind::kSyscallEnter) ++syscalls_;
    if (event.kind == linux::EventKind::kSignal) ++signals_;
    if (output_.error()) return std::unexpected(*output_.error());
    return false;
  }
  linux::Resume resume_mode() const override { return linux::Resume::kSyscall; }
  Result<void> finish() override {
    progress_.clear();
    // Each thread's records are drained as its event goes.
    Result<void> first;
    for (pid_t tid : bts_.threads()) {
      if (auto r = bts_.remove_thread(tid, sink_); !r && first) first = r;
    }
    return first;
  }
  void tick() override {
    (void)drain();
    progress_.update("hwarb trace: " + std::to_string(bts_.stats().records) +
                     " branches (intel_bts)");
  }
  std::vector<int> wake_fds() const override { return bts_.fds(); }
  bool wants_wakeups() const override { return true; }

  Result<void> drain() { return bts_.drain(sink_); }
  std::uint64_t syscalls() const { return syscalls_; }
  std::uint64_t signals() const { return signals_; }
  std::uint64_t taken() const { return taken_; }

 private:
  Result<void> add(pid_t tid) {
    if (auto r = bts_.add_thread(tid); !r) return r;
    if (!options_.start_at) started_.insert(tid);
    return {};
  }

  void take(pid_t tid, const x86::BtsRecord& b) {
    if (!started_.count(tid)) {
      // --start on an attached process: from the branch that arrives there.
      if (b.to != *options_.start_at) return;
      started_.insert(tid);
    }
    ++taken_;
    if (options_.only && (b.from < options_.only->first || b.from >= options_.only->second)) return;
    output_.branch(linux::BranchRecord{b.from, b.to, kinds_.kind(b.from), tid});
  }

  linux::IntelBtsTrace& bts_;
  Output& output_;
  Classifier& kinds_;
  linux::BranchTracerOptions options_;
  Progress& progress_;
  linux::IntelBtsTrace::Sink sink_;
  std::set<pid_t> started_;
  std::uint64_t syscalls_ = 0;
  std::uint64_t signals_ = 0;
  std::uint64_t taken_ = 0;
};

std::string target_json(const RunResult& end) {
  std::string out = "{\"pid\":" + std::to_string(end.pid);
  if (end.exited && end.signal == 0) out += ",\"exit\":" + std::to_string(end.status);
  if (end.signal != 0) out += ",\"signal\":" + std::to_string(end.signal);
  if (end.interrupted) out += ",\"interrupted\":true";
  return out + "}";
}

// What the summary says of the run, in either mode.
struct RunFacts {
  bool hardware = false;
  linux::BranchTracerStats stats;  // software: stops, not taken, ...; hardware: taken, syscalls,
                                   // signals only
  linux::IntelBtsStats bts;        // hardware
};

void summary(const TraceArgs& args, Format format, const Output& output, const RunFacts& facts,
             const RunResult& end, bool spawned, double seconds) {
  const linux::BranchTracerStats& stats = facts.stats;
  std::fflush(stdout);
  const double per_taken =
      stats.taken == 0 ? 0.0 : static_cast<double>(stats.stops) / static_cast<double>(stats.taken);
  if (format == Format::kJson) {
    std::string line = "{\"event\":\"summary\",\"branches\":" + std::to_string(output.printed()) +
                       ",\"by_kind\":{";
    bool first = true;
    for (const auto& [kind, n] : output.by_kind()) {
      if (!first) line += ",";
      first = false;
      line += "\"" + std::string(x86::branch_kind_name(kind)) + "\":" + std::to_string(n);
    }
    char ratio[32];
    std::snprintf(ratio, sizeof(ratio), "%.3f", per_taken);
    char secs[32];
    std::snprintf(secs, sizeof(secs), "%.3f", seconds);
    line += "}";
    if (!facts.hardware) {
      line += ",\"stops\":" + std::to_string(stats.stops) + ",\"stops_per_taken\":" + ratio +
              ",\"not_taken\":" + std::to_string(stats.not_taken);
    } else {
      line += ",\"truncations\":" + std::to_string(facts.bts.truncations) +
              ",\"aux_bytes\":" + std::to_string(facts.bts.bytes);
    }
    line += ",\"syscalls\":" + std::to_string(stats.syscalls) +
            ",\"signals\":" + std::to_string(stats.signals) +
            ",\"lost\":" + std::to_string(output.lost()) + ",\"seconds\":" + secs + ",\"mode\":\"" +
            (facts.hardware ? "hardware" : "software") + "\",\"target\":" + target_json(end) + "}";
    std::cout << line << "\n";
    std::cout.flush();
    return;
  }
  std::cerr << "hwarb trace: " << output.printed()
            << (output.printed() == 1 ? " branch" : " branches");
  if (!output.by_kind().empty()) {
    bool first = true;
    for (const auto& [kind, n] : output.by_kind()) {
      std::cerr << (first ? " (" : ", ") << x86::branch_kind_name(kind) << " " << n;
      first = false;
    }
    std::cerr << ")";
  }
  char line[200];
  const double rate = seconds > 0 ? static_cast<double>(stats.taken) / seconds : 0.0;
  if (facts.hardware) {
    std::snprintf(line, sizeof(line),
                  " in %.3f s (%.0f branches/s, intel_bts), %llu system calls, %llu signals",
                  seconds, rate, static_cast<unsigned long long>(stats.syscalls),
                  static_cast<unsigned long long>(stats.signals));
  } else {
    std::snprintf(line, sizeof(line),
                  " in %.3f s (%.0f branches/s), %.2f stops per taken branch, %llu not taken, "
                  "%llu system calls, %llu signals",
                  seconds, rate, per_taken, static_cast<unsigned long long>(stats.not_taken),
                  static_cast<unsigned long long>(stats.syscalls),
                  static_cast<unsigned long long>(stats.signals));
  }
  std::cerr << line;
  if (output.lost() != 0) std::cerr << ", " << output.lost() << " records LOST";
  if (facts.bts.truncations != 0) {
    std::cerr << ", the AUX area overflowed " << facts.bts.truncations
              << " times (branches are missing there)";
  }
  if (facts.bts.lost != 0) std::cerr << ", " << facts.bts.lost << " perf records LOST";
  if (stats.undecodable != 0) std::cerr << ", " << stats.undecodable << " blocks undecodable";
  if (stats.ambiguous != 0) {
    std::cerr << ", " << stats.ambiguous
              << " arrivals from untraced code (branches may be missing)";
  }
  std::cerr << "; " << target_name(args.target) << " " << describe_end(end, spawned) << "\n";
}

// Hardware mode (see the file comment). The process is stopped: spawned at its first
// instruction, or attached.
int run_hardware(const TraceArgs& args, Format format, linux::Inferior& inferior, Output& output,
                 linux::BranchTracerOptions options) {
  const bool spawned = inferior.spawned();
  auto bts = linux::IntelBtsTrace::open();
  if (!bts) return target_error(bts.error());
  if (spawned && options.start_at) {
    // Straight to the start: nothing before it is traced (nor stored).
    if (auto r = run_to(inferior, *options.start_at); !r) return target_error(r.error());
    options.start_at.reset();
  }
  Classifier kinds(inferior);
  Progress progress;
  BtsEngine engine(*bts, output, kinds, options, progress);
  if (auto r = engine.add_threads(inferior.threads()); !r) return target_error(r.error());
  std::cerr << "hwarb trace: hardware branch tracing (intel_bts, PMU type " << bts->type()
            << ", one event per thread)\n";
  const auto began = std::chrono::steady_clock::now();
  auto end = run_target(inferior, engine);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  progress.clear();
  (void)engine.drain();
  output.drain();
  if (!end) return target_error(end.error());
  if (output.error()) return target_error(*output.error());
  RunFacts facts;
  facts.hardware = true;
  facts.stats.taken = engine.taken();
  facts.stats.syscalls = engine.syscalls();
  facts.stats.signals = engine.signals();
  facts.bts = bts->stats();
  summary(args, format, output, facts, *end, spawned, seconds);
  return kExitOk;
}

int run_trace(TraceArgs& args) {
  if (auto t = check_target(args.target); !t) return usage_error(t.error().to_string());
  if (args.json && args.perf_script) {
    return usage_error("format: --json and --perf-script are exclusive");
  }
  if (args.hardware && args.software) {
    return usage_error("mode: --hardware and --software are exclusive");
  }
  // Hardware where intel_bts exists (or when asked for: then its absence is the error).
  bool hardware = false;
  std::string why_software = "--software";
  if (!args.software) {
    auto type = linux::intel_bts_type();
    if (type) {
      hardware = true;
    } else if (args.hardware) {
      return target_error(type.error().with_context("--hardware"));
    } else {
      why_software = type.error().code() == ErrorCode::kNoEnt ? "no BTS on this machine"
                                                              : type.error().to_string();
    }
  }
  const Format format = args.json          ? Format::kJson
                        : args.perf_script ? Format::kPerfScript
                                           : Format::kHuman;

  auto inferior = open_target(args.target);
  if (!inferior) return target_error(inferior.error());
  const bool spawned = inferior->spawned();
  const pid_t pid = inferior->pid();
  auto table = linux::SymbolTable::load(pid);
  if (!table) return target_error(table.error());

  bool ran_to_entry = false;
  linux::BranchTracerOptions options;
  if (!args.filter.empty()) {
    auto sym = resolve(*inferior, *table, ran_to_entry, args.filter);
    if (!sym) {
      if (sym.error().code() == ErrorCode::kNoEnt) {
        return usage_error(sym.error().with_context("--filter").to_string());
      }
      return target_error(sym.error());
    }
    if (!sym->function || sym->size == 0) {
      return usage_error("--filter: '" + args.filter + "' is not a function with a size");
    }
    options.only = std::pair{sym->address, sym->address + sym->size};
  }
  if (args.start == "entry") {
    // From the first instruction (or, attached, from where the threads are).
  } else if (!args.start.empty()) {
    auto sym = resolve(*inferior, *table, ran_to_entry, args.start);
    if (!sym) {
      if (sym.error().code() == ErrorCode::kNoEnt) {
        return usage_error(sym.error().with_context("--start").to_string());
      }
      return target_error(sym.error());
    }
    options.start_at = sym->address;
  } else if (spawned && !options.only) {
    // Default: from main (the program's own code), else from the executable's entry point.
    if (auto main_sym = table->find("main"); main_sym && main_sym->function) {
      options.start_at = main_sym->address;
    } else if (table->entry()) {
      options.start_at = *table->entry();
    }
  }

  std::string comm = spawned ? basename_of(args.target.command[0]) : std::to_string(pid);
  if (auto exe = linux::executable_path(pid)) comm = basename_of(*exe);
  if (comm.size() > 15) comm.resize(15);  // as the kernel's comm
  Symbolizer symbols(*inferior, std::move(*table));
  Output output(format, args.target.tid, comm, symbols);
  if (auto r = output.open(pid); !r) return target_error(r.error());
  if (hardware) return run_hardware(args, format, *inferior, output, options);
  auto tracer = linux::BranchTracer::start(
      *inferior, options, [&output](const linux::BranchRecord& r) { output.branch(r); });
  if (!tracer) return target_error(tracer.error());

  std::cerr << "hwarb trace: software branch tracing (" << why_software << ")\n";

  Progress progress;
  TraceEngine engine(*tracer, output, progress);
  const auto began = std::chrono::steady_clock::now();
  auto end = run_target(*inferior, engine);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  progress.clear();
  output.drain();
  if (!end) return target_error(end.error());
  if (output.error()) return target_error(*output.error());
  summary(args, format, output, RunFacts{false, tracer->stats(), {}}, *end, spawned, seconds);
  return kExitOk;
}

}  // namespace

CommandRunner setup_trace(CLI::App& app) {
  auto args = std::make_shared<TraceArgs>();
  CLI::App* sub = app.add_subcommand(
      "trace", "record the taken branches (from => to, with symbols) of a real process");
  sub->add_flag("--json", args->json,
                "one JSON object per line: branches, then a summary with the counts by kind");
  sub->add_flag("--perf-script", args->perf_script,
                "lines as `perf script` prints branch samples: COMM TID TIME: branches: FROM "
                "SYM+OFF (DSO) => TO SYM+OFF (DSO)");
  sub->add_option("--filter", args->filter,
                  "only branches taken inside FUNCTION (int3s are planted there only)");
  sub->add_option("--start", args->start,
                  "begin when execution reaches SYMBOL (default for a command: main, else the "
                  "entry point; 'entry': from the first instruction)");
  sub->add_flag("--hardware", args->hardware,
                "trace with intel_bts (the default where the kernel has it); an error elsewhere");
  sub->add_flag("--software", args->software, "trace in software even where intel_bts exists");
  add_target_options(*sub, args->target);
  sub->footer(
      "Target: -p PID | -t TID | -- COMMAND [ARGS]. With intel_bts, the hardware records every "
      "taken branch into perf's AUX area; without it, branches are found in software "
      "(int3 on basic-block ends, each branch emulated: about one stop per taken branch).\n"
      "Exit status: 0 traced (the target's own status is reported), 1 the target could not be "
      "traced, 2 usage error.");
  return [args]() { return run_trace(*args); };
}

}  // namespace hwarb::cli
