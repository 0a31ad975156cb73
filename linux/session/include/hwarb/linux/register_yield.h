// hwarb/linux/register_yield.h — RegisterYield: hwarb gives its debug registers up to the program
// it watches when the program asks the kernel for one (breakpoint_requests.h: its
// perf_event_open of a breakpoint, or a debugger it runs writing a tracee's DR0-DR3/DR7).
//
// How a request is served (serve(), between two events of run_target, threads running):
//  1. Not a breakpoint (another perf event type), a DR7 write enabling nothing, a DR4-DR6 write,
//     or a CPU-wide breakpoint: the call runs as made.
//  2. A breakpoint for thread T: hwarb opens a breakpoint of its own on T (a trial). Opened, the
//     program's call will find a register too: the trial is closed, the call runs.
//  3. The trial finds none (ENOSPC) and T is a thread hwarb watches with registers: every thread
//     is stopped, the engine gives up one hardware watch (it goes on in software, with a note
//     naming who took its registers), the stopped threads are resumed as the engine runs them
//     (Engine::resume_stopped), and case 2 is tried again — until a trial opens or the engine
//     has nothing left to give.
//  4. T is not hwarb's, or nothing is left to give: the call runs, and the kernel answers it as
//     it would without hwarb.
// A hold is what the program sees of hwarb even when nothing can be given (case 4): the calling
// thread sleeps in the filter and is scheduled in again just before its call runs. Without the
// hold, a program that opened a breakpoint of its own while hwarb's were armed in the same thread
// had hwarb miss that thread's next accesses in about 1 run in 150 here (a KVM guest, other
// processes keeping both CPUs busy: 5 of 800 runs of 300 writes lost 66 to 194 of them, and the
// breakpoint event counted none of those); held, none in 800 runs. So run_target arms a spawned
// program whenever the engine holds registers, movable or not, and `hwarb gdbserver` arms one as
// its first watch takes a register (GdbTarget::request_fd). Case 2's trial is a disabled
// breakpoint: it holds a slot without being written to T's debug registers. The requesting thread,
// stopped in case 3 in the middle of its call, makes the call again when resumed (the kernel
// restarts it), and that second request finds its register.
//
// Contract:
//  - arm() needs a spawned process with thread `tid` stopped; it installs the request filter in
//    every thread of the process by an injected seccomp(2) (the filter's image written below the
//    stack's red zone and those bytes put back; the listener descriptor copied out and closed
//    in the process), and starts the continuer that serves the filter once hwarb is gone. The
//    process then runs unchanged but for those calls' time and /proc/PID/status's "Seccomp:".
//    Errors: the injected call's errno naming `seccomp` (EACCES: the program has no
//    CAP_SYS_ADMIN — a filter would need no_new_privs, which changes what its execs may do, so
//    hwarb does not set it); the Inferior's; start_continuer's. On error the process has no
//    filter, or (past the injection) a filter served by the continuer.
//  - An attached process is never armed: the filter would outlive the attach (a filter cannot be
//    taken back) and the program would not run on unmodified after hwarb detached.
//  - serve() answers every request pending now and returns; never blocks on the listener.
//  - hand_over() (and the destructor) lets the continuer serve from now on.
// Thread-safety: none; the Inferior's thread only. Move-only.
#pragma once

#include <sys/types.h>

#include <string>

#include "hwarb/base/error.h"
#include "hwarb/linux/fd.h"
#include "hwarb/linux/inferior.h"

namespace hwarb::native {

class Engine;

class RegisterYield {
 public:
  static Result<RegisterYield> arm(Inferior& inferior, pid_t tid);

  RegisterYield(RegisterYield&&) noexcept = default;
  RegisterYield& operator=(RegisterYield&&) noexcept = default;
  RegisterYield(const RegisterYield&) = delete;
  RegisterYield& operator=(const RegisterYield&) = delete;
  ~RegisterYield() = default;

  [[nodiscard]] int listener() const { return listener_.get(); }
  Result<void> serve(Inferior& inferior, Engine& engine);
  void hand_over() { gate_.reset(); }
  // Registers given up so far.
  [[nodiscard]] int yielded() const { return yielded_; }

 private:
  RegisterYield(Fd listener, Fd gate) : listener_(std::move(listener)), gate_(std::move(gate)) {}
  Fd listener_;
  Fd gate_;  // closed: the continuer serves
  int yielded_ = 0;
};

}  // namespace hwarb::native
