// hwarb/linux/virtual_tracee.h — VirtualTracee, a real thread under ptrace(2) as a
// ptrace_compat::Tracee whose debug registers DR0–DR7 work without debug hardware (VMs that
// accept breakpoints but never deliver their hits): PEEKUSER/POKEUSER have Linux's exact
// semantics (DebugRegEmulation), and the enabled registers are watched in software (SoftWatch).
//
// How it works:
//  - Each VirtualTracee has its own hw_breakpoint world: an x86_64 arbiter with one CPU, the perf
//    core, the breakpoint PMU programming a virtual CPU's DR0–DR3/DR7, the HwBreakpoints API and
//    a DebugRegEmulation. The traced thread is the task running on that CPU, so the ptrace
//    breakpoints (and any other user of breakpoints(): perf-like or kernel-style users of the
//    same task) are installed into the virtual registers exactly as Linux installs them.
//  - Peeks and pokes of struct user are DebugRegEmulation::peek_user/poke_user: EIO, EINVAL,
//    ENOSPC, the DR7 restore pass, DR6 polarity, all Linux's. General registers are EOPNOTSUPP
//    naming `offset` (read them with inferior().get_regs()).
//  - When the thread resumes (cont/step), the enabled virtual registers become a SoftWatch on the
//    process: write → kWatchWrite, read/write → kWatchRead|kWatchWrite over the aligned range the
//    register covers, execute → kWatchExec (1 byte at the address); the range id is the
//    register's number. A changed register set re-arms (disarm the old watch, arm a new one,
//    other threads stopped meanwhile). A range that cannot be armed (an unmapped address) gets
//    no hits, as Linux accepts any user address in DR0–DR3. When SoftWatch would need its
//    single-step method (a range on a stack, a read watch on code), the thread is instead
//    single-stepped here, one decoded instruction at a time (about 30 000 per second).
//  - Hits keep x86 semantics and stop only the traced thread; the hit→stop logic is here, not
//    in SoftWatch (whose handle() resumes the thread itself):
//      data: a protection fault of the traced thread is decoded first (x86/insn.h); when it
//        touches an enabled range with a matching access, SoftWatch::complete_fault completes
//        the instruction (emulated, or single-stepped with its pages open and the other threads
//        held) and leaves the thread right AFTER it, so it stops there (a trap) with the other
//        watched pages still protected. Faults that are not hits (false sharing) and other
//        threads' faults go to SoftWatch::handle, which completes them and resumes;
//      execute: the int3 of the traced thread is reported BEFORE the instruction (rip = the
//        address, a fault); the next cont() runs that instruction once with the watch off (what
//        the resume flag RF does) instead of hitting again; step() onto such an address and then
//        step() again reports the hit without running it, as the hardware;
//      each hit goes through the debug-exception path (BreakpointPmu::handle between
//        DebugRegEmulation::begin_exception/end_exception), which sets DR6's trap bit of the
//        ptrace slot that fired and decides SIGTRAP; a hit of a non-ptrace user only updates
//        DR6 (no stop), as Linux.
//    Kernel accesses to watched memory (system calls) are not hits: ptrace breakpoints are
//    exclude_kernel. Accesses of other threads are theirs: debug registers are per thread.
//  - step() is PTRACE_SINGLESTEP: one instruction with the watch off, then Stop{SIGTRAP, DR6 with
//    BS} plus the trap bit of a data register the instruction hit.
//  - Signals of the program are passed through, never reported (a debugger that lets every
//    signal through). Stops are therefore SIGTRAP (hit, step, and after an execve, which also
//    flushes the ptrace breakpoints as Linux does), and SIGSTOP for the stop the tracee starts in.
//
// Contract (ptrace_compat/tracee.h):
//  - create() takes an Inferior whose thread `tid` (default: the process) is stopped; spawn() and
//    attach() make that Inferior (Inferior's errors). Only the x86_64 layout.
//  - peek_user/poke_user/cont/step need the tracee in a stop, else ESRCH naming `pid`; after the
//    thread or the process ended everything is ESRCH naming `pid`, but for the one wait() that
//    reports the end (Stop::exited with the status, or Stop::killed with the signal, of the
//    process or of the traced thread when it ends alone).
//  - wait(kNoHang) returns the stop the tracee is in, or nullopt while it runs: events are driven
//    by wait(kBlock) only (and by cont/step for the one instruction they may run synchronously).
//    wait(kBlock) drives the Inferior's events until the next stop; EINTR is retried.
//  - inferior() gives the process's memory and registers while the tracee is stopped; the caller
//    must not resume, wait for or stop its threads.
//  - The destructor disarms the watch (stopping the threads), then the Inferior goes: a spawned
//    process is killed, an attached one detached with the kernel's own DR6 of the thread put back
//    as it was at attach (our single-steps set its BS).
//  - Other threads keep running while the traced thread is stopped; their events wait until the
//    next wait(kBlock). Fork children are released clean, vfork children resumed.
//  - All calls from the thread that created the Inferior (Linux's ptrace rule).
//
// open_tracee(pid, hits_delivered) is how a caller chooses: with hits_delivered (probe.h's
// ProbeReport::hits_delivered) the kernel's own registers are used (LinuxTracee::attach,
// pass-through), else a VirtualTracee attaches.
// Thread-safety: none. Move-only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/base/ids.h"
#include "hwarb/breakpoints/hw_breakpoint.h"
#include "hwarb/linux/inferior.h"
#include "hwarb/ptrace_compat/tracee.h"

namespace hwarb::native {

class VirtualTracee final : public ptrace_compat::Tracee {
 public:
  // ESRCH naming `tid` when it is not a thread of the inferior, EINVAL naming `tid` when it is
  // not stopped.
  static Result<VirtualTracee> create(Inferior inferior, pid_t tid = 0);
  static Result<VirtualTracee> spawn(const std::vector<std::string>& argv,
                                     const InferiorOptions& options = {});
  static Result<VirtualTracee> attach(pid_t pid, const InferiorOptions& options = {});

  VirtualTracee(VirtualTracee&&) noexcept;
  VirtualTracee& operator=(VirtualTracee&&) noexcept;
  VirtualTracee(const VirtualTracee&) = delete;
  VirtualTracee& operator=(const VirtualTracee&) = delete;
  ~VirtualTracee() override;

  pid_t tid() const;
  // The task id of the traced thread in breakpoints().
  TaskId task() const;
  Inferior& inferior();
  // This tracee's hw_breakpoint world (one virtual CPU). Users registered here compete with the
  // ptrace slots and are watched like them from the next cont/step.
  breakpoints::HwBreakpoints& breakpoints();
  // How the enabled registers are watched: "none", "page protection (1 page) + int3 (1)",
  // "single-step", with the registers that could not be armed.
  std::string describe() const;

  ptrace_compat::UserLayout layout() const override { return ptrace_compat::UserLayout::kX86_64; }
  Result<std::uint64_t> peek_user(std::uint64_t offset) override;
  Result<void> poke_user(std::uint64_t offset, std::uint64_t value) override;
  Result<std::optional<ptrace_compat::Stop>> wait(
      ptrace_compat::WaitMode mode = ptrace_compat::WaitMode::kNoHang) override;
  Result<void> cont() override;
  Result<void> step() override;

 private:
  struct Impl;
  explicit VirtualTracee(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

Result<std::unique_ptr<ptrace_compat::Tracee>> open_tracee(pid_t pid, bool hits_delivered);

}  // namespace hwarb::native
