// tools/hwarb/src/session.h — what `hwarb watch`, `stat` and `trace` share on the command line:
// the target options (-p PID | -t TID | -- CMD ARGS, --aslr) and their check, the wording of a
// target and of how it ended, and the progress line. The session itself (starting or attaching,
// the event loop, Ctrl-C) is linux::run_target's (hwarb/linux/session.h).
//
// Contract:
//  - Exactly one of -p, -t or a command: check_target() says which is wrong (a usage error).
//  - Exit statuses of the three commands: 0 (done, whatever the tracee's own status, which is
//    reported), 1 (the target could not be traced or tracing failed), 2 (usage).
//  - Progress draws on stderr only when it is a terminal; WithProgress adds it to an engine
//    without changing what the engine does.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/session.h"

namespace hwarb::cli {

using TargetOptions = linux::Target;

// main() splits the command line at the first "--": what follows is the target command, kept
// here (CLI11 would mix it with the expressions).
void set_trailing_command(std::vector<std::string> command);
// Adds -p/--pid, -t/--tid and --aslr to `sub`.
void add_target_options(CLI::App& sub, TargetOptions& target);
// Fills target.command from the trailing command and checks that exactly one target is given.
[[nodiscard]] Result<void> check_target(TargetOptions& target);
// "command 'prog'" / "process 1234" / "thread 1234" for messages.
std::string target_name(const TargetOptions& target);
// "exited with status 3" / "killed by SIGSEGV" / "still running (detached)" / "killed (hwarb
// was interrupted)".
std::string describe_end(const linux::RunResult& result, bool spawned);

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
class WithProgress final : public linux::Engine {
 public:
  WithProgress(linux::Engine& engine, Progress& progress, std::function<std::string()> line)
      : engine_(engine), progress_(progress), line_(std::move(line)) {}

  [[nodiscard]] Result<bool> handle(const linux::Event& event) override {
    return engine_.handle(event);
  }
  linux::Resume resume_mode() const override { return engine_.resume_mode(); }
  [[nodiscard]] Result<void> finish() override {
    progress_.clear();
    return engine_.finish();
  }
  void tick() override {
    engine_.tick();
    progress_.update(line_());
  }
  std::vector<int> wake_fds() const override { return engine_.wake_fds(); }
  bool wants_wakeups() const override { return engine_.wants_wakeups(); }
  bool done() const override { return engine_.done(); }

 private:
  linux::Engine& engine_;
  Progress& progress_;
  std::function<std::string()> line_;
};

}  // namespace hwarb::cli
