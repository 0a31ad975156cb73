// hwarb/linux/syscalls.h — thin wrappers of the Linux system calls hwarb's real backend needs:
// ptrace(2) on the user area, resuming and detaching; waitpid(2); kill(2); CPU affinity;
// perf_event_open(2) for PERF_TYPE_BREAKPOINT events.
//
// Contract:
//  - Each wrapper makes exactly one system call (wait_for and the Fd-returning calls retry on
//    EINTR) and converts errno once, here, into an hwarb::Error: the code is from_errno(errno)
//    (an errno outside ErrorCode becomes EIO), the message starts with the field the kernel
//    refused (`offset`, `value`, `pid`, `slots`, `attr`, ...) and ends with the kernel's own
//    errno name and text, so nothing is lost when the code had to be folded into EIO.
//  - Nothing is all-or-nothing beyond what the kernel guarantees for the one call.
//  - ptrace requests must come from the tracer thread (Linux's rule); PEEKUSER/POKEUSER and the
//    resume requests need the tracee in a ptrace-stop, else ESRCH (the kernel's answer).
// Thread-safety: as the system calls themselves (errno is per thread).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "hwarb/base/error.h"
#include "hwarb/linux/fd.h"
#include "hwarb/base/bp_type.h"

namespace hwarb::linux {

// PTRACE_PEEKUSER through the raw system call (the word comes back through a pointer, so a
// word of -1 is not mistaken for an error). Typical errors: EIO (offset misaligned or past the
// user area), ESRCH (no such tracee, or not in a ptrace-stop).
Result<std::uint64_t> ptrace_peek_user(pid_t pid, std::uint64_t offset);
// PTRACE_POKEUSER. Typical errors: EIO (offset; DR4/DR5; a field without a register), EINVAL and
// ENOSPC (value: a refused breakpoint), ESRCH.
Result<void> ptrace_poke_user(pid_t pid, std::uint64_t offset, std::uint64_t value);
// PTRACE_CONT / PTRACE_SINGLESTEP / PTRACE_DETACH, delivering `signal` (0: none).
Result<void> ptrace_cont(pid_t pid, int signal = 0);
Result<void> ptrace_singlestep(pid_t pid, int signal = 0);
Result<void> ptrace_detach(pid_t pid, int signal = 0);
// PTRACE_ATTACH (the tracee will report a SIGSTOP stop through wait_for). EPERM when refused.
Result<void> ptrace_attach(pid_t pid);

// kill(2).
Result<void> send_signal(pid_t pid, int signal);

// sched_getaffinity(2): the CPUs thread `pid` (0: the calling thread) may run on, ascending
// (CPUs below CPU_SETSIZE = 1024).
Result<std::vector<int>> cpu_affinity(pid_t pid);
// sched_setaffinity(2) to the one CPU `cpu`. A thread that is not running moves there only when it
// next runs: a tracee in a stop stays on the CPU it stopped on (StoppedChild::spawn(cpu) pins the
// child before it stops). EINVAL naming `cpu` outside 0..1023 or not allowed.
Result<void> pin_to_cpu(pid_t pid, int cpu);

// Limits this process's address space (RLIMIT_AS, soft and hard) to what is mapped now plus
// `extra` bytes, so that a larger allocation fails with ENOMEM. Irreversible for an unprivileged
// process: meant for a forked test child. ENOENT when /proc/self/status has no VmSize.
Result<void> limit_address_space(std::uint64_t extra);

// What waitpid(2) reported about one child.
enum class WaitKind : std::uint8_t {
  kRunning,  // nohang, and nothing to report
  kStopped,  // a stop; value = the stop signal (SIGTRAP for ptrace event stops)
  kExited,   // value = the exit status
  kKilled,   // value = the signal that killed it
};
struct WaitStatus {
  WaitKind kind = WaitKind::kRunning;
  int value = 0;
  int raw = 0;  // the raw status word (0 for kRunning)
  friend bool operator==(const WaitStatus&, const WaitStatus&) = default;
};
// waitpid(pid, __WALL | (nohang ? WNOHANG : 0)), retried on EINTR. ECHILD naming `pid` when it
// is not a child (or tracee) of the caller, or was reaped already.
Result<WaitStatus> wait_for(pid_t pid, bool nohang);

// perf_event_open(2) of a PERF_TYPE_BREAKPOINT event on thread `pid` (cpu -1: wherever it runs),
// with the attributes Linux's hw_breakpoint_init gives a user breakpoint: pinned, sample_period
// 1, exclude_kernel (as ptrace's breakpoints), enabled at once, close-on-exec. The event holds
// one of the task's debug-register slots until the Fd is closed. Errors: ENOSPC (`slots`: none
// left for the task), EINVAL/EOPNOTSUPP (`attr`: address, len or type refused), ESRCH (`pid`),
// EACCES/EPERM (`pid`: not allowed), ENOENT/ENODEV (`attr`: no breakpoint PMU).
Result<Fd> perf_breakpoint_open(pid_t pid, std::uint64_t addr, std::uint64_t len, BpType type);

}  // namespace hwarb::linux

// probe and perf ring (linux_perf)
// The kernel's own structures, declared here so that this header stays free of <linux/*.h>;
// callers that fill them include <linux/perf_event.h> and <sys/user.h>.
struct perf_event_attr;
struct user_regs_struct;

#include <optional>
#include <string_view>

namespace hwarb::linux {

// perf_event_open(2) with the caller's attributes (any event type), retried on EINTR;
// PERF_FLAG_FD_CLOEXEC is added to `flags`. Errors as perf_breakpoint_open: ENOSPC (`slots`),
// ESRCH/EACCES/EPERM (`pid`), anything else (`attr`).
Result<Fd> perf_event_open_attr(const ::perf_event_attr& attr, pid_t pid, int cpu, int group_fd,
                                unsigned long flags);
// /proc/sys/kernel/perf_event_paranoid; nullopt when unreadable.
std::optional<int> perf_event_paranoid();
// An EACCES/EPERM of perf_event_open with the knob that decides it named: "perf_event_paranoid
// is N (/proc/sys/kernel/perf_event_paranoid; NEEDS)", `needs` saying what needs which value.
// Other errors are returned unchanged.
Error name_perf_permission(const Error& error, std::string_view needs);
// ioctl(2) on a perf event descriptor (PERF_EVENT_IOC_*); returns the ioctl's value. Errors
// naming `fd` (EBADF, ENOTTY) or `arg` (EINVAL: e.g. SET_OUTPUT to an incompatible event).
Result<int> perf_ioctl(int fd, unsigned long request, unsigned long arg);
// PERF_EVENT_IOC_ID: the event's id, as samples carry it (an inherited copy reports its
// parent's id).
Result<std::uint64_t> perf_event_id(int fd);
// read(2) of a counting event opened with read_format 0: its count (one u64). EIO naming `fd`
// on a short read.
Result<std::uint64_t> perf_read_count(int fd);

// The system's page size (sysconf(_SC_PAGESIZE)).
std::size_t page_size();
// mmap(2) of `bytes` at `offset` of `fd`, shared, readable and writable (a perf ring whose
// data_tail the reader advances; at aux_offset, an AUX area the kernel must not overwrite).
// Errors naming `bytes` (ENOMEM, EAGAIN, EPERM: over perf_event_mlock_kb) or `fd` (any other:
// EBADF, EINVAL, ENODEV for a descriptor without mmap, EOPNOTSUPP for an AUX area of an event
// without one).
Result<void*> map_shared(int fd, std::size_t bytes, std::uint64_t offset = 0);
// munmap(2); errors are ignored (nothing is left to do about them).
void unmap(void* addr, std::size_t bytes);

// poll(2) for POLLIN on every descriptor in `fds`, retried on EINTR with the full timeout
// (-1: forever). Returns the revents of each descriptor (0: nothing), in the order of `fds`; a
// perf event whose task (and every inherited copy) exited reports POLLHUP.
Result<std::vector<short>> poll_in(const std::vector<int>& fds, int timeout_ms);

// A kernel CPU list ("0-3,5,7-8\n"), ascending. EINVAL naming `cpus` for anything else.
Result<std::vector<int>> parse_cpu_list(std::string_view text);
// The online CPUs (/sys/devices/system/cpu/online). ENOENT naming `cpus` when unreadable.
Result<std::vector<int>> online_cpus();

// PTRACE_GETREGS / PTRACE_SETREGS (x86_64 general registers). ESRCH/EPERM naming `pid` (no such
// tracee, or not in a ptrace-stop), EIO/EFAULT naming `regs`.
Result<void> ptrace_getregs(pid_t pid, ::user_regs_struct& regs);
Result<void> ptrace_setregs(pid_t pid, const ::user_regs_struct& regs);
// PTRACE_SINGLEBLOCK (x86: resume with EFLAGS.TF and DEBUGCTL.BTF, a stop after the next taken
// branch where the hardware honours BTF).
Result<void> ptrace_singleblock(pid_t pid, int signal = 0);

}  // namespace hwarb::linux
