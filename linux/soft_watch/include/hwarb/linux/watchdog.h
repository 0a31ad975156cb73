// hwarb/linux/watchdog.h — Watchdog: a process that undoes a watch's changes to an attached
// program when hwarb dies without its own cleanup (SIGKILL, a crash, the OOM killer).
//
// Why: the software watch changes the program (pages made read-only or inaccessible, int3
// bytes). When hwarb ends normally it restores them and detaches; killed, its threads are
// detached by the kernel with the changes still in place, and the program's next access to a
// watched page would be a SIGSEGV that kills it. A spawned command dies with hwarb (its
// parent-death signal), so only an attached one (-p) needs this.
//
// How:
//  1. start() takes an OwnerLock in memory shared with the watchdog, then forks the watchdog (a
//     detached process: never hwarb's child, in a process group of its own), which waits for
//     that lock.
//  2. publish() copies the restore plan — the processes, each changed page with the protection
//     to give back, each changed byte with its original — into memory shared with the
//     watchdog. Two slots: the plan is written into the one not in use, then the index flips,
//     so a hwarb killed in the middle of a publish leaves the previous plan whole.
//  3. release() (normal end) withdraws the plan and unlocks: the watchdog exits touching
//     nothing. withdraw() only withdraws the plan: should hwarb die before the next publish(),
//     the watchdog exits touching nothing.
//  4. The lock's owner died (a plan still published): the kernel wakes the watchdog at the
//     first step of hwarb's exit, as it releases hwarb's memory and before it detaches the
//     tracees, so the watchdog's first act (real-time where allowed, so it runs at once), a
//     SIGSTOP to each process of the plan, usually arrives while they are still traced: they stop
//     at their detach instead of running on into a watched page. It waits until no process has a
//     tracer, seizes each one (Inferior::attach), puts back the registers of a thread caught in
//     an injected system call (injecting()), injects the mprotect calls, writes the bytes back,
//     sets the parachute's signals back to the default, drops the signals the watch's own stops
//     left pending, detaches, sends SIGCONT, says so on standard error and exits.
//
// Two kinds of thread would die at the detach whatever the watchdog does afterwards, and are
// covered before hwarb dies:
//  a. a thread in a stop of the watch that hwarb had not collected yet (waitpid) keeps the stop's
//     signal (a fault's SIGSEGV, a step's SIGTRAP), which the kernel delivers as it detaches it;
//     a thread whose trap flag a step set traps once more as it runs on. The parachute
//     (signal_action.h, SoftWatch::deploy_parachute) takes those signals.
//  b. a thread whose registers were an injected call's runs on from the injection's `syscall`
//     instruction with them. hwarb tells the watchdog each injection's registers to put back
//     (injecting()), and the SIGSTOP holds the thread until they are.
//
// The guarantee that results (docs/cli.md, "If hwarb is killed"): an attached program whose
// hwarb is killed runs on with its protections, code and signal actions restored, after one
// SIGSTOP/SIGCONT pair (a parent waiting with WUNTRACED/WCONTINUED sees them). Not covered: a
// program whose own action for SIGSEGV or SIGTRAP is a handler or SIG_IGN (no parachute: the
// handler gets the signal of case a), a process whose text has no rt_sigreturn sequence (a
// static program without signal code), a SIGSTOP that comes after the detach (case b then runs
// on), int3 stops (the thread resumes one byte past the restored instruction: `trace -p`), and
// the single-step method (the trap flag is the kernel's to clear).
//
// Contract: publish() is all-or-nothing (ENOSPC naming `plan` past kMaxProcesses (processes or
// signals), kMaxPages or kMaxBytes; the previous plan stays). Move-only; the destructor releases.
// Thread-safety: one owner thread; the shared slots are handed over with release/acquire.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/signal_action.h"
#include "hwarb/x86/insn.h"

namespace hwarb::native {

struct RestorePage {
  std::uint64_t addr = 0;  // page address
  int protection = 0;      // PROT_* to give back
  bool operator==(const RestorePage&) const = default;
};
struct RestoreByte {
  std::uint64_t addr = 0;
  std::uint8_t original = 0;
  bool operator==(const RestoreByte&) const = default;
};
// Signals whose action in `process` is the watch's parachute (signal_action.h): set back to the
// program's own action under the parachute (the default, or a handler of the program's).
struct RestoreSignals {
  pid_t process = 0;
  std::uint64_t signals = 0;  // bit n-1 for signal n
  KernelSigaction segv{};     // the program's SIGSEGV action (when its bit is set)
  KernelSigaction trap{};     // the program's SIGTRAP action (when its bit is set)
  bool operator==(const RestoreSignals&) const = default;
};
// What to undo in each process (every process had the same changes made: a forked child keeps
// its parent's), and the parachutes.
struct RestorePlan {
  std::vector<pid_t> processes;
  std::vector<RestorePage> pages;
  std::vector<RestoreByte> bytes;
  std::vector<RestoreSignals> signals;
  bool operator==(const RestorePlan&) const = default;
};

// A thread whose registers were an injected system call's when hwarb died, and the registers
// that put it back (Inferior::set_injection_observer).
struct RestoreThread {
  pid_t tid = 0;
  x86::Regs regs{};
};

// Undoes `plan` in each of its processes now, which must not be traced (they are seized,
// restored, detached, and continued when `stopped_by_us`): page protections, bytes, the
// parachute's signals set back to the default, and then the signals the watch's stops left
// pending (a protection fault's SIGSEGV on a plan page, a kernel's SIGTRAP: a step's trap, an
// int3's), which are dropped; any other pending signal is delivered as usual. A thread named by
// `injecting` gets its registers back first. Returns how many processes were restored; a
// process that is gone is skipped. What the watchdog runs; public for tests.
Result<std::size_t> restore_processes(const RestorePlan& plan, bool stopped_by_us,
                                      const std::optional<RestoreThread>& injecting = std::nullopt);

class Watchdog {
 public:
  static constexpr std::size_t kMaxProcesses = 256;
  static constexpr std::size_t kMaxPages = 4096;
  static constexpr std::size_t kMaxBytes = 4096;

  // Forks the watchdog (fork_detached's errors).
  static Result<Watchdog> start();
  Watchdog(Watchdog&& other) noexcept;
  Watchdog& operator=(Watchdog&& other) noexcept;
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog();

  Result<void> publish(const RestorePlan& plan);
  // The plan the watchdog holds now: the last one published, empty before the first and once
  // released (for tests and diagnostics).
  [[nodiscard]] RestorePlan published_plan() const;
  // Nothing to undo any more (the changes are undone): until the next publish(), hwarb's death
  // leaves the watchdog nothing to do; it goes on waiting (idempotent).
  void withdraw();
  // The watchdog exits without touching anything (idempotent).
  void release();
  // The thread whose registers are an injected call's now, and those that put it back (null:
  // none any more). Lock-free, for every injection; nothing once released.
  void injecting(pid_t tid, const x86::Regs* restore);
  // The thread injecting() names now (for tests and diagnostics).
  std::optional<RestoreThread> injecting_thread() const;

  struct Shared;  // the two slots (watchdog.cpp)

 private:
  explicit Watchdog(Shared* shared) : shared_(shared) {}
  Shared* shared_ = nullptr;
};

}  // namespace hwarb::native
