// hwarb/linux/syscall_injection.h — SyscallInjector: system calls run on behalf of a traced
// process in one of its stopped threads, and the rerun of a call the kernel was told to skip.
//
// Contract:
//  - The thread must be in a ptrace-stop, traced by the calling thread (Linux's ptrace rule),
//    and its StopState must say which stop: the injector reads the kind of stop to choose how the
//    call is made and leaves the state exact. A syscall stop stays one; any other stop is a
//    signal-delivery stop afterwards (of its signal, with its siginfo; SIGTRAP, the step's, when
//    it was none). A signal that arrives meanwhile is kept (kept_signal, the last one wins), for
//    the thread's next resume.
//  - inject() restores every register of the thread (and a signal-delivery stop's siginfo)
//    however the call ends; the call itself is the kernel's: its effects stay. In a
//    syscall-entry or syscall-exit stop it re-uses that call's `syscall` instruction (rewound);
//    in a kSyscallEvent stop it first runs the thread on to that call's syscall-exit stop (the
//    call's result then in rax, restored with the rest: a fork returns its child's id) and
//    injects there, leaving the thread in that syscall-exit stop; in any other stop it
//    single-steps a `syscall` instruction of the process's text (found once per process and kept
//    until forget()). Where the restart of an interrupted call was applied
//    (rip rewound onto its `syscall` instruction), the state says kEvent: a next call in the same
//    stop single-steps the process's instruction.
//  - Not all-or-nothing: an error in the middle (the thread killed, a register write refused)
//    may leave the thread's registers the injection's; the observer is told (nullptr) either way.
//  - Every wait goes through the Tracer: statuses of other tracees read meanwhile are its to keep.
// Thread-safety: none. Move-only (copyable state, but one per tracer).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <utility>

#include "hwarb/base/error.h"
#include "hwarb/x86/insn.h"

namespace hwarb::native {

// The kind of ptrace-stop a traced thread is in (kNone: running, or not known to be stopped).
// kEvent is any stop outside a system call and a signal's delivery: a ptrace event, an
// interrupt, an exec left by a step. kSyscallEvent is a ptrace event stop inside a system call
// that has not returned yet (a fork's, a vfork's end): the kernel writes the call's result into
// rax when the thread leaves the stop, over whatever registers a tracer set in it.
enum class ThreadStop : std::uint8_t {
  kNone,
  kSignal,
  kSyscallEnter,
  kSyscallExit,
  kEvent,
  kSyscallEvent,
};

// What the tracer keeps of a stopped thread's stop, which an injection reads and updates.
struct StopState {
  ThreadStop stop = ThreadStop::kNone;
  int stop_signal = 0;  // kSignal: the signal of the stop
  int kept_signal = 0;  // a signal to deliver on the next resume
};

class SyscallInjector {
 public:
  // What an injection needs of the thread's tracer: its waits (the one place statuses are read)
  // and registers, and the memory to find a `syscall` instruction in.
  class Tracer {
   public:
    // The next wait status (waitpid's raw status) of traced thread `tid`.
    virtual Result<int> wait_stop(pid_t tid) = 0;
    virtual Result<x86::Regs> get_regs(pid_t tid) = 0;
    virtual Result<void> set_regs(pid_t tid, const x86::Regs& regs) = 0;
    // The first occurrence of `code` in the executable mappings of `process`.
    virtual Result<std::uint64_t> find_code(pid_t process, std::span<const std::uint8_t> code) = 0;

   protected:
    Tracer() = default;
    Tracer(const Tracer&) = default;
    Tracer& operator=(const Tracer&) = default;
    ~Tracer() = default;
  };

  // Told of each injection while its registers are the injection's: first (tid, the registers
  // that put the thread back as if nothing had been injected: for a call injected at a system
  // call's entry, on the `syscall` instruction to run the program's call), then (tid, null)
  // once they are the thread's own again (every return of inject). Empty: nobody told.
  using Observer = std::function<void(pid_t tid, const x86::Regs* restore)>;
  void set_observer(Observer observer) { observer_ = std::move(observer); }

  // Runs system call `nr` with `args` in stopped thread `tid` of `process` (whose text has the
  // `syscall` instruction to step), in the stop `state` describes; the kernel's return value (a
  // negative errno on failure). ESRCH naming `pid` when the thread ends meanwhile.
  Result<std::int64_t> inject(Tracer& tracer, pid_t tid, pid_t process, StopState& state, long nr,
                              std::array<std::uint64_t, 6> args);
  // The address of a `syscall` instruction in the executable mappings of `process` (kept).
  // ENOENT naming `text` when there is none.
  Result<std::uint64_t> gadget(Tracer& tracer, pid_t process);
  // Resumes `tid` with PTRACE_SYSCALL until its next syscall stop; signals that arrive meanwhile
  // are kept in `state` (the last one wins).
  static Result<void> run_to_syscall_stop(Tracer& tracer, pid_t tid, StopState& state);
  // Drops what is kept of `process` (it execed, ended, or was let go).
  void forget(pid_t process) { gadgets_.erase(process); }

  // Thread `tid` is in the syscall-entry stop of a call the kernel will skip (it was resumed
  // with PTRACE_SYSEMU): it is rewound onto its `syscall` instruction with its number in rax (as
  // the kernel restarts a call) and resumed with PTRACE_SYSCALL, the skipped call's exit stop
  // passed over, so that the call runs again from a new syscall-entry stop. nullopt then; the
  // status that ended the thread meanwhile otherwise (it is not resumed: the tracer reports it).
  static Result<std::optional<int>> rerun_skipped(Tracer& tracer, pid_t tid);

 private:
  std::map<pid_t, std::uint64_t> gadgets_;  // per process: address of a `syscall` instruction
  Observer observer_;
};

}  // namespace hwarb::native
