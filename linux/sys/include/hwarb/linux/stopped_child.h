// hwarb/linux/stopped_child.h — StoppedChild, a move-only owner of a forked child process that is
// traced by the caller and sits in a ptrace-stop, ready for PEEKUSER/POKEUSER.
//
// Contract:
//  - spawn() forks. The child asks to die with its parent (PR_SET_PDEATHSIG), pins itself to
//    `cpu` when one is given (so it stops there: the CPU the kernel's cross-CPU calls for it go
//    to), does PTRACE_TRACEME and raise(SIGSTOP), then pauses forever; it makes raw system calls
//    only (async-signal-safe, no allocation: safe under ASan and in a multi-threaded parent).
//    spawn() returns once waitpid has seen that SIGSTOP stop; the child is then in a
//    signal-delivery-stop and the calling thread is its tracer. Errors: EAGAIN/ENOMEM from
//    fork; EINVAL naming `cpu` for a CPU outside 0..1023 or that it may not run on; EPERM naming
//    `ptrace` when the child could not become a tracee (PTRACE_TRACEME
//    refused: seccomp, a security module); the child is reaped before any error returns.
//  - Only the thread that called spawn() may make ptrace requests on the child (Linux's rule).
//  - wait() is waitpid on the child; it remembers when the child was reaped (exited or killed) so
//    that nothing is ever sent to a pid that may have been reused.
//  - kill() and the destructor send SIGKILL and reap the child (whatever stop it is in). After a
//    move the moved-from object owns nothing.
// Thread-safety: none (one owner).
#pragma once

#include <sys/types.h>

#include <optional>

#include "hwarb/base/error.h"
#include "hwarb/linux/syscalls.h"

namespace hwarb::native {

class StoppedChild {
 public:
  static Result<StoppedChild> spawn(std::optional<int> cpu = std::nullopt);

  StoppedChild(StoppedChild&& other) noexcept;
  StoppedChild& operator=(StoppedChild&& other) noexcept;
  StoppedChild(const StoppedChild&) = delete;
  StoppedChild& operator=(const StoppedChild&) = delete;
  ~StoppedChild();

  // The child's pid; -1 once it has been reaped (or after a move).
  pid_t pid() const { return pid_; }
  bool alive() const { return pid_ > 0; }

  // waitpid on the child (wait_for); an exit or a kill reaps it (pid() becomes -1). ESRCH naming
  // `child` once reaped.
  Result<WaitStatus> wait(bool nohang);
  // SIGKILL, then reap. No-op once reaped.
  Result<void> kill();

 private:
  explicit StoppedChild(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
};

}  // namespace hwarb::native
