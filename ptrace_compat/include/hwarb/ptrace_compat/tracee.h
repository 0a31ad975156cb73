// hwarb/ptrace_compat/tracee.h — one interface over a traced thread, simulated or real.
//
// A debugger (or a test) holds a Tracee and speaks ptrace to it: PEEKUSER/POKEUSER on the user
// area, wait for a stop, continue, single-step. Implementations:
//  - sim::SimTracee (sim/sim_tracee.h): a task of the simulated machine; the debug
//    registers are the emulation of debugreg_emulation.h, shared with perf and kernel users.
//  - native::LinuxTracee (linux/debug/): a real thread under ptrace(2).
//
// Contract (both implementations):
//  - peek_user/poke_user need the tracee in a stop (ptrace-stop), else ESRCH, as Linux. The
//    offset is decoded by user_area.h for layout(); errors are the kernel's (EIO, EINVAL,
//    ENOSPC, ...) with a message naming the field. A failed poke changes nothing (DR7 writes
//    restore the previous image; see debugreg_emulation.h).
//  - In the i386 layout a word is 4 bytes: peeks return at most 32 bits, and a poke of a value
//    that does not fit 32 bits is EINVAL naming `value` (the 32-bit ABI cannot express it).
//  - wait(kNoHang) reports the stop the tracee is in, or nullopt while it runs; wait(kBlock) waits
//    for the next stop (the simulated tracee runs only when its machine is driven, so there it is
//    EAGAIN while running). A tracee that has exited is ESRCH.
//  - cont() resumes from a stop; step() resumes for one instruction (PTRACE_SINGLESTEP), after
//    which it stops with SIGTRAP and DR6.BS set. Either on a running tracee: ESRCH.
//  - Stop::dr6 is DR6 as PEEKUSER shows it (hardware polarity) when wait() returns.
#pragma once

#include <cstdint>
#include <optional>

#include "hwarb/base/error.h"
#include "hwarb/ptrace_compat/user_area.h"

namespace hwarb::ptrace_compat {

struct Stop {
  int signal = 0;         // SIGTRAP, SIGSTOP, ...
  std::uint64_t dr6 = 0;  // PEEKUSER of DR6 at the stop
  friend bool operator==(const Stop&, const Stop&) = default;
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
