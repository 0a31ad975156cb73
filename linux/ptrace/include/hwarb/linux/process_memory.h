// hwarb/linux/process_memory.h — ProcessMemory, the memory of a traced process and of the
// processes its tracer follows, through /proc/PID/mem.
//
// Contract:
//  - The tracer must have ptrace access to each process (it traces it); no thread needs to be
//    stopped for a transfer, but one that runs may change the bytes read or written meanwhile.
//  - /proc/PID/mem ignores page protection (FOLL_FORCE): PROT_NONE pages and text are read and
//    written as any other. Each transfer is all-or-nothing per call: a short transfer is EFAULT
//    naming `addr`; nothing mapped at `addr` is the kernel's errno (EIO) naming `addr`.
//  - `process` 0 (or pid()) means the own process; a followed process goes through the
//    descriptor follow() opened; any other process is opened for that one call.
//  - A descriptor keeps the address space its process had when it was opened: after an exec,
//    open() (the own process) or follow() (a followed one) again.
//  - The gathered read (read_memory of parts) is process_vm_readv: all or nothing, and it
//    cannot read what the process itself cannot (PROT_NONE).
// Thread-safety: none. Move-only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/fd.h"
#include "hwarb/linux/proc_maps.h"
#include "hwarb/x86/insn.h"

namespace hwarb::native {

class ProcessMemory {
 public:
  ProcessMemory() = default;

  // Opens /proc/PID/mem of `pid` read-write as the own process's (again after an exec).
  // open_process_memory's errors.
  Result<void> open(pid_t pid);
  // The own process (-1 before open()).
  [[nodiscard]] pid_t pid() const { return pid_; }
  // Opens (or opens again, after its exec) the memory of `process`, a followed process.
  // open_process_memory's errors; the descriptor it had is kept then.
  Result<void> follow(pid_t process);
  // Closes the memory of followed process `process` (it ended, or was let go).
  void forget(pid_t process) { followed_.erase(process); }
  [[nodiscard]] bool follows(pid_t process) const { return followed_.contains(process); }
  // The followed processes, ascending.
  [[nodiscard]] std::vector<pid_t> followed() const;
  // Followed process `process` becomes the own process (the own one ended); false when it is
  // not followed.
  bool adopt(pid_t process);

  // Reads out.size() bytes at `addr` of the own process, or of `process`.
  Result<void> read_memory(std::uint64_t addr, std::span<std::uint8_t> out, pid_t process = 0);
  // Several parts in one system call (read_process_memory's gathered read), all or nothing: an
  // error when any part cannot be read that way (e.g. a PROT_NONE page: read_memory still can).
  Result<void> read_memory(std::span<const RemoteRead> parts, pid_t process = 0);
  Result<void> write_memory(std::uint64_t addr, std::span<const std::uint8_t> data,
                            pid_t process = 0);
  // The little-endian value of the `size` (1..8; else EINVAL naming `size`) bytes at `addr`.
  Result<std::uint64_t> read_word(std::uint64_t addr, int size, pid_t process = 0);
  // The address of the first occurrence of `code` in the executable mappings of `process`
  // ([vsyscall] aside); ENOENT naming `text` when there is none, EINVAL naming `code` when it
  // is empty.
  Result<std::uint64_t> find_code(pid_t process, std::span<const std::uint8_t> code);
  // The instruction at `addr`, decoded from as many of the 15 bytes there as are readable (an
  // instruction may end just before an unmapped page). x86::decode's errors.
  Result<x86::Insn> decode_at(std::uint64_t addr, pid_t process = 0);

 private:
  // The descriptor of `process`'s memory: a followed process's, the own one's, or one opened
  // now (`writable` or not) and kept in `opened` for the caller's transfer.
  Result<int> descriptor(pid_t process, bool writable, Fd& opened);

  pid_t pid_ = -1;
  Fd mem_;
  std::map<pid_t, Fd> followed_;
};

}  // namespace hwarb::native
