// tools/hwarb/src/session.h — what `hwarb watch`, `stat` and `trace` share: the target options
// (-p PID | -t TID | -- CMD ARGS), starting or attaching to the target, the event loop over an
// Inferior with one engine (a SoftWatch, a PerfWatch poller, a BranchTracer), Ctrl-C, the
// progress line and JSON strings.
//
// Contract:
//  - Exactly one of -p, -t or a command: check_target() says which is wrong (a usage error).
//  - run_target() drives the Inferior until the process ends or SIGINT/SIGTERM arrives: every
//    event goes to the engine first; events it does not take are handled as a debugger does
//    (signals passed through unchanged, new threads and exits followed, forks released). On an
//    interrupt it stops every thread, lets the engine undo its changes (finish()), and detaches
//    (an attached target) or kills (a spawned one) — an attached target always runs on
//    unmodified. Errors of the engine are returned after the same cleanup.
//  - Exit statuses of the three commands: 0 (done, whatever the tracee's own status, which is
//    reported), 1 (the target could not be traced or tracing failed), 2 (usage).
#pragma once

#include <sys/types.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/base/format.h"
#include "hwarb/linux/inferior.h"

namespace hwarb::cli {

struct TargetOptions {
  pid_t pid = 0;
  pid_t tid = 0;
  std::vector<std::string> command;
  bool aslr = false;  // --aslr: keep address-space randomisation for a spawned command
};

// main() splits the command line at the first "--": what follows is the target command, kept
// here (CLI11 would mix it with the expressions).
void set_trailing_command(std::vector<std::string> command);
// Adds -p/--pid and -t/--tid to `sub`.
void add_target_options(CLI::App& sub, TargetOptions& target);
// Fills target.command from the trailing command and checks that exactly one target is given.
Result<void> check_target(TargetOptions& target);
// Spawns the command or attaches to the process (of the thread, for -t).
Result<linux::Inferior> open_target(const TargetOptions& target);
// Runs a spawned process (stopped at its first instruction) until it reaches `addr` and leaves
// it stopped there, the int3 used for it removed: run to the executable's entry point, the
// dynamic loader has mapped the shared libraries, so their symbols resolve. Signals of the
// program pass through. ESRCH naming `target` when it ends first.
Result<void> run_to(linux::Inferior& inferior, std::uint64_t addr);
// "command 'prog'" / "process 1234" for messages.
std::string target_name(const TargetOptions& target);

// An engine driven by run_target.
class Engine {
 public:
  virtual ~Engine() = default;
  // Takes an event; true when it resumed the thread itself.
  virtual Result<bool> handle(const linux::Event& event) = 0;
  virtual linux::Resume resume_mode() const = 0;
  // Undoes every change to the tracee; all threads are stopped.
  virtual Result<void> finish() = 0;
  // Called between events at most every 100 ms (progress line, polling); default none. An engine
  // with wake_fds() is also called when one of them is readable and every 100 ms without events.
  virtual void tick() {}
  // Descriptors (perf rings) whose POLLIN must wake the loop while the threads run; empty (the
  // default): the loop sleeps in waitpid until the next event.
  virtual std::vector<int> wake_fds() const { return {}; }
  virtual bool wants_wakeups() const { return false; }
  // True when the engine has seen enough (--count): run_target then undoes, detaches and lets
  // the process run on (a spawned one is waited for, for its exit status).
  virtual bool done() const { return false; }
};

struct RunResult {
  bool exited = false;  // the process ended: status or signal
  int status = 0;
  int signal = 0;
  bool interrupted = false;  // Ctrl-C / SIGTERM: detached (attached target) or killed (spawned)
  pid_t pid = -1;
};
Result<RunResult> run_target(linux::Inferior& inferior, Engine& engine);
// "exited with status 3" / "killed by SIGSEGV" / "still running (detached)" / "killed (hwarb
// was interrupted)".
std::string describe_end(const RunResult& result, bool spawned);

// Whether SIGINT/SIGTERM has arrived (run_target installs the handler).
bool interrupted();

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

}  // namespace hwarb::cli
