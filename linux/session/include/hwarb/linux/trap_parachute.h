// hwarb/linux/trap_parachute.h — TrapParachute: the hardware watch path's parachute for SIGTRAP
// (the action of signal_action.h), for an attached program guarded by a watchdog.
//
// Why: each hardware hit stops its thread with a SIGTRAP (perf's sigtrap, si_code TRAP_PERF). A
// thread in such a stop when hwarb is killed keeps that signal, and the kernel delivers it as it
// detaches the thread: with the default action, the program dies (measured: 17 of 20 rounds of
// `kill -9` of `hwarb watch -p` on a 4-thread writer). With the parachute the signal returns at
// once; the watchdog then sets the action back to the default and drops the SIGTRAPs still
// pending (watchdog.h).
//
// Contract:
//  - raise() needs a stopped thread of the process; it reads the program's SIGTRAP action (an
//    injected rt_sigaction) and, where it is the default or a handler of the program's, sets the
//    parachute (a stale SIGTRAP handed to a program's handler, a debugger-like program's say,
//    would be taken for its own). A program's SIG_IGN is never replaced; a process whose text has
//    no `ret` or rt_sigreturn sequence gets none (false).
//  - lower() (a stopped thread) puts the program's action back where the parachute still is: a
//    program that set an action of its own since keeps it. Before a SIGTRAP of the program's own
//    is passed through, and when the hardware path is taken down.
//  - fork()/forget() follow the processes: a forked child inherits its parent's actions; an exec
//    resets a handler to the default.
//  - plan() is what the watchdog sets back: the processes with the parachute up, each with the
//    program's own action.
// Not covered: the hardware path takes no system-call stops, so a program that reads its own
// SIGTRAP action while watched sees the parachute (the software path hides it).
// Thread-safety: none (the Inferior's thread only).
#pragma once

#include <sys/types.h>

#include <map>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/inferior.h"
#include "hwarb/linux/signal_action.h"
#include "hwarb/linux/watchdog.h"

namespace hwarb::native {

class TrapParachute {
 public:
  Result<bool> raise(Inferior& inferior, pid_t tid);
  Result<void> lower(Inferior& inferior, pid_t tid);
  // Every raised parachute lowered, each in a stopped thread of its process.
  Result<void> lower_all(Inferior& inferior);
  void fork(pid_t parent, pid_t child);
  void forget(pid_t process) { up_.erase(process); }
  [[nodiscard]] bool up(pid_t process) const { return up_.contains(process); }
  [[nodiscard]] bool empty() const { return up_.empty(); }
  [[nodiscard]] std::vector<RestoreSignals> plan() const;

 private:
  struct Up {
    KernelSigaction program;    // what the program had (the default, flags and mask included)
    KernelSigaction parachute;  // what was set
  };
  std::map<pid_t, Up> up_;  // by process
};

}  // namespace hwarb::native
