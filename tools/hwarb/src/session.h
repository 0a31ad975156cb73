// tools/hwarb/src/session.h — what `hwarb watch`, `stat` and `trace` share on the command line:
// the target options (-p PID | -t TID | -- CMD ARGS, --aslr) and their check, where the report
// goes (-o FILE), the wording of a target and of how it ended, and the progress line. The session
// itself (starting or attaching, the event loop, Ctrl-C) is native::run_target's
// (hwarb/linux/session.h).
//
// Contract:
//  - Exactly one of -p, -t or a command: check_target() says which is wrong (a usage error).
//  - Exit statuses of the three commands: 0 (done, whatever the tracee's own status, which is
//    reported), 1 (the target could not be traced, tracing failed, or the report could not be
//    written), 2 (usage).
//  - The report (hits, JSON lines, tables, summaries) goes to stdout, where a spawned target's
//    own output goes too; with -o FILE / --output FILE it goes to FILE alone, created (or
//    truncated) before the target starts, and a human summary that would go to stderr goes there
//    too. Status lines (the mode chosen, warnings) stay on stderr. A FILE that cannot be created
//    is a usage error (exit 2) naming it; nothing is run then.
//  - A report that cannot be written (a full disk, -o /dev/full, stdout on a full device) is
//    the command's failure, not the target's: the run goes on to its usual end (a spawned
//    program runs to its exit, an attached one is detached), because the program must not behave
//    otherwise for being watched; then finish_report() says on stderr which output failed and
//    why ("hwarb watch: --output /dev/full: ENOSPC: No space left on device") and the exit
//    status is 1. After the first failure nothing more is written there: the report is
//    incomplete from that point on.
//  - Progress draws on stderr only when it is a terminal; WithProgress adds it to an engine
//    without changing what the engine does.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/cli/watch_expr.h"
#include "hwarb/linux/session.h"
#include "hwarb/linux/watch_session.h"

namespace hwarb::cli {

using TargetOptions = native::Target;

// main() splits the command line at the first "--": what follows is the target command, kept
// here (CLI11 would mix it with the expressions). `separator`: there was a "--".
void set_trailing_command(std::vector<std::string> command, bool separator);
// The "--" and the words after it, given back (gdbserver's form, where they are the program's
// own arguments); the trailing command is empty afterwards.
std::vector<std::string> take_trailing_words();
// gdbserver's `--wrapper WRAPPER... --`, which main() takes out of the command line (its "--" is
// not the target command's): kept here for the gdbserver command, given back once.
void set_gdbserver_wrapper(std::vector<std::string> wrapper);
std::vector<std::string> take_gdbserver_wrapper();
// Adds -p/--pid, -t/--tid and --aslr to `sub`.
void add_target_options(CLI::App& sub, TargetOptions& target);
// Fills target.command from the trailing command and checks that exactly one target is given.
Result<void> check_target(TargetOptions& target);
// Adds -o/--output FILE to `sub`.
void add_output_option(CLI::App& sub, std::string& path);

// Where the report goes (see the contract; probe and sim print through it too, to stdout). Moving
// is cheap; every write is checked, the first failure kept (error()); close() flushes and closes,
// and says whether the report was written.
class Report {
 public:
  // stdout when `path` is empty, else FILE created or truncated; create_file's errors.
  static Result<Report> open(const std::string& path);
  // stdout (sim and probe, which have no -o).
  static Report standard_output() { return Report(stdout, false, "stdout"); }

  Report(Report&& other) noexcept;
  Report& operator=(Report&&) = delete;
  Report(const Report&) = delete;
  Report& operator=(const Report&) = delete;
  // Closes a file that close() did not (its error is then lost: close() is the way to know).
  ~Report();

  // Writes `line` and a newline. On stdout (shared with a spawned program) each line is flushed,
  // so that the program's lines and hwarb's keep their order; to a file (-o) at most every
  // 100 ms (a reader following the file sees each line within that; one write(2) per hit would
  // cost more than the hit) and at the end.
  void line(const std::string& line) const;
  // Writes `text` as it is, buffered (tables, batches of branches; flush() or close() after).
  void write(std::string_view text) const;
  // write() of printf-formatted text.
  void print(const char* format, ...) const __attribute__((format(printf, 2, 3)));
  void flush() const;
  // A human summary: to stderr (as a status line, unchecked: there is nowhere left to say that
  // it failed), or, with -o, to the file as the report.
  void summary(const std::string& text) const;
  // The first failure to write, if any: "<output>: <ERRNAME>: <text>".
  const std::optional<Error>& error() const { return error_; }
  // Flushes stdout, or closes the file (where a file system may first say ENOSPC or EIO); the
  // first failure of the whole report. Once only.
  Result<void> close();

 private:
  Report(std::FILE* out, bool to_file, std::string name)
      : out_(out), to_file_(to_file), name_(std::move(name)) {}
  // Keeps the first failure; false once there is one (nothing more is written then).
  bool keep(Result<void> result) const;
  std::FILE* out_;
  bool to_file_;
  std::string name_;  // "--output FILE" or "stdout", for messages
  mutable std::optional<Error> error_;
  mutable std::chrono::steady_clock::time_point flushed_{};
};

// The exit status of a command that wrote `report`, ending with `status`: closes the report and,
// when it could not be written, says so on stderr ("hwarb COMMAND: <output>: <ERRNAME>:
// <text>") and returns kExitFailure unless `status` already says the command failed.
int finish_report(const char* command, Report& report, int status);

// How watches may be placed: what the probe measured (hardware where hits are delivered, its
// register count), or software alone with `software` (--software) or when the probe failed
// (no_hardware says why). Whether the software path lets the CPU make the accesses: as
// `cpu_accesses` says (--cpu-accesses, --emulate-accesses), else where another user holds
// breakpoint slots or another process has perf events open (cpu_accesses_why says which).
native::WatchSessionOptions watch_options(bool software,
                                          std::optional<bool> cpu_accesses = std::nullopt);
// The watch path's access bits (native::kWatchRead | ...) of an expression's access.
unsigned access_bits(WatchAccess access);

// After an unknown name in spawned command `target` (process `pid`): where its symbols were
// looked up, to say as a note. A script (#!) is run by its interpreter, whose symbols are the
// ones hwarb sees; any other program is the one looked in, and a program it execs is not
// followed. Empty where `error` is not an unknown name, offers near names (a misspelling, most
// likely), or the target is not a command.
std::string lookup_note(const TargetOptions& target, pid_t pid, const Error& error);

// "command 'prog'" / "process 1234" / "thread 1234" for messages.
std::string target_name(const TargetOptions& target);
// "exited with status 3" / "killed by SIGSEGV" / "still running (detached)" / "killed (hwarb
// was interrupted)".
std::string describe_end(const native::RunResult& result, bool spawned);

// A one-line progress display on stderr when it is a terminal; nothing otherwise. update() redraws
// at most every 200 ms; clear() erases the line.
class Progress {
 public:
  Progress();
  ~Progress() { clear(); }
  void update(const std::string& line);
  void clear();
  bool enabled() const { return enabled_; }

 private:
  bool enabled_ = false;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

// `engine` with a progress line: after each of its ticks the line is redrawn with line(); it is
// erased before the engine finishes.
class WithProgress final : public native::ForwardingEngine {
 public:
  WithProgress(native::Engine& engine, Progress& progress, std::function<std::string()> line)
      : ForwardingEngine(engine), progress_(progress), line_(std::move(line)) {}

  Result<void> finish() override {
    progress_.clear();
    return engine_.finish();
  }
  void tick() override {
    engine_.tick();
    progress_.update(line_());
  }
  // On standard error, as the watches' notes are.
  void note(const std::string& text) override {
    progress_.clear();
    std::cerr << "hwarb: note: " << text << "\n";
  }

 private:
  Progress& progress_;
  std::function<std::string()> line_;
};

}  // namespace hwarb::cli
