// tools/hwarb/src/timeline.h — `--timeline FILE` of `hwarb watch` and `hwarb trace`: the run as
// Chrome trace-event JSON (its JSON array format, which Perfetto and chrome://tracing open).
//
// Contract:
//  - open() creates (or truncates) FILE before the target runs; a FILE that cannot be created is
//    an Error naming the option and the errno ("--timeline: file: create PATH: ENOENT (...)"),
//    which the commands report as a usage error (exit 2) without running anything.
//  - Tracks: one per process and one per thread, named once each by process_name / thread_name
//    metadata events ("ph":"M"); hwarb's own phases (attach, arm, run, detach) are complete
//    events on a process track of their own, "hwarb", whose pid kHwarbPid no real process has
//    (Linux's pids stay below PID_MAX_LIMIT = 2^22).
//  - Events: instant() an instant event ("ph":"i", thread scope), slice() a complete event
//    ("ph":"X"), both with their arguments as given (a JSON object's members, already encoded).
//    Timestamps are microseconds since open(), written with nanosecond precision.
//  - At most `cap` events are written (metadata not counted); the ones past it are counted
//    (dropped()), and close() then adds a note: an instant event "timeline capped" on hwarb's
//    track, and the count in hwarb's process name. The caller says so on stderr.
//  - Writes are buffered and checked; the first failure is kept and close() returns it (the run
//    goes on, as with the report of -o).
// Thread-safety: none (the session's one thread writes it).
#pragma once

#include <sys/types.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/session.h"
#include "hwarb/x86/insn.h"

namespace hwarb::cli {

class Timeline {
 public:
  static constexpr int kHwarbPid = 1 << 22;  // PID_MAX_LIMIT: no process has it
  static constexpr std::uint64_t kDefaultCap = 200'000;

  static Result<Timeline> open(const std::string& path, std::uint64_t cap = kDefaultCap);
  Timeline(Timeline&& other) noexcept;
  Timeline& operator=(Timeline&&) = delete;
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;
  ~Timeline();

  // Microseconds since open().
  double now_us() const;

  // Names a process or thread track once (later calls for the same one do nothing).
  void process(int pid, std::string_view name);
  void thread(int pid, int tid, std::string_view name);
  // Names thread `tid` of process `pid` after its comm (/proc), "tid N" when that is gone; once.
  void thread_of(pid_t pid, pid_t tid);

  // `args`: the members of the event's args object, encoded ("\"a\":1,\"b\":\"x\""), or empty.
  void instant(int pid, int tid, std::string_view name, std::string_view category, double ts_us,
               std::string_view args = {});
  void slice(int pid, int tid, std::string_view name, std::string_view category, double begin_us,
             double end_us, std::string_view args = {});
  // One of hwarb's own phases, on its track.
  void phase(std::string_view name, double begin_us, double end_us, std::string_view args = {});

  std::uint64_t written() const { return written_; }
  std::uint64_t dropped() const { return dropped_; }
  std::uint64_t cap() const { return cap_; }
  const std::string& path() const { return path_; }

  // Writes the note (when capped) and the closing bracket, closes FILE; the first failure of
  // any write ("--timeline PATH: ENOSPC: ..."). Once only.
  Result<void> close();

 private:
  Timeline(std::FILE* file, std::string path, std::uint64_t cap);
  bool admit();  // counts one event; false past the cap
  void raw(std::string_view event);

  std::FILE* file_ = nullptr;
  std::string path_;
  std::uint64_t cap_;
  std::uint64_t written_ = 0;
  std::uint64_t dropped_ = 0;
  bool first_ = true;
  std::optional<Error> error_;
  std::chrono::steady_clock::time_point start_;
  std::set<int> processes_;
  std::set<std::pair<int, int>> threads_;
  double last_us_ = 0;
};

// Call slices of a branch trace: per thread a stack of the functions entered, each a complete
// event ("X", category "call") from its entry to its return. A thread's first branch opens the
// function it comes from; a call opens the callee; a return closes the innermost function and,
// when none is left open, opens the one returned to; a jump into another function (a tail call,
// a PLT stub's jump) closes the current one and opens that one. Depth is bounded (kMaxDepth):
// deeper calls are counted and their returns matched, not drawn. finish() closes every open
// function at the given time.
class CallSlices {
 public:
  enum class Kind : std::uint8_t { kCall, kReturn, kJump, kOther };
  static constexpr std::size_t kMaxDepth = 256;

  CallSlices(Timeline& timeline, int pid) : timeline_(timeline), pid_(pid) {}
  void branch(int tid, double ts_us, Kind kind, std::string_view from_fn, std::string_view to_fn);
  void finish(double ts_us);

 private:
  struct Open {
    std::string name;
    double begin;
  };
  struct Stack {
    std::vector<Open> open;
    std::size_t hidden = 0;  // calls past kMaxDepth not yet returned
  };
  void close_top(int tid, Stack& s, double ts);

  Timeline& timeline_;
  int pid_;
  std::unordered_map<int, Stack> stacks_;
};

// hwarb's phases on the timeline, one after the other: mark(NAME) ends the current phase now
// and begins NAME; end() ends the last one (with `args`). Nothing without a timeline.
class RunPhases {
 public:
  explicit RunPhases(Timeline* timeline) : timeline_(timeline) {}
  void mark(std::string_view name);
  void end(std::string_view args = {});
  Timeline* timeline() const { return timeline_; }

 private:
  Timeline* timeline_;
  std::string current_;
  double begin_ = 0;
};

// `engine` with the phase "detach" marked when run_target has it undo the watch (finish()).
class PhaseEngine final : public native::ForwardingEngine {
 public:
  PhaseEngine(native::Engine& engine, RunPhases& phases)
      : ForwardingEngine(engine), phases_(phases) {}
  Result<void> finish() override {
    phases_.mark("detach");
    return engine_.finish();
  }

 private:
  RunPhases& phases_;
};

// One hit of a watch on the timeline: an instant event on its thread's track, named after the
// expression, with the access, the address, the instruction (symbol+offset and file:line when
// known) and the values (old -> new) in its args; the thread named from /proc the first time.
struct TimelineHit {
  pid_t pid = 0;
  pid_t tid = 0;
  double ts_us = 0;
  std::string_view expr = {};
  std::string_view access = {};
  std::uint64_t ip = 0;
  std::uint64_t addr = 0;
  std::string_view instruction = {};
  std::string_view old_value = {};  // empty: not shown (execution, unknown)
  std::string_view new_value = {};
  std::string_view syscall = {};
};
void record_hit(Timeline& timeline, const TimelineHit& hit);

// Names process `pid`'s track after its comm (/proc), "pid N" when that is gone; once.
void name_process(Timeline& timeline, pid_t pid);

// --timeline FILE and --timeline-max N of a command.
struct TimelineArgs {
  std::string path;
  std::string max_text;
  CLI::Option* max_option = nullptr;
  bool given() const { return !path.empty() || (max_option != nullptr && max_option->count() > 0); }
};
// Adds --timeline FILE and --timeline-max N (the cap, default Timeline::kDefaultCap) to `sub`.
void add_timeline_option(CLI::App& sub, TimelineArgs& args);
// The timeline the options ask for (nullopt without --timeline): open()'s errors, and EINVAL
// naming --timeline-max when N is not a count of at least 1 or comes without --timeline.
Result<std::optional<Timeline>> open_timeline(const TimelineArgs& args);
// Closes `timeline` (when there is one) after a run whose exit status is `status`: says on stderr
// that it was capped ("hwarb watch: --timeline FILE: capped at N events; M more not written") or
// could not be written ("hwarb watch: --timeline FILE: ENOSPC: ..."), the latter a failure
// (kExitFailure unless `status` already is one). Returns the exit status.
int finish_timeline(const char* command, std::optional<Timeline>& timeline, int status);

// What a taken branch of `kind` does to the call slices: calls, returns, jumps (direct,
// conditional, indirect); the rest (system calls, interrupts, far branches) nothing.
CallSlices::Kind call_kind(x86::BranchKind kind);

// A function's name from "name+0x1c" (the symbolizer's sym+off), else the text itself.
std::string_view function_of(std::string_view sym_off);

}  // namespace hwarb::cli
