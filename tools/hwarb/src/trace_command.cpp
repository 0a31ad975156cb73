// `hwarb trace [options] (-p PID | -t TID | -- COMMAND [ARGS])`: the taken branches of a real
// process, from -> to with symbols. The tracing is linux/trace's (trace_engine.h); this file
// chooses the mode, resolves --filter and --start, and prints.
//
// Where the kernel has the intel_bts PMU (hardware mode, the default there; --hardware insists):
// one intel_bts perf event per thread, its records read from the AUX area whenever the kernel
// hands a stretch over and at every stop (native::BtsTraceEngine). The target runs at full speed
// apart from BTS itself; ptrace stops only at system calls, thread events and signals. Loss is
// reported: stretches the kernel flagged truncated (its AUX area was full).
//
// Where the machine has no BTS, or with --software, branches are observed in software by
// native::BranchTracer (int3 on basic-block ends, branches emulated; see branch_tracer.h). Either
// way each branch goes through a native::BranchStore, which keeps it exactly as the processor's
// BTS would, and the printed records are drained from it — when its buffer nears full, before
// the process exits and at the end.
//
// Output: one line per branch (human, --json or --perf-script), then a summary (stderr for the
// human format, the last JSON line for --json); with -o FILE all of it goes to FILE, the
// target's own output alone to stdout. JSON branches carry the symbols of both ends as the human
// format prints them; --perf-script lines are perf script's for branch samples (with its period
// column; PLT stubs are NAME@plt as perf names them). Exit status: 0 traced (the target's own
// status is reported), 1 the target could not be traced or the report could not be written (the
// target still runs as usual), 2 usage (unknown symbols with near matches).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "commands.h"
#include "hwarb/base/format.h"
#include "hwarb/linux/branch_tracer.h"
#include "hwarb/linux/intel_bts.h"
#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/session.h"
#include "hwarb/linux/symbols.h"
#include "hwarb/linux/trace_engine.h"
#include "hwarb/x86/insn.h"
#include "session.h"
#include "timeline.h"

namespace hwarb::cli {
namespace {

enum class Format : std::uint8_t { kHuman, kJson, kPerfScript };

struct TraceArgs {
  bool json = false;
  bool perf_script = false;
  bool hardware = false;
  bool software = false;
  std::string filter;
  std::string start;
  std::string output;
  TimelineArgs timeline;  // --timeline FILE, --timeline-max N
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

  Symbolizer(native::Inferior& inferior, std::optional<native::SymbolTable> table)
      : inferior_(inferior), table_(std::move(table)) {}

  void allow_reload() { reload_allowed_ = true; }

  const Names& names(std::uint64_t addr) {
    if (auto it = cache_.find(addr); it != cache_.end()) return it->second;
    native::Location loc;
    if (table_) loc = table_->locate(addr);
    if (loc.module.empty() && reload_allowed_ && inferior_.alive()) {
      reload_allowed_ = false;
      if (auto fresh = native::SymbolTable::load(inferior_.pid())) {
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
  native::Inferior& inferior_;
  std::optional<native::SymbolTable> table_;
  std::unordered_map<std::uint64_t, Names> cache_;
  Names scratch_;
  bool reload_allowed_ = true;
};

// The printing of the branches drained from the store, with the counts the summary gives.
class Output {
 public:
  Output(Format format, pid_t only_tid, std::string comm, Symbolizer& symbols, const Report& report)
      : format_(format),
        only_tid_(only_tid),
        comm_(std::move(comm)),
        symbols_(symbols),
        report_(report) {}

  // One drain of the store.
  void print(std::span<const native::StoredBranch> batch) {
    symbols_.allow_reload();
    for (const native::StoredBranch& b : batch) print(b);
    report_.flush();
  }

  std::uint64_t printed() const { return printed_; }
  const Report& report() const { return report_; }
  const std::map<x86::BranchKind, std::uint64_t>& by_kind() const { return by_kind_; }
  // Each branch also into `calls`, at `base_us` (when the store was opened) + its time.
  void set_calls(CallSlices* calls, double base_us) {
    calls_ = calls;
    calls_base_us_ = base_us;
  }

 private:
  void print(const native::StoredBranch& b) {
    if (only_tid_ != 0 && b.tid != only_tid_) return;
    ++printed_;
    ++by_kind_[b.kind];
    if (calls_ != nullptr) {
      const std::string from(function_of(symbols_.names(b.from).sym_off));
      const std::string to(function_of(symbols_.names(b.to).sym_off));
      calls_->branch(b.tid, calls_base_us_ + b.time * 1e6, call_kind(b.kind), from, to);
    }
    switch (format_) {
      case Format::kJson: {
        const std::string f = symbols_.names(b.from).described;
        const std::string& t = symbols_.names(b.to).described;
        const std::string line =
            "{\"event\":\"branch\",\"from\":\"" + hex(b.from) + "\",\"to\":\"" + hex(b.to) +
            "\",\"from_sym\":" + json_string(f) + ",\"to_sym\":" + json_string(t) + ",\"kind\":\"" +
            x86::branch_kind_name(b.kind) + "\",\"tid\":" + std::to_string(b.tid) + "}\n";
        report_.write(line);
        break;
      }
      case Format::kHuman: {
        const std::string f = symbols_.names(b.from).described;
        const std::string& t = symbols_.names(b.to).described;
        report_.print("  %7d  %s => %s  %s\n", static_cast<int>(b.tid), f.c_str(), t.c_str(),
                      x86::branch_kind_name(b.kind));
        break;
      }
      case Format::kPerfScript: {
        // perf script's fields for a branch sample: COMM TID TIME: PERIOD EVENT: IP SYM+OFF
        // (DSO) => ADDR SYM+OFF (DSO); every record is one branch (period 1).
        const Symbolizer::Names f = symbols_.names(b.from);
        const Symbolizer::Names& t = symbols_.names(b.to);
        report_.print("%16s %7d %12.6f: %10d branches: %16llx %s (%s) => %16llx %s (%s)\n",
                      comm_.c_str(), static_cast<int>(b.tid), b.time, 1,
                      static_cast<unsigned long long>(b.from), f.sym_off.c_str(), f.dso.c_str(),
                      static_cast<unsigned long long>(b.to), t.sym_off.c_str(), t.dso.c_str());
        break;
      }
    }
  }

  Format format_;
  pid_t only_tid_;
  std::string comm_;
  Symbolizer& symbols_;
  const Report& report_;
  std::uint64_t printed_ = 0;
  std::map<x86::BranchKind, std::uint64_t> by_kind_;
  CallSlices* calls_ = nullptr;
  double calls_base_us_ = 0;
};

std::string target_json(const native::RunResult& end) {
  std::string out = "{\"pid\":" + std::to_string(end.pid);
  if (end.exited && end.signal == 0) out += ",\"exit\":" + std::to_string(end.status);
  if (end.signal != 0) out += ",\"signal\":" + std::to_string(end.signal);
  if (end.interrupted) out += ",\"interrupted\":true";
  return out + "}";
}

// What the summary says of the run, in either mode.
struct RunFacts {
  bool hardware = false;
  native::BranchTracerStats stats;  // software: stops, not taken, ...; hardware: taken, syscalls,
                                    // signals only
  native::IntelBtsStats bts;        // hardware
};

void summary(const TraceArgs& args, Format format, const Output& output, std::uint64_t lost,
             const RunFacts& facts, const native::RunResult& end, bool spawned, double seconds) {
  const native::BranchTracerStats& stats = facts.stats;
  output.report().flush();
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
            ",\"signals\":" + std::to_string(stats.signals) + ",\"lost\":" + std::to_string(lost) +
            ",\"seconds\":" + secs + ",\"mode\":\"" + (facts.hardware ? "hardware" : "software") +
            "\",\"target\":" + target_json(end) + "}";
    output.report().line(line);
    return;
  }
  // The human summary: stderr, or the file of -o.
  std::ostringstream text;
  text << "hwarb trace: " << output.printed() << (output.printed() == 1 ? " branch" : " branches");
  if (!output.by_kind().empty()) {
    bool first = true;
    for (const auto& [kind, n] : output.by_kind()) {
      text << (first ? " (" : ", ") << x86::branch_kind_name(kind) << " " << n;
      first = false;
    }
    text << ")";
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
  text << line;
  if (lost != 0) text << ", " << lost << " records LOST";
  if (facts.bts.truncations != 0) {
    text << ", the AUX area overflowed " << facts.bts.truncations
         << " times (branches are missing there)";
  }
  if (facts.bts.lost != 0) text << ", " << facts.bts.lost << " perf records LOST";
  if (stats.undecodable != 0) text << ", " << stats.undecodable << " blocks undecodable";
  if (stats.ambiguous != 0) {
    text << ", " << stats.ambiguous << " arrivals from untraced code (branches may be missing)";
  }
  text << "; " << target_name(args.target) << " " << describe_end(end, spawned) << "\n";
  output.report().summary(text.str());
}

// Hardware mode (see the file comment). The process is stopped: spawned at its first
// instruction, or attached.
int run_hardware(const TraceArgs& args, Format format, native::Inferior& inferior, Output& output,
                 native::BranchStore& store, native::BranchTracerOptions options,
                 RunPhases& phases) {
  const bool spawned = inferior.spawned();
  auto bts = native::IntelBtsTrace::open();
  if (!bts) return target_error(bts.error());
  if (spawned && options.start_at) {
    // Straight to the start: nothing before it is traced (nor stored).
    if (auto r = native::run_to(inferior, *options.start_at); !r) return target_error(r.error());
    options.start_at.reset();
  }
  native::BtsTraceEngine engine(inferior, *bts, store, options);
  if (auto r = engine.add_threads(inferior.threads()); !r) return target_error(r.error());
  std::cerr << "hwarb trace: hardware branch tracing (intel_bts, PMU type " << bts->type()
            << ", one event per thread)\n";
  Progress progress;
  WithProgress shown(engine, progress, [&] {
    return "hwarb trace: " + std::to_string(bts->stats().records) + " branches (intel_bts)";
  });
  const auto began = std::chrono::steady_clock::now();
  phases.mark("run");
  PhaseEngine phased(shown, phases);
  auto end = native::run_target(inferior, phased);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  progress.clear();
  ignore_error(engine.drain(), "the run's end is reported; records not read are counted as lost");
  store.drain();
  if (!end) return target_error(end.error());
  if (store.error()) return target_error(*store.error());
  RunFacts facts;
  facts.hardware = true;
  facts.stats.taken = engine.taken();
  facts.stats.syscalls = engine.syscalls();
  facts.stats.signals = engine.signals();
  facts.bts = bts->stats();
  summary(args, format, output, store.lost(), facts, *end, spawned, seconds);
  return kExitOk;
}

// A symbol for --filter or --start: a usage error (exit 2) when unknown, with where it was looked
// up for a spawned command (lookup_note).
int symbol_error(const Error& error, const char* option, const TargetOptions& target,
                 const native::Inferior& inferior) {
  if (error.code() != ErrorCode::kNoEnt) return target_error(error);
  const int status = usage_error(error.with_context(option).to_string());
  if (inferior.spawned()) {
    const std::string note = lookup_note(target, inferior.pid(), error);
    if (!note.empty()) std::cerr << "hwarb trace: note: " << note << "\n";
  }
  return status;
}

// `hwarb trace` once the report is open (run_trace): the exit status of the run, to which
// finish_report adds the report's own failure.
int trace_target(const TraceArgs& args, Format format, bool hardware,
                 const std::string& why_software, const Report& report, Timeline* timeline) {
  RunPhases phases(timeline);
  phases.mark("attach");
  auto inferior = native::open_target(args.target);
  if (!inferior) return target_error(inferior.error());
  const bool spawned = inferior->spawned();
  const pid_t pid = inferior->pid();
  auto table = native::SymbolTable::load(pid);
  if (!table) return target_error(table.error());

  bool ran_to_entry = false;
  native::BranchTracerOptions options;
  if (!args.filter.empty()) {
    auto sym = native::find_symbol(*inferior, *table, ran_to_entry, args.filter);
    if (!sym) return symbol_error(sym.error(), "--filter", args.target, *inferior);
    if (!sym->function || sym->size == 0) {
      return usage_error("--filter: '" + args.filter + "' is not a function with a size");
    }
    options.only = std::pair{sym->address, sym->address + sym->size};
  }
  if (args.start == "entry") {
    // From the first instruction (or, attached, from where the threads are).
  } else if (!args.start.empty()) {
    auto sym = native::find_symbol(*inferior, *table, ran_to_entry, args.start);
    if (!sym) return symbol_error(sym.error(), "--start", args.target, *inferior);
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
  if (auto exe = native::executable_path(pid)) comm = basename_of(*exe);
  if (comm.size() > 15) comm.resize(15);  // as the kernel's comm
  Symbolizer symbols(*inferior, std::move(*table));
  Output output(format, args.target.tid, comm, symbols, report);
  phases.mark("arm");
  std::optional<CallSlices> calls;
  if (timeline != nullptr) {
    timeline->process(pid, comm);
    calls.emplace(*timeline, pid);
    output.set_calls(&*calls, timeline->now_us());
  }
  // The open call slices end where the run ends (or the trace stopped).
  struct CloseCalls {
    std::optional<CallSlices>& calls;
    Timeline* timeline;
    ~CloseCalls() {
      if (calls) calls->finish(timeline->now_us());
    }
  } close_calls{calls, timeline};
  auto store = native::BranchStore::open(
      pid, [&output](std::span<const native::StoredBranch> batch) { output.print(batch); });
  if (!store) return target_error(store.error());
  if (hardware) {
    const int status = run_hardware(args, format, *inferior, output, **store, options, phases);
    phases.end();
    return status;
  }
  auto tracer = native::BranchTracer::start(
      *inferior, options, [&store](const native::BranchRecord& r) { (*store)->add(r); });
  if (!tracer) return target_error(tracer.error());

  std::cerr << "hwarb trace: software branch tracing (" << why_software << ")\n";

  native::SoftTraceEngine engine(*tracer, **store);
  Progress progress;
  WithProgress shown(engine, progress, [&] {
    return "hwarb trace: " + std::to_string(tracer->stats().taken) + " branches, " +
           std::to_string(tracer->stats().stops) + " stops";
  });
  const auto began = std::chrono::steady_clock::now();
  phases.mark("run");
  PhaseEngine phased(shown, phases);
  auto end = native::run_target(*inferior, phased);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  progress.clear();
  (*store)->drain();
  phases.end(end ? "\"target\":" + json_string(describe_end(*end, spawned)) : "");
  if (!end) return target_error(end.error());
  if ((*store)->error()) return target_error(*(*store)->error());
  summary(args, format, output, (*store)->lost(), RunFacts{false, tracer->stats(), {}}, *end,
          spawned, seconds);
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
    auto type = native::intel_bts_type();
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
  auto report = Report::open(args.output);
  if (!report) return usage_error(report.error().to_string());
  auto opened = open_timeline(args.timeline);
  if (!opened) return usage_error(opened.error().to_string());
  std::optional<Timeline> timeline = std::move(*opened);
  const int status =
      trace_target(args, format, hardware, why_software, *report, timeline ? &*timeline : nullptr);
  return finish_report("trace", *report, finish_timeline("trace", timeline, status));
}

}  // namespace

CommandRunner setup_trace(CLI::App& app) {
  auto args = std::make_shared<TraceArgs>();
  CLI::App* sub = app.add_subcommand(
      "trace", "record the taken branches (from => to, with symbols) of a real process");
  sub->add_flag("--json", args->json,
                "one JSON object per line: branches, then a summary with the counts by kind");
  sub->add_flag("--perf-script", args->perf_script,
                "lines as `perf script` prints branch samples: COMM TID TIME: PERIOD branches: "
                "FROM SYM+OFF (DSO) => TO SYM+OFF (DSO)");
  sub->add_option("--filter", args->filter,
                  "only branches taken inside FUNCTION (int3s are planted there only); C++ "
                  "names as c++filt writes them, e.g. ns::Counter::bump or ns::Counter::bump()");
  sub->add_option("--start", args->start,
                  "begin when execution reaches SYMBOL (default for a command: main, else the "
                  "entry point; 'entry': from the first instruction)");
  sub->add_flag("--hardware", args->hardware,
                "trace with intel_bts (the default where the kernel has it); an error elsewhere");
  sub->add_flag("--software", args->software, "trace in software even where intel_bts exists");
  add_output_option(*sub, args->output);
  add_timeline_option(*sub, args->timeline);
  add_target_options(*sub, args->target);
  sub->footer(
      "Target: -p PID | -t TID | -- COMMAND [ARGS]. With intel_bts, the hardware records every "
      "taken branch into perf's AUX area; without it, branches are found in software "
      "(int3 on basic-block ends, each branch emulated: about one stop per taken branch).\n"
      "Exit status: 0 traced (the target's own status is reported), 1 the target could not be "
      "traced or the report could not be written (the target still runs as usual), 2 usage "
      "error.");
  return [args]() { return run_trace(*args); };
}

}  // namespace hwarb::cli
