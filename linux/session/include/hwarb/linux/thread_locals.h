// hwarb/linux/thread_locals.h — ThreadLocals, where a thread's copy of a thread-local variable
// is, in a traced process: glibc's libthread_db (td_ta_new, td_ta_map_lwp2thr,
// td_thr_tls_get_addr), as gdbserver asks it, with the process services it calls back
// (proc_service.h) served by hwarb: memory through the Inferior, a thread's registers through
// ptrace, and symbols through hwarb's own ELF reading of the process's loaded modules.
//
// Contract:
//  - open(inferior, process) reads the symbols of `process`'s loaded modules once and opens
//    libthread_db's agent on it. Errors: libthread_db's td_init failing (EOPNOTSUPP, "libthread_db
//    could not be initialised"); no thread library found in the process — libc is not loaded yet,
//    or a static program without it (EOPNOTSUPP naming `libthread_db`); a libc that this
//    libthread_db does not match (EOPNOTSUPP, "version"); SymbolTable::load's errors.
//  - address(tid, lm, offset) is the run-time address of byte `offset` of the thread-local block
//    of the module whose link_map entry is at `lm` (0: the executable's own block, module id 1,
//    as gdbserver takes it), in thread `tid` of the process. The thread must be in a ptrace-stop
//    (its registers are read); nothing in the process changes. Errors: ESRCH naming `thread` for
//    a thread that is not a stopped thread of the process, or one libthread_db does not know; ENXIO
//    "TLS not allocated" when the thread has not allocated that module's block yet (a library
//    loaded after the thread started, before its first access); EOPNOTSUPP when the module has no
//    thread-local storage; EIO naming the libthread_db error otherwise.
//  - The agent keeps what it read of the thread library (its symbol addresses): after the process
//    execs, open a new one.
// Thread-safety: none; one ThreadLocals at a time per Inferior. Move-only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>

#include "hwarb/base/error.h"
#include "hwarb/linux/inferior.h"

namespace hwarb::native {

class ThreadLocals {
 public:
  static Result<ThreadLocals> open(Inferior& inferior, pid_t process);

  ThreadLocals(ThreadLocals&&) noexcept;
  ThreadLocals& operator=(ThreadLocals&&) noexcept;
  ~ThreadLocals();

  [[nodiscard]] pid_t process() const;
  Result<std::uint64_t> address(pid_t tid, std::uint64_t lm, std::uint64_t offset);

  struct Impl;

 private:
  explicit ThreadLocals(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hwarb::native
