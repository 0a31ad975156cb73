// ptrace_stops.h (private to linux/ptrace) — the vocabulary Inferior's sources share to read a
// wait status and to name a thread.
//
// Stateless: every function reads only its arguments (thread_group_of reads /proc).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>

#include "hwarb/linux/proc_maps.h"

namespace hwarb::native::detail {

// The stop signal of a syscall-entry or syscall-exit stop (PTRACE_O_TRACESYSGOOD).
constexpr int kSyscallTrap = SIGTRAP | 0x80;

inline std::string tid_text(pid_t tid) {
  return "thread " + std::to_string(tid);
}

// The PTRACE_EVENT_* of a stop's wait status (0: none).
inline int ptrace_event(int status) {
  return (status >> 16) & 0xffff;
}

// The thread group of `tid` (/proc/TID/status Tgid), or -1.
inline pid_t thread_group_of(pid_t tid) {
  return thread_group(tid).value_or(-1);
}

}  // namespace hwarb::native::detail
