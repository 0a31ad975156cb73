// hwarb/linux/signal_action.h — a traced process's signal actions, read and set from outside
// (an rt_sigaction(2) injected into one of its stopped threads), and the parachute: a no-op
// handler that keeps a watched program alive through the stops its watcher leaves behind when
// the watcher is killed.
//
// Why a parachute: the software watch stops the program's threads in signal-delivery-stops of
// its own making (a protection fault's SIGSEGV, a single-step's SIGTRAP). A stop the watcher has
// not collected yet (waitpid) still holds its signal; when the watcher dies, the kernel detaches
// the thread and delivers that signal, and a thread whose single-step trap flag the watcher set
// traps once more as it runs on. With the default action either kills the program. On a busy
// multi-threaded program some thread is in such a stop most of the time.
//
// The parachute is the action { handler: a `ret` instruction of the process's own text,
// restorer: its rt_sigreturn sequence (the C library's __restore_rt), SA_RESTORER | SA_NODEFER }.
// A signal delivered to it returns at once (the handler's `ret` pops the frame's return address,
// the restorer, whose rt_sigreturn restores the interrupted context exactly), and the kernel
// clears a debugger's trap flag as it delivers a signal to a handler: the thread runs on as if
// nothing had happened. A fault on a page still protected is taken again (a loop of no-op
// deliveries) until the watchdog restores the page. It is set only for a signal whose action is
// the default: a program's own handler or SIG_IGN is never replaced.
//
// Contract:
//  - inject_sigaction() needs `tid` stopped; it passes the structs below the thread's stack red
//    zone and puts those bytes back. On failure nothing is changed (the call did not run or
//    failed in the kernel: EINVAL/EFAULT named after `sig`).
//  - parachute_action() reads the process's executable mappings; ENOENT when they have no `ret`
//    or no rt_sigreturn sequence (a static program without signal code): no parachute there.
// Thread-safety: none (the Inferior's thread only).
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "hwarb/base/error.h"
#include "hwarb/linux/inferior.h"

namespace hwarb::native {

// The kernel's struct sigaction of rt_sigaction(2) on x86-64 (8-byte signal set).
struct KernelSigaction {
  std::uint64_t handler = 0;  // SIG_DFL 0, SIG_IGN 1, else the handler's address
  std::uint64_t flags = 0;
  std::uint64_t restorer = 0;
  std::uint64_t mask = 0;
  bool operator==(const KernelSigaction&) const = default;
};

inline constexpr std::uint64_t kSigDflHandler = 0;
inline constexpr std::uint64_t kSigIgnHandler = 1;

// The bit of `sig` in a 64-bit signal set.
constexpr std::uint64_t signal_bit(int sig) {
  return std::uint64_t{1} << (sig - 1);
}

// rt_sigaction(sig, set, &old) run by thread `tid`: the previous action. `set` null reads only.
Result<KernelSigaction> inject_sigaction(Inferior& inferior, pid_t tid, int sig,
                                         const KernelSigaction* set);

// The parachute action for `process` (see above).
Result<KernelSigaction> parachute_action(Inferior& inferior, pid_t process);

}  // namespace hwarb::native
