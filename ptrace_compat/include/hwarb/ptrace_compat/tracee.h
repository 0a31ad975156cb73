// hwarb/ptrace_compat/tracee.h — one interface over a traced thread, simulated or real.
//
// A debugger (or a test) holds a Tracee and speaks ptrace to it: PEEKUSER/POKEUSER on the user
// area, wait for a stop, continue, single-step. Implementations:
//  - sim::SimTracee (sim/sim_tracee.h): a task of the simulated machine; the debug
//    registers are the emulation of debugreg_emulation.h, shared with perf and kernel users.
//  - native::LinuxTracee (linux/ptrace/): a real thread under ptrace(2).
//  - native::VirtualTracee (linux/soft_watch/): a real thread whose DR0–DR7 are emulated.
//
// Contract (every implementation):
//  - peek_user/poke_user need the tracee in a stop (ptrace-stop), else ESRCH, as Linux. The
//    offset is decoded by user_area.h for layout(); errors are the kernel's (EIO, EINVAL,
//    ENOSPC, ...) with a message naming the field. A failed poke changes nothing (DR7 writes
//    restore the previous image; see debugreg_emulation.h).
//  - In the i386 layout a word is 4 bytes: peeks return at most 32 bits, and a poke of a value
//    that does not fit 32 bits is EINVAL naming `value` (the 32-bit ABI cannot express it).
//  - wait(kNoHang) reports the stop the tracee is in, or nullopt while it runs; wait(kBlock) waits
//    for the next stop (the simulated tracee runs only when its machine is driven, so there it is
//    EAGAIN while running).
//  - The end of the tracee is a normal outcome of wait, as waitpid reports it: a Stop of kind
//    kExited (`status` is its exit status) or kKilled (`signal` is the signal that killed it),
//    reported once by the wait that sees it; the tracee is reaped then, and every later call,
//    wait included, is ESRCH (no such tracee). An ended Stop has dr6 0: there is no DR6 to read.
//    The simulated machine has neither exit codes nor signals: its tasks exit with status 0.
//  - cont() resumes from a stop; step() resumes for one instruction (PTRACE_SINGLESTEP), after
//    which it stops with SIGTRAP and DR6.BS set. Either on a running tracee: ESRCH.
//  - Stop::dr6 is DR6 as PEEKUSER shows it (hardware polarity) when wait() returns.
#pragma once

#include <cstdint>
#include <optional>

#include "hwarb/base/error.h"
#include "hwarb/ptrace_compat/user_area.h"

namespace hwarb::ptrace_compat {

enum class StopKind : std::uint8_t {
  kStopped,  // a ptrace-stop: `signal` stopped it, `dr6` is its DR6
  kExited,   // it exited with `status` (as WEXITSTATUS)
  kKilled,   // `signal` killed it (as WTERMSIG)
};

struct Stop {
  int signal = 0;         // SIGTRAP, SIGSTOP, ...; kKilled: the signal that killed it
  std::uint64_t dr6 = 0;  // PEEKUSER of DR6 at the stop; 0 once ended
  StopKind kind = StopKind::kStopped;
  int status = 0;  // kExited: the exit status
  friend bool operator==(const Stop&, const Stop&) = default;

  static Stop exited(int exit_status) { return Stop{0, 0, StopKind::kExited, exit_status}; }
  static Stop killed(int by_signal) { return Stop{by_signal, 0, StopKind::kKilled, 0}; }
  // The tracee is gone (and reaped): nothing can be resumed or peeked any more.
  bool ended() const { return kind != StopKind::kStopped; }
};

enum class WaitMode : std::uint8_t { kNoHang, kBlock };

class Tracee {
 public:
  virtual ~Tracee() = default;

  virtual UserLayout layout() const = 0;
  virtual Result<std::uint64_t> peek_user(std::uint64_t offset) = 0;
  virtual Result<void> poke_user(std::uint64_t offset, std::uint64_t value) = 0;
  virtual Result<std::optional<Stop>> wait(WaitMode mode = WaitMode::kNoHang) = 0;
  virtual Result<void> cont() = 0;
  virtual Result<void> step() = 0;

  // u_debugreg[n] of layout() (n in 0..7).
  Result<std::uint64_t> peek_debugreg(int n) {
    return peek_user(debugreg_offset(user_area(layout()), n));
  }
  Result<void> poke_debugreg(int n, std::uint64_t value) {
    return poke_user(debugreg_offset(user_area(layout()), n), value);
  }
};

}  // namespace hwarb::ptrace_compat
