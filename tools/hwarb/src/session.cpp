#include "session.h"

#include <signal.h>

#include <cstdio>
#include <cstring>
#include <iostream>

#include "hwarb/linux/proc_maps.h"
#include "hwarb/linux/syscalls.h"
#include "hwarb/linux/terminal.h"

namespace hwarb::cli {
namespace {

std::vector<std::string>& trailing() {
  static std::vector<std::string> command;
  return command;
}

}  // namespace

void set_trailing_command(std::vector<std::string> command) {
  trailing() = std::move(command);
}

void add_target_options(CLI::App& sub, TargetOptions& target) {
  sub.add_option("-p,--pid", target.pid, "attach to the running process PID (all its threads)");
  sub.add_option("-t,--tid", target.tid,
                 "attach to the process of thread TID; report that thread only");
  sub.add_flag("--aslr", target.aslr,
               "keep address-space randomisation for a command (default: off, as in gdb, so "
               "addresses repeat from run to run)");
}

Result<void> check_target(TargetOptions& target) {
  target.command = trailing();
  const int given =
      (target.pid != 0 ? 1 : 0) + (target.tid != 0 ? 1 : 0) + (target.command.empty() ? 0 : 1);
  if (given == 0) {
    return make_error(ErrorCode::kInval,
                      "target: give one of -p PID, -t TID or '-- COMMAND [ARGS]'");
  }
  if (given > 1) {
    return make_error(ErrorCode::kInval,
                      "target: -p, -t and '-- COMMAND' are exclusive; give exactly one");
  }
  if (target.pid < 0 || target.tid < 0) {
    return make_error(ErrorCode::kInval, "pid: must be a positive process id");
  }
  return {};
}

Result<linux::Inferior> open_target(const TargetOptions& target) {
  if (!target.command.empty()) {
    return linux::Inferior::spawn(target.command, {.disable_aslr = !target.aslr});
  }
  if (target.pid != 0) return linux::Inferior::attach(target.pid);
  auto process = linux::thread_group(target.tid);
  if (!process) return std::unexpected(process.error());
  return linux::Inferior::attach(*process);
}

std::string target_name(const TargetOptions& target) {
  if (!target.command.empty()) return "command '" + target.command[0] + "'";
  if (target.pid != 0) return "process " + std::to_string(target.pid);
  return "thread " + std::to_string(target.tid);
}

Result<void> run_to(linux::Inferior& inferior, std::uint64_t addr) {
  const pid_t pid = inferior.pid();
  std::uint8_t original = 0;
  if (auto r = inferior.read_memory(addr, std::span(&original, 1)); !r) return r;
  const std::uint8_t int3 = 0xCC;
  if (auto r = inferior.write_memory(addr, std::span<const std::uint8_t>(&int3, 1)); !r) return r;
  if (auto r = inferior.resume(pid, linux::Resume::kCont); !r) return r;
  for (;;) {
    auto ev = inferior.wait();
    if (!ev) return std::unexpected(ev.error());
    if (ev->kind == linux::EventKind::kExited || ev->kind == linux::EventKind::kKilled) {
      return make_error(ErrorCode::kSrch, "target: ended before reaching its entry point");
    }
    if (ev->kind == linux::EventKind::kSignal && ev->signal == SIGTRAP) {
      auto regs = inferior.get_regs(ev->tid);
      if (regs && regs->rip == addr + 1) {
        regs->rip = addr;
        if (auto r = inferior.set_regs(ev->tid, *regs); !r) return r;
        return inferior.write_memory(addr, std::span<const std::uint8_t>(&original, 1));
      }
    }
    const int sig = ev->kind == linux::EventKind::kSignal ? ev->signal : 0;
    if (ev->kind == linux::EventKind::kFork && !ev->vfork) {
      if (auto r = inferior.release(ev->child); !r) return r;
      continue;
    }
    if (ev->kind == linux::EventKind::kThreadExit) continue;
    if (auto r = inferior.resume(ev->tid, linux::Resume::kCont, sig); !r) return r;
  }
}

bool interrupted() {
  return linux::interrupt_requested();
}

Result<RunResult> run_target(linux::Inferior& inferior, Engine& engine) {
  linux::install_interrupt_flag();
  RunResult result;
  result.pid = inferior.pid();
  const bool spawned = inferior.spawned();
  // Stops everything, lets the engine undo its changes, and lets go of the process.
  auto leave = [&](bool keep_running) -> Result<void> {
    if (!inferior.alive()) return {};
    Result<void> first;
    if (auto s = inferior.stop_all(); !s) first = std::unexpected(s.error());
    if (auto f = engine.finish(); !f && first) first = f;
    if (keep_running || !spawned) {
      if (auto d = inferior.detach(); !d && first) first = d;
    } else {
      if (auto k = inferior.kill(); !k && first) first = k;
    }
    return first;
  };
  auto fail = [&](const Error& error) -> Result<RunResult> {
    (void)leave(false);
    return std::unexpected(error);
  };
  if (auto r = inferior.resume_all(engine.resume_mode()); !r) return fail(r.error());
  auto last_tick = std::chrono::steady_clock::now();
  for (;;) {
    if (interrupted()) {
      result.interrupted = true;
      if (auto r = leave(false); !r) return std::unexpected(r.error());
      return result;
    }
    if (engine.done()) {
      // Enough (--count): the process goes on unwatched and unmodified.
      if (auto r = leave(true); !r) return std::unexpected(r.error());
      if (spawned) {
        auto status = linux::wait_for(result.pid, false);
        if (status) {
          result.exited = true;
          if (status->kind == linux::WaitKind::kExited) result.status = status->value;
          if (status->kind == linux::WaitKind::kKilled) result.signal = status->value;
        }
      }
      return result;
    }
    // An engine with rings to drain also wakes when one is readable, and at least every 100 ms.
    auto got = [&]() -> Result<std::optional<linux::Event>> {
      if (engine.wants_wakeups()) return inferior.wait_or_poll(engine.wake_fds(), 100);
      auto ev = inferior.wait();
      if (!ev) return std::unexpected(ev.error());
      return std::optional<linux::Event>(std::move(*ev));
    }();
    if (!got) {
      if (got.error().code() == ErrorCode::kIntr) continue;
      return fail(got.error());
    }
    if (!*got) {
      engine.tick();
      last_tick = std::chrono::steady_clock::now();
      continue;
    }
    const linux::Event* ev = &**got;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_tick > std::chrono::milliseconds(100)) {
      engine.tick();
      last_tick = now;
    }
    auto mine = engine.handle(*ev);
    if (!mine) return fail(mine.error());
    if (*mine) continue;
    const linux::Resume how = engine.resume_mode();
    Result<void> step;
    switch (ev->kind) {
      case linux::EventKind::kExited:
        result.exited = true;
        result.status = ev->status;
        return result;
      case linux::EventKind::kKilled:
        result.exited = true;
        result.signal = ev->signal;
        return result;
      case linux::EventKind::kThreadExit:
        break;
      case linux::EventKind::kSignal:
        step = inferior.resume(ev->tid, how, ev->signal);
        break;
      case linux::EventKind::kFork:
        if (!ev->vfork) {
          step = inferior.release(ev->child);
        } else {
          step = inferior.resume(ev->child, how);
        }
        break;
      default:
        step = inferior.resume(ev->tid, how);
        break;
    }
    if (!step && step.error().code() != ErrorCode::kSrch) return fail(step.error());
  }
}

std::string describe_end(const RunResult& result, bool spawned) {
  if (result.interrupted) {
    return spawned ? "killed (hwarb was interrupted)"
                   : "still running, detached unmodified (hwarb was interrupted)";
  }
  if (!result.exited) return "still running, detached unmodified";
  if (result.signal != 0) {
    const char* name = sigabbrev_np(result.signal);
    return std::string("killed by SIG") + (name != nullptr ? name : std::to_string(result.signal));
  }
  return "exited with status " + std::to_string(result.status);
}

Progress::Progress() : enabled_(linux::is_terminal(2)) {}

void Progress::update(const std::string& line) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (shown_ && now - last_ < std::chrono::milliseconds(200)) return;
  last_ = now;
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
  shown_ = true;
}

void Progress::clear() {
  if (!enabled_ || !shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

}  // namespace hwarb::cli
