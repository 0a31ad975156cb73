#include "hwarb/linux/syscall_injection.h"

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "hwarb/linux/syscalls.h"
#include "ptrace_stops.h"

namespace hwarb::native {

using detail::kSyscallTrap;
using detail::ptrace_event;
using detail::tid_text;

namespace {

// The kernel's internal restart codes, seen in rax at the syscall-exit stop of an interrupted
// call (include/linux/errno.h); -515 is not used.
constexpr std::int64_t kErestartSys = -512;
constexpr std::int64_t kErestartUnused = -515;
constexpr std::int64_t kErestartRestartBlock = -516;

}  // namespace

Result<std::uint64_t> SyscallInjector::gadget(Tracer& tracer, pid_t process) {
  if (auto it = gadgets_.find(process); it != gadgets_.end()) return it->second;
  constexpr std::uint8_t kSyscall[] = {0x0f, 0x05};
  auto at = tracer.find_code(process, kSyscall);
  if (!at) {
    return make_error(ErrorCode::kNoEnt,
                      "text: no `syscall` instruction in the process's executable mappings");
  }
  gadgets_[process] = *at;
  return *at;
}

// Resumes with PTRACE_SYSCALL until the next syscall stop; signals that arrive meanwhile are kept
// (the last one wins; Linux coalesces standard signals the same way) and suppressed now.
Result<void> SyscallInjector::run_to_syscall_stop(Tracer& tracer, pid_t tid, StopState& state) {
  for (;;) {
    if (auto r = ptrace_syscall(tid); !r) return r;
    auto status = tracer.wait_stop(tid);
    if (!status) return std::unexpected(status.error());
    if (!WIFSTOPPED(*status)) {
      return make_error(ErrorCode::kSrch, "pid: " + tid_text(tid) + " ended during a system call");
    }
    const int sig = WSTOPSIG(*status);
    if (sig == kSyscallTrap) return {};
    if (ptrace_event(*status) == 0 && sig != SIGTRAP) state.kept_signal = sig;
  }
}

Result<std::int64_t> SyscallInjector::inject(Tracer& tracer, pid_t tid, pid_t process,
                                             StopState& state, long nr,
                                             std::array<std::uint64_t, 6> args) {
  if (state.stop == ThreadStop::kSyscallEvent) {
    // Case 0: the call the event stopped in has not returned; leaving the stop writes its result
    // over the injection's registers. It returns first, to its syscall-exit stop (case 2).
    if (auto r = run_to_syscall_stop(tracer, tid, state); !r) return std::unexpected(r.error());
    state.stop = ThreadStop::kSyscallExit;
  }
  auto saved = tracer.get_regs(tid);
  if (!saved) return std::unexpected(saved.error());
  x86::Regs regs = *saved;
  if (observer_) {
    x86::Regs restore = *saved;
    if (state.stop == ThreadStop::kSyscallEnter) {
      restore.rip -= 2;  // the program's call runs again from its `syscall` instruction
      restore.rax = saved->orig_rax;
    }
    observer_(tid, &restore);
  }
  struct Told {
    const Observer& observer;
    pid_t tid;
    ~Told() {
      if (observer) observer(tid, nullptr);
    }
  } told{observer_, tid};
  auto set_args = [&](x86::Regs& r) {
    r.rdi = args[0];
    r.rsi = args[1];
    r.rdx = args[2];
    r.r10 = args[3];
    r.r8 = args[4];
    r.r9 = args[5];
  };
  // A syscall-exit stop whose registers are no system call's any more (rt_sigreturn restored the
  // interrupted code's, orig_rax -1): there is no `syscall` instruction before rip to re-use.
  ThreadStop how = state.stop;
  if (how == ThreadStop::kSyscallExit && static_cast<std::int64_t>(saved->orig_rax) < 0) {
    how = ThreadStop::kEvent;
  }
  // In a signal-delivery-stop, the stop's siginfo (a fault's si_code and si_addr) is put back
  // afterwards: resuming with the signal delivers exactly what the kernel reported.
  siginfo_t stop_info{};
  const bool had_info = state.stop == ThreadStop::kSignal && ptrace_getsiginfo(tid, stop_info);
  Result<std::int64_t> result = 0;
  switch (how) {
    case ThreadStop::kSyscallEnter: {
      // Case 1: turn this entry into `nr`, then rewind to re-enter the original call.
      regs.orig_rax = static_cast<std::uint64_t>(nr);
      set_args(regs);
      if (auto r = tracer.set_regs(tid, regs); !r) return std::unexpected(r.error());
      if (auto r = run_to_syscall_stop(tracer, tid, state); !r) return std::unexpected(r.error());
      auto after = tracer.get_regs(tid);
      if (!after) return std::unexpected(after.error());
      result = static_cast<std::int64_t>(after->rax);
      x86::Regs again = *saved;
      again.rip -= 2;
      again.rax = saved->orig_rax;
      if (auto r = tracer.set_regs(tid, again); !r) return std::unexpected(r.error());
      if (auto r = run_to_syscall_stop(tracer, tid, state); !r) return std::unexpected(r.error());
      break;
    }
    case ThreadStop::kSyscallExit: {
      // Case 2: rewind to the `syscall` instruction with `nr`, run it, restore the result of
      // the original call.
      regs.rip -= 2;
      regs.rax = static_cast<std::uint64_t>(nr);
      set_args(regs);
      if (auto r = tracer.set_regs(tid, regs); !r) return std::unexpected(r.error());
      if (auto r = run_to_syscall_stop(tracer, tid, state); !r) return std::unexpected(r.error());
      if (auto r = run_to_syscall_stop(tracer, tid, state); !r) return std::unexpected(r.error());
      auto after = tracer.get_regs(tid);
      if (!after) return std::unexpected(after.error());
      result = static_cast<std::int64_t>(after->rax);
      x86::Regs back = *saved;
      const auto code = static_cast<std::int64_t>(saved->rax);
      if (state.kept_signal == 0 && code <= kErestartSys && code >= kErestartRestartBlock &&
          code != kErestartUnused) {
        // The original call was interrupted (a ptrace interrupt, a signal). The kernel restarts
        // it on the way back to user mode only while rax holds the restart code, which the
        // injected call replaced; with no signal left to deliver it would now return the code
        // (-512...) to the program. The restart is applied here, as the kernel would have: back
        // to the `syscall` instruction with the call's number (restart_syscall for
        // ERESTART_RESTARTBLOCK). A kept signal is re-raised on resume and the kernel applies
        // its restart rules to the code then.
        back.rip -= 2;
        back.rax = code == kErestartRestartBlock ? static_cast<std::uint64_t>(SYS_restart_syscall)
                                                 : saved->orig_rax;
      }
      if (auto r = tracer.set_regs(tid, back); !r) return std::unexpected(r.error());
      // Rewound, rip is on the `syscall` instruction, no longer after it: another call injected
      // in this stop (a watch's disarm, then its arm) must not rewind it again (it would run the
      // bytes before the instruction: a fault at each try, for ever). It single-steps the
      // process's `syscall` instruction, as in any other stop.
      if (back.rip != saved->rip) state.stop = ThreadStop::kEvent;
      break;
    }
    case ThreadStop::kSignal:
    case ThreadStop::kEvent:
    case ThreadStop::kSyscallEvent:
    case ThreadStop::kNone: {
      // Case 3: single-step a `syscall` instruction of the process's text. orig_rax = -1 so
      // the kernel does not apply syscall-restart rules to the injected call.
      auto at = gadget(tracer, process);
      if (!at) return std::unexpected(at.error());
      regs.rip = *at;
      regs.rax = static_cast<std::uint64_t>(nr);
      regs.orig_rax = ~0ULL;
      set_args(regs);
      if (auto r = tracer.set_regs(tid, regs); !r) return std::unexpected(r.error());
      for (;;) {
        // SIGTRAP unblocked for the step, so that its trap resets none of the program's.
        auto saved = ptrace_singlestep_unblocked(tid);
        if (!saved) return std::unexpected(saved.error());
        auto status = tracer.wait_stop(tid);
        if (*saved && status && WIFSTOPPED(*status)) {
          ignore_error(ptrace_setsigmask(tid, **saved), "a thread that is gone has no mask");
        }
        if (!status) return std::unexpected(status.error());
        if (!WIFSTOPPED(*status)) {
          return make_error(ErrorCode::kSrch,
                            "pid: " + tid_text(tid) + " ended during an injected system call");
        }
        const int sig = WSTOPSIG(*status);
        auto now = tracer.get_regs(tid);
        if (!now) return std::unexpected(now.error());
        if (sig == SIGTRAP && now->rip == *at + 2) {
          result = static_cast<std::int64_t>(now->rax);
          break;
        }
        if (ptrace_event(*status) == 0 && sig != SIGTRAP) state.kept_signal = sig;
      }
      if (auto r = tracer.set_regs(tid, *saved); !r) return std::unexpected(r.error());
      if (had_info) {
        if (auto r = ptrace_setsiginfo(tid, stop_info); !r) return std::unexpected(r.error());
      } else {
        state.stop_signal = SIGTRAP;
      }
      state.stop = ThreadStop::kSignal;
      break;
    }
  }
  return result;
}

Result<std::optional<int>> SyscallInjector::rerun_skipped(Tracer& tracer, pid_t tid) {
  auto regs = tracer.get_regs(tid);
  if (!regs) return std::unexpected(regs.error());
  regs->rip -= 2;
  regs->rax = regs->orig_rax;
  if (auto r = tracer.set_regs(tid, *regs); !r) return std::unexpected(r.error());
  if (auto r = ptrace_syscall(tid); !r) return std::unexpected(r.error());
  auto status = tracer.wait_stop(tid);
  if (!status) return std::unexpected(status.error());
  // Killed meanwhile: nothing else stops a thread between a call's entry and exit.
  if (!WIFSTOPPED(*status) || WSTOPSIG(*status) != kSyscallTrap) return *status;
  if (auto r = ptrace_syscall(tid); !r) return std::unexpected(r.error());
  return std::optional<int>();
}

}  // namespace hwarb::native
