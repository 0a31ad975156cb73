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
//     nothing.
//  4. The lock's owner died (a plan still published): the kernel wakes the watchdog at the
//     first step of hwarb's exit, as it releases hwarb's memory and before it detaches the
//     tracees, so the watchdog's first act (real-time where allowed, so it runs at once), a
//     SIGSTOP to each process of the plan, usually arrives while they are still traced: they stop
//     at their detach instead of running on into a watched page. It waits until no process has a
//     tracer, seizes each one (Inferior::attach), injects the mprotect calls and writes the bytes
//     back, detaches, sends SIGCONT, says so on standard error and exits.
//
// The guarantee that results (README, "If hwarb is killed"): an attached program whose hwarb is
// killed runs on with its protections and code restored, after one SIGSTOP/SIGCONT pair (a
// parent waiting with WUNTRACED/WCONTINUED sees them). Not covered: a thread that was already
// stopped at a fault of a watched page when hwarb died (the kernel delivers that SIGSEGV when
// it detaches the thread), a thread whose registers hwarb had changed to inject a system call,
// and the single-step method (the trap flag is the kernel's to clear).
//
// Contract: publish() is all-or-nothing (ENOSPC naming `plan` past kMaxProcesses, kMaxPages or
// kMaxBytes; the previous plan stays). Move-only; the destructor releases.
// Thread-safety: one owner thread; the shared slots are handed over with release/acquire.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "hwarb/base/error.h"

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
// What to undo in each process (every process had the same changes made: a forked child keeps
// its parent's).
struct RestorePlan {
  std::vector<pid_t> processes;
  std::vector<RestorePage> pages;
  std::vector<RestoreByte> bytes;
  bool operator==(const RestorePlan&) const = default;
};

// Undoes `plan` in each of its processes now, which must not be traced (they are seized,
// restored, detached, and continued when `stopped_by_us`). Returns how many processes were
// restored; a process that is gone is skipped. What the watchdog runs; public for tests.
Result<std::size_t> restore_processes(const RestorePlan& plan, bool stopped_by_us);

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
  // The watchdog exits without touching anything (idempotent).
  void release();

  struct Shared;  // the two slots (watchdog.cpp)

 private:
  explicit Watchdog(Shared* shared) : shared_(shared) {}
  Shared* shared_ = nullptr;
};

}  // namespace hwarb::native
