// hwarb/linux/linux_tracee.h — LinuxTracee, a real thread under ptrace(2) as a
// ptrace_compat::Tracee: PEEKUSER/POKEUSER go to the kernel, so its answers are Linux's own.
//
// Contract (ptrace_compat/tracee.h, with the kernel as the implementation):
//  - Two ways to get one: create() takes ownership of a StoppedChild (traced by the calling
//    thread and in its SIGSTOP stop; the child is killed when the LinuxTracee goes), attach()
//    does PTRACE_ATTACH to an existing thread and waits for its stop (detached again when the
//    LinuxTracee goes: stopped first if it runs, then PTRACE_DETACH; EPERM naming `pid` when
//    the kernel refuses the attach).
//  - Only the x86_64 layout: the i386 layout (struct user32, the compat getreg32/putreg32 path)
//    is what a 32-bit tracer sees, and this process is a 64-bit tracer, so asking for it is
//    EOPNOTSUPP naming `layout`.
//  - peek_user/poke_user are one PTRACE_PEEKUSER/POKEUSER each; errors are the kernel's (EIO,
//    EINVAL, ENOSPC; ESRCH when the tracee is not in a ptrace-stop), see syscalls.h.
//  - wait(kNoHang) reports the current stop, or nullopt while the tracee runs; wait(kBlock)
//    waits for the next stop (waitpid with __WALL). The stop is remembered until cont/step; every
//    wait() that returns it re-reads DR6 (PEEKUSER) into Stop::dr6. The tracee's exit or death
//    is an ended Stop (Stop::exited(status), Stop::killed(signal)), reported by one wait() (also
//    when cont/step saw it first: they are ESRCH then); the tracee is reaped when it is seen, and
//    after the report every call is ESRCH naming `pid`.
//  - cont()/step() are PTRACE_CONT/PTRACE_SINGLESTEP without a signal (the stop's signal is
//    suppressed, as a debugger does with SIGSTOP and SIGTRAP); ESRCH while running.
//  - All ptrace calls must come from the tracer thread (the one that spawned or attached).
// Thread-safety: none. Move-only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <utility>

#include "hwarb/base/error.h"
#include "hwarb/linux/stopped_child.h"
#include "hwarb/ptrace_compat/tracee.h"

namespace hwarb::native {

class LinuxTracee final : public ptrace_compat::Tracee {
 public:
  static Result<LinuxTracee> create(
      StoppedChild child, ptrace_compat::UserLayout layout = ptrace_compat::UserLayout::kX86_64);
  static Result<LinuxTracee> attach(
      pid_t pid, ptrace_compat::UserLayout layout = ptrace_compat::UserLayout::kX86_64);

  LinuxTracee(LinuxTracee&& other) noexcept;
  LinuxTracee& operator=(LinuxTracee&& other) noexcept;
  LinuxTracee(const LinuxTracee&) = delete;
  LinuxTracee& operator=(const LinuxTracee&) = delete;
  ~LinuxTracee() override;

  pid_t pid() const { return pid_; }

  ptrace_compat::UserLayout layout() const override { return ptrace_compat::UserLayout::kX86_64; }
  Result<std::uint64_t> peek_user(std::uint64_t offset) override;
  Result<void> poke_user(std::uint64_t offset, std::uint64_t value) override;
  Result<std::optional<ptrace_compat::Stop>> wait(
      ptrace_compat::WaitMode mode = ptrace_compat::WaitMode::kNoHang) override;
  Result<void> cont() override;
  Result<void> step() override;

 private:
  LinuxTracee(std::optional<StoppedChild> child, pid_t pid, std::optional<int> stop)
      : child_(std::move(child)), pid_(pid), stop_(stop) {}
  Result<WaitStatus> wait_raw(bool nohang);
  // One look at the tracee's state: a stop goes to stop_, an end (reaped) to ended_.
  Result<void> collect(bool nohang);
  Result<void> resume(bool step);
  void release();

  std::optional<StoppedChild> child_;  // owned child; empty when attached to a foreign thread
  pid_t pid_ = -1;                     // -1 once gone (reaped) or moved from
  std::optional<int> stop_;            // the signal of the stop the tracee is in
  std::optional<ptrace_compat::Stop> ended_;  // its end, seen and not yet reported by wait()
};

}  // namespace hwarb::native
