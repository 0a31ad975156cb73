// hwarb/linux/proc_maps.h — the memory map of a process (/proc/PID/maps), its threads
// (/proc/PID/task) and its memory (/proc/PID/mem).
//
// Contract:
//  - parse_maps() is pure: one Mapping per well-formed line, in file order; a malformed line is
//    EINVAL naming `maps` with its line number (the kernel never writes one, so it means the
//    text is not a maps file).
//  - read_maps()/list_threads() read /proc once each; ENOENT/ESRCH naming `pid` when the
//    process is gone, EACCES naming `pid` when /proc refuses (another user's process).
//  - Nothing is cached: a map read is a snapshot, stale as soon as the process runs.
//  - Memory transfers through /proc/PID/mem ignore page protection (FOLL_FORCE) and are
//    all-or-nothing per call: a short transfer is EFAULT naming `addr`.
// Thread-safety: all functions are reentrant.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/fd.h"

namespace hwarb::native {

// A thread's restartable-sequences area (rseq(2)), which the kernel writes at every return to
// the thread (its cpu_id): len 0 when the thread registered none (ptrace_get_rseq).
struct RseqArea {
  std::uint64_t addr = 0;
  std::uint64_t len = 0;
};

struct Mapping {
  std::uint64_t start = 0;  // first byte
  std::uint64_t end = 0;    // one past the last byte
  bool read = false, write = false, exec = false;
  bool shared = false;       // 's' (else 'p', private)
  std::uint64_t offset = 0;  // file offset of `start`
  std::uint64_t inode = 0;
  std::string path;  // "" for anonymous; "[stack]", "[heap]", "[vdso]", ... as the kernel prints

  bool contains(std::uint64_t addr) const { return addr >= start && addr < end; }
  // PROT_* bits of read/write/exec.
  int prot() const;
};

Result<std::vector<Mapping>> parse_maps(std::string_view text);
Result<std::vector<Mapping>> read_maps(pid_t pid);
// The mapping containing `addr`, if any.
std::optional<Mapping> find_mapping(const std::vector<Mapping>& maps, std::uint64_t addr);

// The thread ids of process `pid` (/proc/PID/task), ascending.
Result<std::vector<pid_t>> list_threads(pid_t pid);

// The process (thread group) of thread `tid` (/proc/TID/status Tgid). ESRCH naming `tid` when no
// such thread exists.
Result<pid_t> thread_group(pid_t tid);
// The TracerPid of /proc/TID/status: the thread's tracer, 0 when none. ESRCH naming `tid` when
// there is no such thread.
Result<pid_t> tracer_of(pid_t tid);
// The signals process `pid` catches (a handler installed) and ignores: /proc/PID/status SigCgt
// and SigIgn (bit n-1 for signal n). ESRCH naming `pid` when there is no such process.
struct SignalDispositions {
  std::uint64_t caught = 0;
  std::uint64_t ignored = 0;
};
Result<SignalDispositions> signal_dispositions(pid_t pid);

// Reads `out.size()` bytes at `addr` of process `pid` through /proc/PID/mem (no ptrace stop
// needed; the caller needs ptrace access to the process). EFAULT naming `addr` on a short read.
Result<void> read_process_memory(pid_t pid, std::uint64_t addr, std::span<std::uint8_t> out);

// One part of a gathered read: `out.size()` bytes at `addr`.
struct RemoteRead {
  std::uint64_t addr = 0;
  std::span<std::uint8_t> out;
};
// process_vm_readv(2) of every part in one system call (the caller needs ptrace access). All or
// nothing: EFAULT naming `addr` when any part is short — an unmapped page, or one the process
// cannot read (PROT_NONE), which /proc/PID/mem would still read; ESRCH/EPERM naming `pid`.
Result<void> read_process_memory(pid_t pid, std::span<const RemoteRead> parts);

// The whole of /proc/PID/LEAF (e.g. "auxv", "cmdline"): bytes as the kernel gives them. The
// kernel's errno naming `pid` (ENOENT: no such process).
Result<std::string> read_proc_file(pid_t pid, std::string_view leaf);

// /proc/PID/exe resolved (the executable's path).
Result<std::string> executable_path(pid_t pid);
// readlink(2) of `path`, whatever its length: the kernel's errno naming `path`.
Result<std::string> read_link(const std::string& path);

// /proc/PID/mem opened read-only, or read-write when `writable`, close-on-exec, for
// pread_memory/pwrite_memory. The descriptor keeps the address space the process had when it
// was opened: reopen after the process execs. The caller needs ptrace access to the process.
// ENOENT naming `pid` when there is no such process, EACCES naming `pid` when refused.
Result<Fd> open_process_memory(pid_t pid, bool writable);
// pread(2) of out.size() bytes at `addr` through a descriptor from open_process_memory. EFAULT
// naming `addr` on a short read; the kernel's errno naming `addr` (EIO: nothing mapped there), or
// naming `fd` for EBADF.
Result<void> pread_memory(int fd, std::uint64_t addr, std::span<std::uint8_t> out);
// pwrite(2) of data.size() bytes at `addr`. Errors as pread_memory.
Result<void> pwrite_memory(int fd, std::uint64_t addr, std::span<const std::uint8_t> data);

}  // namespace hwarb::native
